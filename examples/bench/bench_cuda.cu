// bench_cuda — what one CUDA forward costs, next to the ceilings of the GPU it runs on.
//
// Teaches: a decode step of a small batch is bound by reading the weights, so its floor is
// weight bytes / memory bandwidth, and verifying a token tree of N nodes should cost about as much as
// one token until the products turn compute-bound — the reason speculative decoding pays. Both
// ceilings are measured in the same run (device-to-device copy bandwidth, bf16 GEMM throughput), so
// every latency is reported as a ratio to something measured here, not to a datasheet.
//
// For a ~110M Llama (dim 768, 12 layers), a ~1B one (TinyLlama's shape: dim 2048, 22 layers, 32 heads,
// 4 kv heads) and a 7B one (dim 4096, 32 layers), with random bf16 weights drawn on the device and
// 128 committed tokens: single-token decode latency and its floor, and tree verification for
// N = 1, 2, 4, 8, 16, 32, 64 as a ratio to N = 1, with CUDA graphs off and on, and with every product
// on cuBLASLt ("lt-first") beside the model as built ("skinny": our kernel for n <= 2). Latency is host
// wall time of CudaModel::forward (upload, kernels, logits copied back), median of --reps runs after
// warm-up. Then two breakdowns, each kernel alone, timed with events: one layer's products and the
// logits for n = 1..16 (cuBLASLt's first choice, its timed best, the skinny kernel) as a share of the
// copy bandwidth, and the layer's other kernels at n = 1 (RMSNorm, RoPE + KV store, attention, SwiGLU).
//
// Run:    build/cuda/bench_cuda [--models 110m,1b,7b] [--nodes 1,2,4,8,16,32,64] [--reps 30] [--csv bench.csv]
// Prints: one table row per (model, graphs, N); progress goes to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "detail/cuda/model.cuh"
#include "specdec.hpp"

using namespace specdec;

namespace {

struct Shape {
    std::string name;
    Config cfg;
};

std::vector<Shape> all_shapes() {
    return {
        {"110m", Config{.hidden_size = 768, .intermediate_size = 2048, .num_hidden_layers = 12, .num_attention_heads = 12,
                        .num_key_value_heads = 12, .vocab_size = 32000, .max_position_embeddings = 1024}},
        {"1b", Config{.hidden_size = 2048, .intermediate_size = 5632, .num_hidden_layers = 22, .num_attention_heads = 32,
                      .num_key_value_heads = 4, .vocab_size = 32000, .max_position_embeddings = 2048}},
        {"7b", Config{.hidden_size = 4096, .intermediate_size = 11008, .num_hidden_layers = 32, .num_attention_heads = 32,
                      .num_key_value_heads = 32, .vocab_size = 32000, .max_position_embeddings = 2048}},
    };
}

/// Seconds per call of f on the context's stream, timed with CUDA events over `reps` calls.
template <class F>
double device_seconds(CudaContext& ctx, int reps, F&& f) {
    cudaEvent_t start, stop;
    SPECDEC_CUDA_CHECK(cudaEventCreate(&start));
    SPECDEC_CUDA_CHECK(cudaEventCreate(&stop));
    f();  // warm-up
    SPECDEC_CUDA_CHECK(cudaEventRecord(start, ctx.stream()));
    for (int i = 0; i < reps; ++i) f();
    SPECDEC_CUDA_CHECK(cudaEventRecord(stop, ctx.stream()));
    SPECDEC_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    SPECDEC_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ms / 1e3 / reps;
}

/// Device-to-device copy of 1 GiB: each byte is read once and written once.
double copy_bandwidth(CudaContext& ctx) {
    const std::size_t bytes = std::size_t{1} << 30;
    DeviceBuffer<std::byte> a(bytes), b(bytes);
    SPECDEC_CUDA_CHECK(cudaMemsetAsync(a.get(), 1, bytes, ctx.stream()));
    const double s = device_seconds(ctx, 10, [&] {
        SPECDEC_CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, ctx.stream()));
    });
    return 2.0 * bytes / s;
}

