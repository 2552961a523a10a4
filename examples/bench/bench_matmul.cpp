// bench_matmul — how fast is y = x·Wᵀ on this CPU, measured against the CPU's own ceilings?
//
// Speculative decoding pays only if verifying n tree nodes costs about what decoding one token
// costs. This program measures, in one run:
//   1. the ceilings: read bandwidth (sum over 1 GiB) and f32 FMA rate (register-resident loop),
//      on 1 thread and on all threads;
//   2. every weight shape of a ~110M and a ~15M Llama, f32 and bf16 weights, n = 1 .. 512:
//      median time, GB/s of weight traffic, GFLOP/s, time relative to n = 1, time relative to the
//      bandwidth floor (weight bytes / measured bandwidth) and % of the FMA ceiling;
//      weights rotate through copies spread over 1 GiB so that every run reads them from DRAM;
//   3. the seven matrices of all 12 layers of the 110M model in sequence (one decode step's
//      GEMMs, 85M parameters), for n = 1, 8 and 16, beside the floor: multiplied as stored (rows
//      kernel) and packed as the model packs them (panels, where the CPU has AVX-512).
// The plain-loop reference runs beside the fast path for a few shapes.
//
// Build and run (default -march: the library's runtime dispatch picks AVX-512 / AVX2 itself):
//   g++ -std=c++20 -O2 -Wall -Wextra -Wpedantic -Werror -I. examples/bench/bench_matmul.cpp -o /tmp/bench_matmul -pthread
//   /tmp/bench_matmul [--threads N] [--csv FILE]
// Prints the table to stdout (progress to stderr), and the same rows as CSV to FILE. ~1 minute.
// Times are medians (and bests) of repeated runs; "x floor" and "% FMA" use the median.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "detail/model/bf16.hpp"
#include "detail/model/huge_pages.hpp"
#include "detail/model/matmul.hpp"
#include "detail/model/panel_matmul.hpp"
#include "detail/model/thread_pool.hpp"
#include "../machine.hpp"
#include "ceilings.hpp"

