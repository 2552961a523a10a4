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
//      GEMMs, 85M parameters), for n = 1 and n = 16, beside the floor.
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

#include "detail/bf16.hpp"
#include "detail/matmul.hpp"
#include "detail/thread_pool.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using specdec::bf16;
using specdec::ThreadPool;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct Timing {
    double median = 0, best = 0;  // seconds
};

/// Wall time of `run()`: one warm-up call, then at least `min_reps` calls and `min_seconds`.
template <class Run>
Timing time_runs(Run&& run, int min_reps = 5, double min_seconds = 0.15, int max_reps = 3000) {
    run(0);
    std::vector<double> times;
    const auto start = Clock::now();
    for (int rep = 1; rep <= max_reps; ++rep) {
        const auto t0 = Clock::now();
        run(rep);
        times.push_back(seconds_since(t0));
        if (rep >= min_reps && seconds_since(start) >= min_seconds) break;
    }
    std::sort(times.begin(), times.end());
    return {times[times.size() / 2], times.front()};
}

// ---------------------------------------------------------------------------------------------------
// Ceilings

double sum_scalar(const float* p, std::size_t count) {
    float s[8] = {};
    std::size_t i = 0;
    for (; i + 8 <= count; i += 8)
        for (int l = 0; l < 8; ++l) s[l] += p[i + l];
    for (; i < count; ++i) s[0] += p[i];
    double total = 0;
    for (float v : s) total += v;
    return total;
}

/// f32 FMA chains in registers: `chains` independent accumulators hide the FMA latency.
float fma_loop_scalar(long iters, float seed) {
    float a0 = seed, a1 = seed + 1, a2 = seed + 2, a3 = seed + 3;
    for (long it = 0; it < iters; ++it) {
        a0 = a0 * 0.999999f + 1e-7f, a1 = a1 * 0.999999f + 1e-7f;
        a2 = a2 * 0.999999f + 1e-7f, a3 = a3 * 0.999999f + 1e-7f;
    }
    return a0 + a1 + a2 + a3;
}

#if defined(__x86_64__)
SPECDEC_TARGET_AVX512 double sum_avx512(const float* p, std::size_t count) {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    std::size_t i = 0;
    for (; i + 64 <= count; i += 64) {
        s0 = _mm512_add_ps(s0, _mm512_loadu_ps(p + i));
        s1 = _mm512_add_ps(s1, _mm512_loadu_ps(p + i + 16));
        s2 = _mm512_add_ps(s2, _mm512_loadu_ps(p + i + 32));
        s3 = _mm512_add_ps(s3, _mm512_loadu_ps(p + i + 48));
    }
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
    return sum_scalar(lanes, 16) + sum_scalar(p + i, count - i);
}

SPECDEC_TARGET_AVX2 double sum_avx2(const float* p, std::size_t count) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
    std::size_t i = 0;
    for (; i + 32 <= count; i += 32) {
        s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i));
        s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
        s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16));
        s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3)));
    return sum_scalar(lanes, 8) + sum_scalar(p + i, count - i);
}

constexpr int kChains512 = 16;  // 2 FMA pipes x 4-cycle latency = 8 in flight; 16 for margin
SPECDEC_TARGET_AVX512 float fma_loop_avx512(long iters, float seed) {
    __m512 acc[kChains512];
    for (int c = 0; c < kChains512; ++c) acc[c] = _mm512_set1_ps(seed + float(c));
    const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
    for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
        for (int c = 0; c < kChains512; ++c) acc[c] = _mm512_fmadd_ps(acc[c], a, b);
    alignas(64) float lanes[16];
    __m512 s = acc[0];
    for (int c = 1; c < kChains512; ++c) s = _mm512_add_ps(s, acc[c]);
    _mm512_store_ps(lanes, s);
    return float(sum_scalar(lanes, 16));
}

constexpr int kChains256 = 12;  // of the 16 ymm registers
SPECDEC_TARGET_AVX2 float fma_loop_avx2(long iters, float seed) {
    __m256 acc[kChains256];
    for (int c = 0; c < kChains256; ++c) acc[c] = _mm256_set1_ps(seed + float(c));
    const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
    for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
        for (int c = 0; c < kChains256; ++c) acc[c] = _mm256_fmadd_ps(acc[c], a, b);
    alignas(32) float lanes[8];
    __m256 s = acc[0];
    for (int c = 1; c < kChains256; ++c) s = _mm256_add_ps(s, acc[c]);
    _mm256_store_ps(lanes, s);
    return float(sum_scalar(lanes, 8));
}
#endif