/// The model's own product (bf16 x bf16 -> fp32) at 8192^3.
double gemm_flops(CudaContext& ctx) {
    const int n = 8192;
    const std::size_t count = static_cast<std::size_t>(n) * n;
    DeviceBuffer<__nv_bfloat16> x(count), w(count);
    DeviceBuffer<float> y(count);
    SPECDEC_CUDA_CHECK(cudaMemsetAsync(x.get(), 0, x.bytes(), ctx.stream()));
    SPECDEC_CUDA_CHECK(cudaMemsetAsync(w.get(), 0, w.bytes(), ctx.stream()));
    Gemm gemm(ctx);
    const double s = device_seconds(ctx, 10, [&] { gemm(y.get(), x.get(), w.get(), n, n, n); });
    return 2.0 * n * n * static_cast<double>(n) / s;
}

/// A random tree of n nodes below one root.
Tree random_tree(int n, int vocab, std::uint64_t seed) {
    Tree t;
    const StepRng rng{seed, 0, RngStream::kUser};
    t.add_root(static_cast<int>(rng.uniform(0, 0) * vocab));
    for (int i = 1; i < n; ++i) t.add(static_cast<int>(rng.uniform(i, 1) * vocab), static_cast<int>(rng.uniform(i, 0) * i));
    return t;
}

/// Median wall time of model.forward(tree) over `reps` runs after three warm-ups (the first of which
/// captures the graph when graphs are on). The cache length stays fixed: nothing is committed.
double forward_seconds(CudaModel& model, const Tree& tree, int reps) {
    using clock = std::chrono::steady_clock;
    for (int i = 0; i < 3; ++i) model.forward(tree, 0);
    std::vector<double> t(reps);
    for (double& s : t) {
        const auto t0 = clock::now();
        model.forward(tree, 0);
        s = std::chrono::duration<double>(clock::now() - t0).count();
    }
    std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
    return t[reps / 2];
}

/// One layer's products and the logits' at n = 1, 2, 4, 8 and 16, each run three ways: cuBLASLt's heuristic
/// first choice, the fastest of its candidates timed, and the skinny kernel (n <= 8). Rows of text for
/// the table printed after the forward table: microseconds and the bandwidth at which W was read.
std::vector<std::string> product_rows(CudaContext& ctx, const std::string& model, const Config& cfg,
                                      const DeviceWeights& w, double bandwidth) {
    const int D = cfg.hidden_size, F = cfg.intermediate_size, qkv = (cfg.num_attention_heads + 2 * cfg.num_key_value_heads) * cfg.head_dim();
    const DeviceLayer& l = w.layers[0];
    struct Product {
        const char* name;
        const __nv_bfloat16* W;
        int k, m;
    };
    const Product products[] = {{"qkv", l.wqkv.get(), D, qkv},       {"o", l.wo.get(), cfg.num_attention_heads * cfg.head_dim(), D},
                                {"gate_up", l.w_gate_up.get(), D, 2 * F}, {"down", l.w_down.get(), F, D},
                                {"logits", w.output_matrix(), D, cfg.vocab_size}};
    Gemm first(ctx, GemmOptions{.skinny_max_n = 0}), timed(ctx, GemmOptions{.skinny_max_n = 0, .timed_choice = true});
    Gemm skinny(ctx, GemmOptions{.skinny_max_n = kernels::kSkinnyMaxN});
    std::vector<std::string> out;
    for (const int n : {1, 2, 4, 8, 16}) {
        for (const Product& p : products) {
            DeviceBuffer<__nv_bfloat16> x(static_cast<std::size_t>(n) * p.k);
            DeviceBuffer<float> y(static_cast<std::size_t>(n) * p.m);
            SPECDEC_CUDA_CHECK(cudaMemsetAsync(x.get(), 0, x.bytes(), ctx.stream()));
            const double bytes = 2.0 * p.m * p.k;
            char line[200];
            const auto time_us = [&](Gemm& g) {
                return device_seconds(ctx, 20, [&] { g(y.get(), x.get(), p.W, n, p.k, p.m); }) * 1e6;
            };
            const double a = time_us(first), b = time_us(timed);
            const double c = skinny.takes_skinny(n, p.k) ? time_us(skinny) : 0.0;
            std::snprintf(line, sizeof line, "%-6s %-8s %3d %8.1f %10.1f (%3.0f%%) %10.1f (%3.0f%%) ", model.c_str(), p.name,
                          n, bytes / bandwidth * 1e6, a, bytes / bandwidth * 1e6 / a * 100, b,
                          bytes / bandwidth * 1e6 / b * 100);
            std::string row = line;
            if (c > 0) std::snprintf(line, sizeof line, "%10.1f (%3.0f%%)", c, bytes / bandwidth * 1e6 / c * 100), row += line;
            else row += "         -";
            out.push_back(row);
        }
    }
    return out;
}