namespace {

using namespace bench;

// ---------------------------------------------------------------------------------------------------
// Table

struct Row {
    std::string section, model, shape, dtype, path;
    int n = 0, threads = 0;
    double median_us = 0, best_us = 0, weight_gbs = 0, gflops = 0, vs_n1 = 0, x_floor = 0, pct_fma = 0;
};

void print_header() {
    std::printf("%-7s %-5s %-10s %-5s %4s %-9s %10s %10s %7s %8s %7s %8s %7s\n", "section", "model", "W (m x k)",
                "dtype", "n", "path", "median us", "best us", "W GB/s", "GFLOP/s", "vs n=1", "x floor", "% FMA");
}

void print_row(const Row& r) {
    std::printf("%-7s %-5s %-10s %-5s %4d %-9s %10.1f %10.1f %7.1f %8.1f %7.2f %8.2f %6.1f%%\n", r.section.c_str(),
                r.model.c_str(), r.shape.c_str(), r.dtype.c_str(), r.n, r.path.c_str(), r.median_us, r.best_us,
                r.weight_gbs, r.gflops, r.vs_n1, r.x_floor, r.pct_fma);
    std::fflush(stdout);
}

void write_csv(const std::string& path, const Ceilings& c, const std::vector<Row>& rows) {
    std::FILE* f = std::fopen(path.c_str(), "w");
    if (!f) throw std::runtime_error("cannot open '" + path + "' for writing");
    std::fprintf(f, "section,model,shape,dtype,n,path,threads,median_us,best_us,weight_gbs,gflops,vs_n1,x_floor,pct_fma_peak\n");
    std::fprintf(f, "ceiling,,read 1 GiB,,,,1,,,%.2f,,,,\n", c.read_gbs_1);
    std::fprintf(f, "ceiling,,read 1 GiB,,,,%d,,,%.2f,,,,\n", c.threads, c.read_gbs_all);
    std::fprintf(f, "ceiling,,fma f32,,,,1,,,,%.2f,,,\n", c.fma_gflops_1);
    std::fprintf(f, "ceiling,,fma f32,,,,%d,,,,%.2f,,,\n", c.threads, c.fma_gflops_all);
    for (const Row& r : rows)
        std::fprintf(f, "%s,%s,%s,%s,%d,%s,%d,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.3f\n", r.section.c_str(),
                     r.model.c_str(), r.shape.c_str(), r.dtype.c_str(), r.n, r.path.c_str(), r.threads, r.median_us,
                     r.best_us, r.weight_gbs, r.gflops, r.vs_n1, r.x_floor, r.pct_fma);
    std::fclose(f);
}

// ---------------------------------------------------------------------------------------------------
// Workloads

struct Shape {
    const char* model;
    const char* role;
    int m, k;
};

/// Weights for one dtype: a large arena, so that runs can rotate through copies bigger than any cache.
template <class WT>
struct Arena {
    const WT* data;
    std::size_t count;
    /// Copy `rep` of an m x k matrix.
    const WT* copy(int m, int k, int rep) const {
        const std::size_t size = std::size_t(m) * std::size_t(k);
        const std::size_t copies = std::max<std::size_t>(1, count / size);
        return data + (std::size_t(rep) % copies) * size;
    }
};

struct Context {
    ThreadPool& pool;
    Ceilings ceilings;
    std::vector<float>& x;  // (512, 2048) random activations
    std::vector<float>& y;  // (512, 32000)
    std::vector<Row> rows;
};

template <class WT>
Row measure_shape(Context& ctx, const Arena<WT>& arena, const Shape& s, int n, bool reference, double t_n1_us) {
    const Timing timing = time_runs([&](int rep) {
        const WT* W = arena.copy(s.m, s.k, rep);
        if (reference) specdec::matmul_reference(ctx.y.data(), ctx.x.data(), W, n, s.k, s.m);
        else specdec::matmul(ctx.pool, ctx.y.data(), ctx.x.data(), W, n, s.k, s.m);
    }, reference ? 3 : 5, reference ? 0.05 : 0.15);
    const double secs = timing.median;
    const double bytes = double(s.m) * s.k * sizeof(WT), flops = 2.0 * n * s.m * s.k;
    Row r;
    r.section = "shape";
    r.model = s.model;
    r.shape = std::to_string(s.m) + "x" + std::to_string(s.k);
    r.dtype = sizeof(WT) == 4 ? "f32" : "bf16";
    r.path = reference ? "reference" : "fast";
    r.n = n;
    r.threads = reference ? 1 : ctx.pool.size();
    r.median_us = secs * 1e6;
    r.best_us = timing.best * 1e6;
    r.weight_gbs = bytes / secs / 1e9;
    r.gflops = flops / secs / 1e9;
    r.vs_n1 = t_n1_us > 0 ? r.median_us / t_n1_us : 1.0;
    r.x_floor = secs / (bytes / (ctx.ceilings.read_gbs_all * 1e9));
    r.pct_fma = 100.0 * r.gflops / ctx.ceilings.fma_gflops_all;
    return r;
}

template <class WT>
void bench_shapes(Context& ctx, const Arena<WT>& arena, const std::vector<Shape>& shapes) {
    const int ns[] = {1, 2, 4, 8, 16, 32, 64, 512};
    for (const Shape& s : shapes) {
        std::fprintf(stderr, "  %s %dx%d %s\n", s.model, s.m, s.k, sizeof(WT) == 4 ? "f32" : "bf16");
        double t_n1 = 0;
        for (int n : ns) {
            Row r = measure_shape(ctx, arena, s, n, false, t_n1);
            if (n == 1) t_n1 = r.median_us;
            print_row(r);
            ctx.rows.push_back(r);
        }
    }
}

/// The 110M model's 12 layers x (wq, wk, wv, wo, w1, w2, w3), laid out back to back in the arena:
/// multiplied as stored ("rows": the rows kernel) and, where the CPU has AVX-512, packed as the model
/// packs them ("panels": panel_matmul.hpp, from a float32 copy of the same values), side by side.
template <class WT>
void bench_decode_step(Context& ctx, const Arena<WT>& arena) {
    const int L = 12, D = 768, F = 2048;
    struct Mat {
        int m, k;
    };
    const Mat layer[] = {{D, D}, {D, D}, {D, D}, {D, D}, {F, D}, {D, F}, {F, D}};
    std::size_t params = 0;
    for (int l = 0; l < L; ++l)
        for (const Mat& w : layer) params += std::size_t(w.m) * w.k;
    if (params > arena.count) throw std::runtime_error("arena too small for the decode step");
    std::vector<specdec::PanelMatrix<WT>> panels;
    if (specdec::panels_available()) {
        std::fprintf(stderr, "  packing the decode step's %s matrices as panels\n", sizeof(WT) == 4 ? "f32" : "bf16");
        const WT* W = arena.data;
        std::vector<float> rows;
        for (int l = 0; l < L; ++l)
            for (const Mat& w : layer) {
                rows.resize(std::size_t(w.m) * w.k);
                for (std::size_t i = 0; i < rows.size(); ++i) rows[i] = specdec::detail::widen(W[i]);
                panels.emplace_back(w.m, w.k, [&](int j) { return rows.data() + std::size_t(j) * w.k; });
                W += std::size_t(w.m) * w.k;
            }
    }
    const double bytes = double(params) * sizeof(WT);
    const double floor_s = bytes / (ctx.ceilings.read_gbs_all * 1e9);
    for (const char* path : {"rows", "panels"}) {
        if (std::string(path) == "panels" && panels.empty()) continue;
        double t_n1 = 0;
        for (int n : {1, 8, 16}) {
            std::fprintf(stderr, "  decode step %s %s n=%d\n", sizeof(WT) == 4 ? "f32" : "bf16", path, n);
            const Timing timing = time_runs([&](int) {
                if (std::string(path) == "panels") {
                    for (const auto& P : panels) specdec::panel_matmul(ctx.pool, ctx.y.data(), ctx.x.data(), P, n);
                    return;
                }
                const WT* W = arena.data;
                for (int l = 0; l < L; ++l)
                    for (const Mat& w : layer) {
                        specdec::matmul(ctx.pool, ctx.y.data(), ctx.x.data(), W, n, w.k, w.m);
                        W += std::size_t(w.m) * w.k;
                    }
            }, 7, 0.5);
            const double secs = timing.median;
            Row r;
            r.section = "decode";
            r.model = "110M";
            r.shape = "12x7 mats";
            r.dtype = sizeof(WT) == 4 ? "f32" : "bf16";
            r.path = path;
            r.n = n;
            r.threads = ctx.pool.size();
            r.median_us = secs * 1e6;
            r.best_us = timing.best * 1e6;
            r.weight_gbs = bytes / secs / 1e9;
            r.gflops = 2.0 * n * double(params) / secs / 1e9;
            if (n == 1) t_n1 = r.median_us;
            r.vs_n1 = r.median_us / t_n1;
            r.x_floor = secs / floor_s;
            r.pct_fma = 100.0 * r.gflops / ctx.ceilings.fma_gflops_all;
            print_row(r);
            ctx.rows.push_back(r);
        }
    }
    std::printf("  (floor for %s: %.0f MB of weights / %.1f GB/s = %.0f us)\n", sizeof(WT) == 4 ? "f32" : "bf16",
                bytes / 1e6, ctx.ceilings.read_gbs_all, floor_s * 1e6);
}

int run(int argc, char** argv) {
    int threads = 0;
    std::string csv;
    for (int a = 1; a < argc; ++a) {
        if (!std::strcmp(argv[a], "--csv") && a + 1 < argc) csv = argv[++a];
        else if (!std::strcmp(argv[a], "--threads") && a + 1 < argc) threads = std::atoi(argv[++a]);
        else throw std::runtime_error(std::string("unknown argument '") + argv[a] + "'; usage: bench_matmul [--threads N] [--csv FILE]");
    }
    const auto started = Clock::now();
    ThreadPool pool(threads), pool1(1);
    const auto f = specdec::cpu_features();
    std::printf("cpu: %s; avx2_fma=%d avx512=%d avx512_bf16=%d, path=%s, threads=%d\n", example::machine_name().c_str(), f.avx2_fma, f.avx512,
                f.avx512_bf16, specdec::detail::isa_name(specdec::detail::best_isa()), pool.size());

    // 1 GiB of f32: the bandwidth probe, then the f32 weight arena. Filled in parallel (first touch).
    std::fprintf(stderr, "filling 1 GiB ...\n");
    const std::size_t n_floats = (std::size_t(1) << 30) / sizeof(float);
    specdec::HugeVector<float> big(n_floats);  // huge pages, as the model's weights
    specdec::HugeVector<bf16> big16(std::size_t(96) << 20);  // 192 MiB of bf16 weights (> 85M params)
    pool.parallel_for(64, [&](int t) {
        std::uint32_t state = 0x9e3779b9u * std::uint32_t(t + 1);
        const std::size_t b = n_floats * std::size_t(t) / 64, e = n_floats * std::size_t(t + 1) / 64;
        for (std::size_t i = b; i < e; ++i) {
            state = state * 1664525u + 1013904223u;  // LCG: weights in [-1, 1)
            big[i] = float(std::int32_t(state)) * (1.0f / 2147483648.0f);
        }
        const std::size_t b16 = big16.size() * std::size_t(t) / 64, e16 = big16.size() * std::size_t(t + 1) / 64;
        for (std::size_t i = b16; i < e16; ++i) big16[i] = specdec::to_bf16(big[i]);
    });

    std::fprintf(stderr, "ceilings ...\n");
    Ceilings c;
    c.threads = pool.size();
    c.read_gbs_1 = read_bandwidth(pool1, big.data(), n_floats);
    c.read_gbs_all = read_bandwidth(pool, big.data(), n_floats);
    c.fma_gflops_1 = peak_rate(pool1, fma_best);
    c.fma_gflops_all = peak_rate(pool, fma_best);
    std::printf("ceilings: read %.1f GB/s (1 thread), %.1f GB/s (%d threads); f32 FMA %.1f GFLOP/s (1 thread), "
                "%.1f GFLOP/s (%d threads)\n",
                c.read_gbs_1, c.read_gbs_all, pool.size(), c.fma_gflops_1, c.fma_gflops_all, pool.size());
    std::printf("x floor = time / (weight bytes / %.1f GB/s); %% FMA = GFLOP/s / %.1f GFLOP/s\n\n", c.read_gbs_all,
                c.fma_gflops_all);

    std::vector<float> x(std::size_t(512) * 2048), y(std::size_t(512) * 32000);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = big[i * 7 % n_floats];
    Context ctx{pool, c, x, y, {}};
    const Arena<float> arena32{big.data(), big.size()};
    const Arena<bf16> arena16{big16.data(), big16.size()};

    const std::vector<Shape> shapes = {
        {"110M", "attn", 768, 768},  {"110M", "w1/w3", 2048, 768}, {"110M", "w2", 768, 2048},
        {"110M", "cls", 32000, 768}, {"15M", "attn", 288, 288},     {"15M", "w1/w3", 768, 288},
        {"15M", "w2", 288, 768},     {"15M", "cls", 32000, 288},
    };
    print_header();
    std::fprintf(stderr, "shapes, f32 ...\n");
    bench_shapes(ctx, arena32, shapes);
    std::fprintf(stderr, "shapes, bf16 ...\n");
    bench_shapes(ctx, arena16, shapes);

    std::fprintf(stderr, "reference ...\n");
    const Shape attn110 = shapes[0], attn15 = shapes[4];
    for (auto [s, n] : {std::pair{attn110, 1}, std::pair{attn110, 16}, std::pair{attn15, 512}}) {
        Row r = measure_shape(ctx, arena32, s, n, true, 0);
        r.vs_n1 = 0;
        print_row(r);
        ctx.rows.push_back(r);
    }
    {
        Row r = measure_shape(ctx, arena16, attn110, 1, true, 0);
        r.vs_n1 = 0;
        print_row(r);
        ctx.rows.push_back(r);
    }

    std::printf("\none decode step's GEMMs of the 110M model (12 layers x 7 matrices):\n");
    bench_decode_step(ctx, arena32);
    bench_decode_step(ctx, arena16);

    if (!csv.empty()) write_csv(csv, c, ctx.rows);
    std::fprintf(stderr, "done in %.0f s\n", seconds_since(started));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_matmul: %s\n", e.what());
        return 1;
    }
}
