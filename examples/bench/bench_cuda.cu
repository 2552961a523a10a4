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
// N = 1, 2, 4, 8, 16, 32, 64 as a ratio to N = 1, with CUDA graphs off and on. Latency is host wall
// time of CudaModel::forward (upload, kernels, logits copied back), median of --reps runs after warm-up.
//
// Run:    build/cuda/bench_cuda [--models 110m,1b,7b] [--reps 30] [--csv bench.csv]
// Prints: one table row per (model, graphs, N); progress goes to stderr.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "detail/cuda_model.cuh"
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

struct Row {
    std::string model;
    double read_mb = 0;  // weight bytes one forward reads
    bool graphs = false;
    int n_nodes = 0;
    double latency_ms = 0, floor_ms = 0, over_n1 = 0;
};

}  // namespace

int main(int argc, char** argv) {
    std::string csv_path, models = "110m,1b,7b";
    int reps = 30;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--csv" && i + 1 < argc) csv_path = argv[++i];
        else if (a == "--models" && i + 1 < argc) models = argv[++i];
        else if (a == "--reps" && i + 1 < argc) reps = std::max(1, std::stoi(argv[++i]));
        else {
            std::fprintf(stderr, "usage: %s [--models 110m,1b,7b] [--reps N] [--csv FILE]\n", argv[0]);
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
        std::printf("%-6s %8s %6s %4s %12s %10s %9s %9s\n", "model", "read MB", "graphs", "N", "latency ms", "floor ms",
                    "x floor", "x N=1");

        std::vector<Row> rows;
        const std::vector<int> sizes{1, 2, 4, 8, 16, 32, 64};
        for (const Shape& shape : all_shapes()) {
            if (("," + models + ",").find("," + shape.name + ",") == std::string::npos) continue;
            const Config& cfg = shape.cfg;
            std::vector<int> prompt(129);
            for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>((i * 7919) % cfg.vocab_size);
            for (const CudaGraphs graphs : {CudaGraphs::kOff, CudaGraphs::kOn}) {
                std::fprintf(stderr, "[bench] %s: random bf16 weights, 128 committed tokens, graphs %s\n",
                             shape.name.c_str(), graphs == CudaGraphs::kOn ? "on" : "off");
                CudaModel model(cfg, random_device_weights(cfg, 1), ctx, CudaModelOptions{.max_tree_nodes = 64, .graphs = graphs});
                detail::prefill(model, std::span<const int>(prompt).first(128));
                const double weight_bytes = static_cast<double>(model.device_weights().bytes_read_per_step());
                const double floor_ms = weight_bytes / bandwidth * 1e3;
                double n1 = 0;
                for (int N : sizes) {
                    std::fprintf(stderr, "[bench] %s: N = %d\n", shape.name.c_str(), N);
                    const double ms = forward_seconds(model, random_tree(N, cfg.vocab_size, N), reps) * 1e3;
                    if (N == 1) n1 = ms;
                    const Row r{shape.name, weight_bytes / 1e6, graphs == CudaGraphs::kOn, N, ms, floor_ms, ms / n1};
                    std::printf("%-6s %8.0f %6s %4d %12.3f %10.3f %9.2f %9.2f\n", r.model.c_str(), r.read_mb,
                                r.graphs ? "on" : "off", N, r.latency_ms, r.floor_ms, r.latency_ms / r.floor_ms, r.over_n1);
                    std::fflush(stdout);
                    rows.push_back(r);
                }
            }
        }
        if (!csv_path.empty()) {
            std::ofstream csv(csv_path);
            csv << "model,weights_read_MB,graphs,n_nodes,latency_ms,floor_ms,over_floor,over_n1,bandwidth_GBps,gemm_TFLOPs\n";
            for (const Row& r : rows)
                csv << r.model << ',' << r.read_mb << ',' << (r.graphs ? "on" : "off") << ',' << r.n_nodes << ','
                    << r.latency_ms << ',' << r.floor_ms << ',' << r.latency_ms / r.floor_ms << ',' << r.over_n1 << ','
                    << bandwidth / 1e9 << ',' << flops / 1e12 << '\n';
            std::fprintf(stderr, "[bench] wrote %s\n", csv_path.c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_cuda: %s\n", e.what());
        return 1;
    }
    return 0;
}