/// The other kernels of one layer at n = 1 over 128 committed rows, each alone: microseconds. What a
/// decode step spends beyond its products (docs/cuda.md).
std::vector<std::string> piece_rows(CudaContext& ctx, const std::string& model, const Config& cfg) {
    const int D = cfg.hidden_size, H = cfg.num_attention_heads, Hkv = cfg.num_key_value_heads, hd = cfg.head_dim();
    const int F = cfg.intermediate_size, kvd = Hkv * hd, T = 128, n = 1, C = cfg.max_position_embeddings + 64;
    const int split_keys = kernels::attention_split_keys(C), max_splits = (C + split_keys - 1) / split_keys;
    cudaStream_t s = ctx.stream();
    DeviceBuffer<float> x(static_cast<std::size_t>(D)), norm(static_cast<std::size_t>(D)), qkv(static_cast<std::size_t>(H + 2 * Hkv) * hd);
    DeviceBuffer<float> cs(static_cast<std::size_t>(hd)), gate_up(static_cast<std::size_t>(2) * F);
    DeviceBuffer<float> part_acc(static_cast<std::size_t>(H) * max_splits * hd), part_ml(static_cast<std::size_t>(H) * max_splits * 2);
    DeviceBuffer<__nv_bfloat16> xb(static_cast<std::size_t>(D)), att(static_cast<std::size_t>(H) * hd), act(static_cast<std::size_t>(F));
    DeviceBuffer<__nv_bfloat16> k(static_cast<std::size_t>(C) * kvd), v(static_cast<std::size_t>(C) * kvd);
    for (DeviceBuffer<float>* b : {&x, &norm, &qkv, &cs, &gate_up}) SPECDEC_CUDA_CHECK(cudaMemsetAsync(b->get(), 0, b->bytes(), s));
    SPECDEC_CUDA_CHECK(cudaMemsetAsync(k.get(), 0, k.bytes(), s));
    SPECDEC_CUDA_CHECK(cudaMemsetAsync(v.get(), 0, v.bytes(), s));
    const std::vector<std::uint32_t> mask{1u};
    const auto d_mask = to_device<std::uint32_t>(mask);
    const auto d_params = to_device<kernels::StepParams>(std::vector<kernels::StepParams>{{T, 1, 0}});
    const kernels::TreeAttention a{.out = att.get(), .part_acc = part_acc.get(), .part_ml = part_ml.get(), .qkv = qkv.get(),
                                   .k_cache = k.get(), .v_cache = v.get(), .mask = d_mask.get(), .params = d_params.get(),
                                   .n = n, .H = H, .Hkv = Hkv, .hd = hd, .mask_words = 1, .split_keys = split_keys,
                                   .max_splits = max_splits};
    const auto us = [&](auto&& f) { return device_seconds(ctx, 50, f) * 1e6; };
    const double rms = us([&] { kernels::launch_rmsnorm(s, xb.get(), x.get(), norm.get(), n, D, 1e-5f); });
    const double rope = us([&] { kernels::launch_rope_store_kv(s, qkv.get(), k.get(), v.get(), cs.get(), d_params.get(), n, H, Hkv, hd); });
    const double attn = us([&] { kernels::launch_tree_attention(s, a, (T + 1 + split_keys - 1) / split_keys); });
    const double attn_all = us([&] { kernels::launch_tree_attention(s, a, max_splits); });
    const double glu = us([&] { kernels::launch_swiglu(s, act.get(), gate_up.get(), n, F); });
    char line[200];
    std::snprintf(line, sizeof line, "%-6s %10.1f %10.1f %10.1f %14.1f %10.1f %12.1f", model.c_str(), rms, rope, attn,
                  attn_all, glu, 2 * rms + rope + attn + glu);
    return {line};
}