double sum_best(const float* p, std::size_t count) {
#if defined(__x86_64__)
    if (specdec::cpu_features().avx512) return sum_avx512(p, count);
    if (specdec::cpu_features().avx2_fma) return sum_avx2(p, count);
#endif
    return sum_scalar(p, count);
}

/// Runs the FMA loop; returns flops per iteration.
double fma_best(long iters, float seed, float* sink) {
#if defined(__x86_64__)
    if (specdec::cpu_features().avx512) return *sink = fma_loop_avx512(iters, seed), 2.0 * 16 * kChains512;
    if (specdec::cpu_features().avx2_fma) return *sink = fma_loop_avx2(iters, seed), 2.0 * 8 * kChains256;
#endif
    return *sink = fma_loop_scalar(iters, seed), 2.0 * 4;
}

struct Ceilings {
    double read_gbs_1 = 0, read_gbs_all = 0;     // GB/s
    double fma_gflops_1 = 0, fma_gflops_all = 0; // GFLOP/s
    int threads = 1;
};

// Ceilings are the best of many short passes: on a shared machine a pass that ran undisturbed is the
// one that shows what the hardware can do.

/// Read bandwidth: 16 passes, each over a different 64 MiB of the buffer split in size() parts.
double read_bandwidth(ThreadPool& pool, const float* p, std::size_t count) {
    const int parts = pool.size(), passes = 16;
    const std::size_t span = count / passes;
    std::vector<double> sums(std::size_t(parts), 0.0);
    double best = 0;
    for (int pass = 0; pass < passes; ++pass) {
        const float* base = p + std::size_t(pass) * span;
        const auto t0 = Clock::now();
        pool.parallel_for(parts, [&](int t) {
            const std::size_t b = span * std::size_t(t) / std::size_t(parts), e = span * std::size_t(t + 1) / std::size_t(parts);
            sums[std::size_t(t)] += sum_best(base + b, e - b);
        });
        best = std::max(best, double(span * sizeof(float)) / seconds_since(t0) / 1e9);
    }
    if (sums[0] == 12345.678) std::fputs("", stderr);  // keeps the sums alive
    return best;
}

/// FMA rate: 30 passes of ~3 ms, every thread running the register-resident loop.
double fma_rate(ThreadPool& pool) {
    const long iters = 500'000;
    std::vector<float> sinks(std::size_t(pool.size()));
    std::vector<double> flops_per_iter(std::size_t(pool.size()));
    double best = 0;
    for (int pass = 0; pass < 30; ++pass) {
        const auto t0 = Clock::now();
        pool.parallel_for(pool.size(), [&](int t) {
            flops_per_iter[std::size_t(t)] = fma_best(iters, 1.0f + float(t), &sinks[std::size_t(t)]);
        });
        const double secs = seconds_since(t0);
        double flops = 0;
        for (double f : flops_per_iter) flops += f * double(iters);
        best = std::max(best, flops / secs / 1e9);
    }
    return best;
}

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

/// The 110M model's 12 layers x (wq, wk, wv, wo, w1, w2, w3), laid out back to back in the arena.
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
    const double bytes = double(params) * sizeof(WT);
    const double floor_s = bytes / (ctx.ceilings.read_gbs_all * 1e9);
    double t_n1 = 0;
    for (int n : {1, 16}) {
        std::fprintf(stderr, "  decode step %s n=%d\n", sizeof(WT) == 4 ? "f32" : "bf16", n);
        const Timing timing = time_runs([&](int) {
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
        r.path = "fast";
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
    std::printf("cpu: avx2_fma=%d avx512=%d avx512_bf16=%d, path=%s, threads=%d\n", f.avx2_fma, f.avx512,
                f.avx512_bf16, specdec::detail::isa_name(specdec::detail::best_isa()), pool.size());

    // 1 GiB of f32: the bandwidth probe, then the f32 weight arena. Filled in parallel (first touch).
    std::fprintf(stderr, "filling 1 GiB ...\n");
    const std::size_t n_floats = (std::size_t(1) << 30) / sizeof(float);
    std::vector<float> big(n_floats);
    std::vector<bf16> big16(std::size_t(96) << 20);  // 192 MiB of bf16 weights (> 85M params)
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
    c.fma_gflops_1 = fma_rate(pool1);
    c.fma_gflops_all = fma_rate(pool);
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