struct Row {
    std::string model;
    double read_mb = 0;  // weight bytes one forward reads
    bool graphs = false;
    std::string products;  // "skinny" (as built) or "lt-first" (cuBLASLt's first choice for every product)
    int n_nodes = 0;
    double latency_ms = 0, floor_ms = 0, over_n1 = 0;  // over_n1: over the first --nodes size (1 by default)
};

}  // namespace

int main(int argc, char** argv) {
    std::string csv_path, models = "110m,1b,7b", nodes = "1,2,4,8,16,32,64";
    int reps = 30;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--csv" && i + 1 < argc) csv_path = argv[++i];
        else if (a == "--models" && i + 1 < argc) models = argv[++i];
        else if (a == "--nodes" && i + 1 < argc) nodes = argv[++i];
        else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::stoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: %s [--models 110m,1b,7b] [--nodes 1,2,...,64] [--reps N] [--csv FILE]\n", argv[0]);
            return 2;
        }
    }
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0) {
        std::fprintf(stderr, "bench_cuda: no CUDA device (%s)\n",
                     status != cudaSuccess ? cudaGetErrorString(status) : "cudaGetDeviceCount found none");
        return 1;
    }
    try {
        CudaContext ctx;
        std::fprintf(stderr, "[bench] %s: measuring copy bandwidth and GEMM throughput\n", ctx.properties().name);
        const double bandwidth = copy_bandwidth(ctx), flops = gemm_flops(ctx);
        std::printf("device: %s\nceilings: device-to-device copy %.0f GB/s, bf16 GEMM (8192^3, fp32 out) %.1f TFLOP/s\n\n",
                    ctx.properties().name, bandwidth / 1e9, flops / 1e12);
        std::printf("%-6s %8s %6s %-9s %4s %12s %10s %9s %9s\n", "model", "read MB", "graphs", "products", "N",
                    "latency ms", "floor ms", "x floor", "x first N");

        std::vector<Row> rows;
        std::vector<int> sizes;  // tree sizes to time; the first is the ratio's base
        for (std::size_t at = 0; at < nodes.size();) {
            const std::size_t comma = std::min(nodes.find(',', at), nodes.size());
            const int N = std::stoi(nodes.substr(at, comma - at));
            if (N < 1 || N > 64) throw std::invalid_argument("--nodes: " + std::to_string(N) + " is outside 1..64");
            sizes.push_back(N);
            at = comma + 1;
        }
        std::vector<std::string> product_table, piece_table;
        // The model's products as built (the skinny kernel for n <= 2, cuBLASLt's first choice above),
        // without and with graphs, then cuBLASLt for every product, for the side-by-side ratio.
        struct Setup {
            CudaGraphs graphs;
            GemmOptions gemm;
            const char* name;
        };
        const Setup setups[] = {{CudaGraphs::kOff, GemmOptions{}, "skinny"},
                                {CudaGraphs::kOn, GemmOptions{}, "skinny"},
                                {CudaGraphs::kOn, GemmOptions{.skinny_max_n = 0}, "lt-first"}};
        for (const Shape& shape : all_shapes()) {
            if (("," + models + ",").find("," + shape.name + ",") == std::string::npos) continue;
            const Config& cfg = shape.cfg;
            std::vector<int> prompt(129);
            for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>((i * 7919) % cfg.vocab_size);
            for (const Setup& setup : setups) {
                const CudaGraphs graphs = setup.graphs;
                std::fprintf(stderr, "[bench] %s: random bf16 weights, 128 committed tokens, graphs %s, products %s\n",
                             shape.name.c_str(), graphs == CudaGraphs::kOn ? "on" : "off", setup.name);
                CudaModel model(cfg, random_device_weights(cfg, 1), ctx,
                                CudaModelOptions{.max_tree_nodes = 64, .graphs = graphs, .gemm = setup.gemm});
                if (&setup == &setups[0]) {
                    std::fprintf(stderr, "[bench] %s: the products one by one\n", shape.name.c_str());
                    const auto more = product_rows(ctx, shape.name, cfg, model.device_weights(), bandwidth);
                    product_table.insert(product_table.end(), more.begin(), more.end());
                    piece_table.push_back(piece_rows(ctx, shape.name, cfg)[0]);
                }
                detail::prefill(model, std::span<const int>(prompt).first(128));
                const double weight_bytes = static_cast<double>(model.device_weights().bytes_read_per_step());
                const double floor_ms = weight_bytes / bandwidth * 1e3;
                double n1 = 0;
                for (int N : sizes) {
                    std::fprintf(stderr, "[bench] %s: N = %d\n", shape.name.c_str(), N);
                    const double ms = forward_seconds(model, random_tree(N, cfg.vocab_size, N), reps) * 1e3;
                    if (n1 == 0) n1 = ms;
                    const Row r{shape.name, weight_bytes / 1e6, graphs == CudaGraphs::kOn, setup.name, N, ms, floor_ms, ms / n1};
                    std::printf("%-6s %8.0f %6s %-9s %4d %12.3f %10.3f %9.2f %9.2f\n", r.model.c_str(), r.read_mb,
                                r.graphs ? "on" : "off", r.products.c_str(), N, r.latency_ms, r.floor_ms,
                                r.latency_ms / r.floor_ms, r.over_n1);
                    std::fflush(stdout);
                    rows.push_back(r);
                }
            }
        }
        std::printf("\none layer's products and the logits', each alone (us, and %% of the copy bandwidth at which W is read)\n");
        std::printf("%-6s %-8s %3s %8s %16s %16s %16s\n", "model", "product", "n", "floor us", "lt-first", "lt-timed", "skinny");
        for (const std::string& row : product_table) std::printf("%s\n", row.c_str());
        std::printf("\none layer's other kernels at n = 1 over 128 committed rows, each alone (us)\n");
        std::printf("%-6s %10s %10s %10s %14s %10s %12s\n", "model", "rmsnorm", "rope+kv", "attention", "attn graph-wide",
                    "swiglu", "layer total");
        for (const std::string& row : piece_table) std::printf("%s\n", row.c_str());
        if (!csv_path.empty()) {
            std::ofstream csv(csv_path);
            csv << "model,weights_read_MB,graphs,products,n_nodes,latency_ms,floor_ms,over_floor,over_first_n,bandwidth_GBps,gemm_TFLOPs,gpu\n";
            for (const Row& r : rows)
                csv << r.model << ',' << r.read_mb << ',' << (r.graphs ? "on" : "off") << ',' << r.products << ',' << r.n_nodes << ','
                    << r.latency_ms << ',' << r.floor_ms << ',' << r.latency_ms / r.floor_ms << ',' << r.over_n1 << ','
                    << bandwidth / 1e9 << ',' << flops / 1e12 << ",\"" << ctx.properties().name << "\"\n";
            std::fprintf(stderr, "[bench] wrote %s\n", csv_path.c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_cuda: %s\n", e.what());
        return 1;
    }
    return 0;
}
