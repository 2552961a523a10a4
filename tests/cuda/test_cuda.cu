// The CUDA backend against the float32 CPU reference: every kernel on random inputs with ragged sizes,
// the whole model on random trees, commit, hidden states, CUDA graphs, greedy speculative decoding and
// same-seed sampling; GLIDE's drafter on the GPU against GlideModel. Runs only with a GPU
// (tests/cuda/main.cpp exits 77 without one).
//
// Error bounds are normalised by the reference's largest magnitude, max|got - want| / max|want|
// (ggml's test-backend-ops compares backends the same way):
//   kExact     0      embedding (bf16 widening is exact), commit (a copy), argmax, sampling, graphs vs eager
//   kF32       1e-5   fp32 results of fp32 inputs: RMSNorm to fp32, RoPE on q, softmax probabilities
//   kBf16      4e-3   one bf16 rounding of the result (2^-9 relative) on top of fp32 work: RMSNorm and
//                     SwiGLU to bf16, K/V written to the cache, attention output
//   kGemm      1e-4   bf16 inputs rounded identically on both sides, fp32 accumulation in another order
//   kModel     3e-2   whole model vs CpuModel holding the same bf16-rounded matrices: the GPU also
//                     rounds every GEMM input and the KV cache to bf16, compounding over the layers;
//                     likewise CudaGlideModel vs GlideModel<CpuModel> (target and drafter both on the GPU)
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <vector>

#include "catch.hpp"
#include "cuda/cuda_helpers.hpp"
#include "detail/cuda/glide.cuh"
#include "detail/cuda/model.cuh"
#include "helpers.hpp"
#include "specdec.hpp"

using namespace specdec;
using namespace specdec::cuda_test;

namespace {

constexpr float kF32 = 1e-5f, kBf16 = 4e-3f, kGemm = 1e-4f;

DeviceBuffer<__nv_bfloat16> upload_bf16(std::span<const float> v) {
    const std::vector<bf16> h = narrow(v);
    DeviceBuffer<__nv_bfloat16> d(h.size());
    SPECDEC_CUDA_CHECK(cudaMemcpy(d.get(), h.data(), d.bytes(), cudaMemcpyHostToDevice));
    SPECDEC_CUDA_CHECK(cudaDeviceSynchronize());  // as to_device: the DMA lands before the context's stream reads it
    return d;
}

template <class T>
std::vector<T> download(const T* d, std::size_t n) {
    std::vector<T> h(n);
    if (n > 0) SPECDEC_CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

std::vector<float> download_bf16(const __nv_bfloat16* d, std::size_t n) {
    std::vector<bf16> h(n);
    if (n > 0) SPECDEC_CUDA_CHECK(cudaMemcpy(h.data(), d, n * sizeof(bf16), cudaMemcpyDeviceToHost));
    return widen(h);
}

/// Shapes of the whole-model tests: head_dim 8, 64 and 128; GQA groups 2, 2 and 4.
Config model_config(int which) {
    switch (which) {
        case 0: return test::tiny_config(true);
        case 1:
            return Config{.hidden_size = 256, .intermediate_size = 512, .num_hidden_layers = 2, .num_attention_heads = 4,
                          .num_key_value_heads = 2, .vocab_size = 1000, .max_position_embeddings = 512};
        default:
            return Config{.hidden_size = 512, .intermediate_size = 1024, .num_hidden_layers = 2, .num_attention_heads = 4,
                          .num_key_value_heads = 1, .vocab_size = 512, .max_position_embeddings = 512};
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// Kernels

TEST_CASE("the embedding gather widens bf16 rows exactly", "[cuda][kernel]") {
    CudaContext ctx;
    const int V = 37, D = GENERATE(1, 45, 768);
    const std::vector<float> embed = rounded(normal(static_cast<std::size_t>(V) * D, 1));
    const std::vector<int> tokens{3, 0, 36, 3, 17};
    const int n = static_cast<int>(tokens.size());
    const auto d_embed = upload_bf16(embed);
    const auto d_tokens = to_device<int>(tokens);
    DeviceBuffer<float> x(static_cast<std::size_t>(n) * D);
    kernels::launch_embed_rows(ctx.stream(), x.get(), d_embed.get(), d_tokens.get(), n, D);
    ctx.synchronize();
    const std::vector<float> got = download(x.get(), x.size());
    for (int i = 0; i < n; ++i)
        CHECK(std::equal(got.begin() + i * D, got.begin() + (i + 1) * D, embed.begin() + tokens[i] * D));
}

TEST_CASE("RMSNorm matches the CPU reference in fp32 and in bf16", "[cuda][kernel]") {
    CudaContext ctx;
    const int D = GENERATE(1, 37, 768, 2049), n = 3;
    const float eps = 1e-5f;
    const std::vector<float> x = normal(static_cast<std::size_t>(n) * D, D, 2.0f), w = normal(D, D + 1);
    std::vector<float> want(x.size());
    for (int i = 0; i < n; ++i) detail::rmsnorm(&want[i * D], &x[i * D], w.data(), D, eps);
    const auto d_x = to_device<float>(x);
    const auto d_w = to_device<float>(w);
    DeviceBuffer<float> out32(x.size());
    DeviceBuffer<__nv_bfloat16> out16(x.size());
    kernels::launch_rmsnorm(ctx.stream(), out32.get(), d_x.get(), d_w.get(), n, D, eps);
    kernels::launch_rmsnorm(ctx.stream(), out16.get(), d_x.get(), d_w.get(), n, D, eps);
    ctx.synchronize();
    CHECK(normalized_error(download(out32.get(), x.size()), want) < kF32);
    CHECK(normalized_error(download_bf16(out16.get(), x.size()), want) < kBf16);
}

TEST_CASE("RoPE rotates q in place and stores rotated k and v in the cache rows of the new nodes", "[cuda][kernel]") {
    CudaContext ctx;
    const auto [H, Hkv, hd] = GENERATE(std::tuple{4, 2, 8}, std::tuple{12, 12, 64}, std::tuple{8, 2, 128});
    const int T = 7, N = 6, first = 2, n = N - first, kvd = Hkv * hd, width = (H + 2 * Hkv) * hd, C = T + N + 3;
    const float theta = 10000.0f;
    const std::vector<float> qkv = normal(static_cast<std::size_t>(n) * width, hd);
    const std::vector<int> positions{T + 1, T + 2, T + 2, T + 5};
    std::vector<double> inv_freq(hd / 2);
    for (int j = 0; j < hd / 2; ++j) inv_freq[j] = std::pow(static_cast<double>(theta), -2.0 * j / hd);

    // CPU: the table CpuModel builds (cos and sin times YaRN's attention factor, or 1), then detail::rope
    // on every q and k head.
    const double scale = GENERATE(1.0, detail::yarn_mscale(4.0, 1.0));
    std::vector<float> cs, want_q, want_k, want_v;
    detail::rope_table(cs, positions, inv_freq, scale);
    for (int i = 0; i < n; ++i) {
        std::vector<float> row(qkv.begin() + i * width, qkv.begin() + (i + 1) * width);
        for (int h = 0; h < H + Hkv; ++h) detail::rope(&row[h * hd], hd, &cs[i * hd]);
        want_q.insert(want_q.end(), row.begin(), row.begin() + H * hd);
        want_k.insert(want_k.end(), row.begin() + H * hd, row.begin() + H * hd + kvd);
        want_v.insert(want_v.end(), row.begin() + H * hd + kvd, row.end());
    }

    auto d_qkv = to_device<float>(qkv);
    const auto d_pos = to_device<int>(positions);
    const auto d_freq = to_device<double>(inv_freq);
    const auto d_params = to_device<kernels::StepParams>(std::vector<kernels::StepParams>{{T, N, first}});
    DeviceBuffer<float> d_cs(cs.size());
    DeviceBuffer<__nv_bfloat16> k_cache(static_cast<std::size_t>(C) * kvd), v_cache(static_cast<std::size_t>(C) * kvd);
    kernels::launch_rope_table(ctx.stream(), d_cs.get(), d_pos.get(), d_freq.get(), n, hd, scale);
    kernels::launch_rope_store_kv(ctx.stream(), d_qkv.get(), k_cache.get(), v_cache.get(), d_cs.get(), d_params.get(), n,
                                  H, Hkv, hd);
    ctx.synchronize();
    CHECK(normalized_error(download(d_cs.get(), cs.size()), cs) < kF32);
    const std::vector<float> got = download(d_qkv.get(), qkv.size());
    std::vector<float> got_q;
    for (int i = 0; i < n; ++i) got_q.insert(got_q.end(), got.begin() + i * width, got.begin() + i * width + H * hd);
    CHECK(normalized_error(got_q, want_q) < kF32);
    const std::size_t rows = static_cast<std::size_t>(T + first) * kvd;  // new nodes start at row T + first
    CHECK(normalized_error(download_bf16(k_cache.get() + rows, want_k.size()), want_k) < kBf16);
    CHECK(normalized_error(download_bf16(v_cache.get() + rows, want_v.size()), want_v) < kBf16);
}

TEST_CASE("tree attention matches the CPU reference for N = 1..64 over ragged cache lengths, split or not", "[cuda][kernel]") {
    CudaContext ctx;
    // hd 6 and 12 take the scalar branch (hd % 8 != 0: GLIDE's small cross heads), the others the 16-byte one.
    const auto [H, Hkv, hd] = GENERATE(std::tuple{4, 2, 8}, std::tuple{6, 3, 32}, std::tuple{32, 4, 64}, std::tuple{8, 8, 128},
                                       std::tuple{4, 2, 6}, std::tuple{2, 1, 12});
    const auto [T, N, first] = GENERATE(std::tuple{0, 1, 0}, std::tuple{1, 5, 0}, std::tuple{100, 1, 0},
                                        std::tuple{300, 33, 10}, std::tuple{37, 64, 0}, std::tuple{129, 64, 63});
    const int split_keys = GENERATE(32, 128);
    const int n = N - first, kvd = Hkv * hd, G = H / Hkv, width = (H + 2 * Hkv) * hd;
    const int C = T + N + 40;  // rows past T + N hold garbage that must stay invisible
    const int max_splits = (C + split_keys - 1) / split_keys, words = detail::mask_words(N);
    const Tree tree = random_tree(N, 10, static_cast<std::uint64_t>(T * 131 + N));
    const std::vector<float> k = rounded(normal(static_cast<std::size_t>(C) * kvd, 1));
    const std::vector<float> v = rounded(normal(static_cast<std::size_t>(C) * kvd, 2));
    const std::vector<float> qkv = normal(static_cast<std::size_t>(n) * width, 3, 0.5f);
    std::vector<std::uint32_t> mask(static_cast<std::size_t>(n) * words);
    detail::ancestor_masks(tree, first, words, mask);

    // CPU: softmax(q·kᵀ/√hd)·v over committed rows and the node's path, as CpuModel::attend, in double.
    std::vector<float> want(static_cast<std::size_t>(n) * H * hd);
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    for (int i = 0; i < n; ++i) {
        std::vector<int> keys(T);
        std::iota(keys.begin(), keys.end(), 0);
        for (int a : tree.path_to(first + i)) keys.push_back(T + a);
        for (int h = 0; h < H; ++h) {
            const float* q = &qkv[static_cast<std::size_t>(i) * width + h * hd];
            std::vector<double> s(keys.size());
            double mx = -INFINITY, sum = 0.0;
            for (std::size_t r = 0; r < keys.size(); ++r) {
                double dot = 0.0;
                for (int d = 0; d < hd; ++d) dot += double(q[d]) * k[static_cast<std::size_t>(keys[r]) * kvd + (h / G) * hd + d];
                mx = std::max(mx, s[r] = dot * scale);
            }
            for (double& x : s) sum += (x = std::exp(x - mx));
            for (int d = 0; d < hd; ++d) {
                double o = 0.0;
                for (std::size_t r = 0; r < keys.size(); ++r) o += s[r] / sum * v[static_cast<std::size_t>(keys[r]) * kvd + (h / G) * hd + d];
                want[(static_cast<std::size_t>(i) * H + h) * hd + d] = static_cast<float>(o);
            }
        }
    }

    const auto d_k = upload_bf16(k);
    const auto d_v = upload_bf16(v);
    const auto d_qkv = to_device<float>(qkv);
    const auto d_mask = to_device<std::uint32_t>(mask);
    const auto d_params = to_device<kernels::StepParams>(std::vector<kernels::StepParams>{{T, N, first}});
    DeviceBuffer<__nv_bfloat16> out(static_cast<std::size_t>(n) * H * hd);
    DeviceBuffer<float> part_acc(static_cast<std::size_t>(n) * H * max_splits * hd), part_ml(static_cast<std::size_t>(n) * H * max_splits * 2);
    const kernels::TreeAttention a{.out = out.get(), .part_acc = part_acc.get(), .part_ml = part_ml.get(), .qkv = d_qkv.get(),
                                   .k_cache = d_k.get(), .v_cache = d_v.get(), .mask = d_mask.get(), .params = d_params.get(),
                                   .n = n, .H = H, .Hkv = Hkv, .hd = hd, .mask_words = words, .split_keys = split_keys,
                                   .max_splits = max_splits};
    INFO("H " << H << ", Hkv " << Hkv << ", hd " << hd << ", T " << T << ", N " << N << ", first " << first << ", split " << split_keys);
    kernels::launch_tree_attention(ctx.stream(), a, (T + N + split_keys - 1) / split_keys);
    ctx.synchronize();
    const std::vector<float> exact = download_bf16(out.get(), out.size());
    CHECK(normalized_error(exact, want) < kBf16);
    // What a CUDA graph launches: chunks for the whole capacity; the extra ones must change nothing.
    kernels::launch_tree_attention(ctx.stream(), a, max_splits);
    ctx.synchronize();
    CHECK(download_bf16(out.get(), out.size()) == exact);
}

TEST_CASE("the cross-attention kernel attends each query to its own prefix of the cache, zeros when it sees none",
          "[cuda][kernel][glide]") {
    CudaContext ctx;
    const auto [H, Hkv, hd] = GENERATE(std::tuple{4, 2, 8}, std::tuple{6, 3, 32}, std::tuple{8, 1, 64}, std::tuple{8, 8, 128});
    const int R = GENERATE(0, 5, 300);  // rows the other model has committed
    const int split_keys = GENERATE(32, 128);
    const int kvd = Hkv * hd, G = H / Hkv, C = R + 40;  // rows past R hold garbage that must stay invisible
    const int max_splits = (C + split_keys - 1) / split_keys;
    // GLIDE's limits min(position, R): nothing, everything, and ragged prefixes across chunk borders.
    std::vector<int> visible;
    for (int want : {0, R, R / 2, 1, 33, R - 1, 129, 0, 2})
        visible.push_back(std::clamp(want, 0, R));
    const int n = static_cast<int>(visible.size()), key_count = *std::max_element(visible.begin(), visible.end());
    const std::vector<float> k = rounded(normal(static_cast<std::size_t>(C) * kvd, 4));
    const std::vector<float> v = rounded(normal(static_cast<std::size_t>(C) * kvd, 5));
    const std::vector<float> q = normal(static_cast<std::size_t>(n) * H * hd, 6, 0.5f);

    // CPU: softmax(q·kᵀ/√hd)·v over rows [0, visible[i]) in double (GlideModel::attend_rows), zero when empty.
    std::vector<float> want(static_cast<std::size_t>(n) * H * hd, 0.0f);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    for (int i = 0; i < n; ++i)
        for (int h = 0; h < H; ++h) {
            const int len = visible[i];
            if (len == 0) continue;
            const float* qi = &q[(static_cast<std::size_t>(i) * H + h) * hd];
            std::vector<double> s(len);
            double mx = -INFINITY, sum = 0.0;
            for (int r = 0; r < len; ++r) {
                double dot = 0.0;
                for (int d = 0; d < hd; ++d) dot += double(qi[d]) * k[static_cast<std::size_t>(r) * kvd + (h / G) * hd + d];
                mx = std::max(mx, s[r] = dot * scale);
            }
            for (double& x : s) sum += (x = std::exp(x - mx));
            for (int d = 0; d < hd; ++d) {
                double o = 0.0;
                for (int r = 0; r < len; ++r) o += s[r] / sum * v[static_cast<std::size_t>(r) * kvd + (h / G) * hd + d];
                want[(static_cast<std::size_t>(i) * H + h) * hd + d] = static_cast<float>(o);
            }
        }

    const auto d_k = upload_bf16(k);
    const auto d_v = upload_bf16(v);
    const auto d_q = to_device<float>(q);
    const auto d_visible = to_device<int>(visible);
    const auto d_count = to_device<int>(std::vector<int>{key_count});
    DeviceBuffer<__nv_bfloat16> out(static_cast<std::size_t>(n) * H * hd);
    DeviceBuffer<float> part_acc(static_cast<std::size_t>(n) * H * max_splits * hd), part_ml(static_cast<std::size_t>(n) * H * max_splits * 2);
    const kernels::PrefixAttention a{.out = out.get(), .part_acc = part_acc.get(), .part_ml = part_ml.get(), .q = d_q.get(),
                                     .k_cache = d_k.get(), .v_cache = d_v.get(), .visible_rows = d_visible.get(),
                                     .key_count = d_count.get(), .n = n, .H = H, .Hkv = Hkv, .hd = hd,
                                     .split_keys = split_keys, .max_splits = max_splits};
    INFO("H " << H << ", Hkv " << Hkv << ", hd " << hd << ", R " << R << ", split " << split_keys);
    kernels::launch_prefix_attention(ctx.stream(), a, std::max(1, (key_count + split_keys - 1) / split_keys));
    ctx.synchronize();
    const std::vector<float> got = download_bf16(out.get(), out.size());
    CHECK(normalized_error(got, want) < kBf16);
    for (int i = 0; i < n; ++i)
        if (visible[i] == 0)
            CHECK(std::all_of(got.begin() + static_cast<std::ptrdiff_t>(i) * H * hd,
                              got.begin() + static_cast<std::ptrdiff_t>(i + 1) * H * hd, [](float x) { return x == 0.0f; }));
    // Chunks for the whole capacity (as a CUDA graph would launch) change nothing.
    kernels::launch_prefix_attention(ctx.stream(), a, max_splits);
    ctx.synchronize();
    CHECK(download_bf16(out.get(), out.size()) == got);
}

TEST_CASE("SwiGLU matches the CPU reference", "[cuda][kernel]") {
    CudaContext ctx;
    const int n = 3, F = GENERATE(1, 37, 5632);
    const std::vector<float> gu = normal(static_cast<std::size_t>(n) * 2 * F, F, 3.0f);
    std::vector<float> want(static_cast<std::size_t>(n) * F);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < F; ++j) {
            const float g = gu[i * 2 * F + j];
            want[i * F + j] = g / (1.0f + std::exp(-g)) * gu[i * 2 * F + F + j];
        }
    const auto d_gu = to_device<float>(gu);
    DeviceBuffer<__nv_bfloat16> act(want.size());
    kernels::launch_swiglu(ctx.stream(), act.get(), d_gu.get(), n, F);
    ctx.synchronize();
    CHECK(normalized_error(download_bf16(act.get(), act.size()), want) < kBf16);
}

TEST_CASE("the product computes x·Wᵀ in fp32, overwriting or accumulating, by the skinny kernel or cuBLASLt's timed or first choice",
          "[cuda][kernel][gemm]") {
    CudaContext ctx;
    const GemmOptions options = GENERATE(GemmOptions{.skinny_max_n = kernels::kSkinnyMaxN},
                                         GemmOptions{.skinny_max_n = 0, .timed_choice = true}, GemmOptions{.skinny_max_n = 0});
    Gemm gemm(ctx, options);
    INFO("skinny up to n = " << options.skinny_max_n << ", timed choice " << options.timed_choice);
    const auto run = [&](int n, int k, int m, GemmMode mode) {
        const std::vector<float> x = rounded(normal(static_cast<std::size_t>(n) * k, k)), W = rounded(normal(static_cast<std::size_t>(m) * k, m));
        const std::vector<float> y0 = normal(static_cast<std::size_t>(n) * m, n);
        std::vector<float> want(y0.size());
        for (int r = 0; r < n; ++r)
            for (int o = 0; o < m; ++o) {
                double acc = mode == GemmMode::kAccumulate ? y0[r * m + o] : 0.0;
                for (int i = 0; i < k; ++i) acc += double(x[static_cast<std::size_t>(r) * k + i]) * W[static_cast<std::size_t>(o) * k + i];
                want[static_cast<std::size_t>(r) * m + o] = static_cast<float>(acc);
            }
        const auto d_x = upload_bf16(x);
        const auto d_W = upload_bf16(W);
        auto d_y = to_device<float>(y0);
        gemm(d_y.get(), d_x.get(), d_W.get(), n, k, m, mode);
        ctx.synchronize();
        INFO("n " << n << ", k " << k << ", m " << m);
        CHECK(normalized_error(download(d_y.get(), y0.size()), want) < kGemm);
    };
    SECTION("model shapes: decode, tree, prefill chunk") {
        for (GemmMode mode : {GemmMode::kOverwrite, GemmMode::kAccumulate}) {
            run(1, 64, 96, mode);
            run(7, 2048, 5632, mode);
            run(64, 768, 2304, mode);
            run(32, 4096, 1024, mode);
        }
    }
    SECTION("ragged shapes are computed, or refused naming m, n and k") {
        // k % 8 == 0 with n <= skinny_max_n takes the skinny kernel (any m, odd too); the others go to cuBLASLt.
        for (const auto& [n, k, m] : {std::tuple{3, 37, 19}, std::tuple{5, 100, 7}, std::tuple{8, 1024, 333},
                                      std::tuple{2, 8, 1}, std::tuple{5, 40, 19}, std::tuple{1, 4104, 3}}) {
            try {
                run(n, k, m, GemmMode::kOverwrite);
            } catch (const specdec::error& e) {
                WARN("refused: " << e.what());
                CHECK_THAT(e.what(), Catch::Contains("[specdec.cuda.gemm]") && Catch::Contains("m=" + std::to_string(m)));
            }
        }
    }
}

TEST_CASE("the KV gather of commit moves rows like CpuModel's in-order copy, in chunks", "[cuda][kernel]") {
    CudaContext ctx;
    const int L = 3, kvd = 24, T = GENERATE(0, 10);
    std::vector<int> path = GENERATE(std::vector<int>{0}, std::vector<int>{0, 2, 5, 6}, std::vector<int>{1, 2, 3});
    if (path.size() == 1 && T == 0) {  // a path longer than one launch's chunk
        path.clear();
        for (int j = 0; j < 100; ++j) path.push_back(j < 50 ? j : j + 30);
    }
    const int C = T + 140;
    const std::vector<float> cache = rounded(normal(static_cast<std::size_t>(L) * C * kvd, 9));
    std::vector<float> want_k = cache, want_v = cache;
    for (std::vector<float>* w : {&want_k, &want_v})
        for (int l = 0; l < L; ++l)
            for (int j = 0; j < static_cast<int>(path.size()); ++j)
                std::copy_n(w->begin() + (static_cast<std::size_t>(l) * C + T + path[j]) * kvd, kvd,
                            w->begin() + (static_cast<std::size_t>(l) * C + T + j) * kvd);
    auto k = upload_bf16(cache);
    auto v = upload_bf16(cache);
    for (int at = 0; at < static_cast<int>(path.size()); at += kernels::kCommitChunk) {
        kernels::PathChunk chunk;
        chunk.first_entry = at;
        chunk.count = std::min<int>(kernels::kCommitChunk, static_cast<int>(path.size()) - at);
        std::copy_n(path.begin() + at, chunk.count, chunk.node);
        kernels::launch_gather_kv_rows(ctx.stream(), k.get(), v.get(), static_cast<std::size_t>(C) * kvd, L, kvd, T, chunk);
    }
    ctx.synchronize();
    CHECK(download_bf16(k.get(), cache.size()) == want_k);
    CHECK(download_bf16(v.get(), cache.size()) == want_v);
}

TEST_CASE("argmax rows agree with the CPU, ties to the lowest index", "[cuda][kernel][sampling]") {
    CudaContext ctx;
    const int V = GENERATE(1, 7, 1000, 32000), n = 4;
    std::vector<float> logits = normal(static_cast<std::size_t>(n) * V, V);
    std::fill_n(logits.begin() + V, V, 2.0f);  // row 1: all tied
    const auto d = to_device<float>(logits);
    DeviceBuffer<int> out(n);
    kernels::launch_argmax_rows(ctx.stream(), out.get(), d.get(), n, V);
    ctx.synchronize();
    const std::vector<int> got = download(out.get(), n);
    for (int i = 0; i < n; ++i) CHECK(got[i] == argmax(std::span<const float>(logits).subspan(static_cast<std::size_t>(i) * V, V)));
    CHECK(got[1] == 0);
}

TEST_CASE("processed probabilities agree with the CPU for temperature, top-k and top-p", "[cuda][kernel][sampling]") {
    CudaContext ctx;
    const int V = GENERATE(7, 1000, 32000), n = 6;
    const Sampling s = GENERATE(Sampling{}, Sampling{.temperature = 1.0f}, Sampling{.temperature = 0.7f, .top_k = 40},
                                Sampling{.temperature = 1.0f, .top_p = 0.9f}, Sampling{.temperature = 1.3f, .top_k = 50, .top_p = 0.8f},
                                Sampling{.temperature = 1.0f, .top_k = 1});
    std::vector<float> logits = normal(static_cast<std::size_t>(n) * V, V, 3.0f);
    std::fill_n(logits.begin(), std::min(V, 4), 9.0f);  // row 0: a four-way tie at the top
    const auto d = to_device<float>(logits);
    DeviceBuffer<float> probs(logits.size());
    kernels::launch_processed_probs(ctx.stream(), probs.get(), d.get(), n, V, s.temperature, s.top_k, s.top_p);
    ctx.synchronize();
    const std::vector<float> got = download(probs.get(), probs.size());
    std::vector<float> want(V), soft(V);
    for (int i = 0; i < n; ++i) {
        const auto row = std::span<const float>(logits).subspan(static_cast<std::size_t>(i) * V, V);
        const auto g = std::span<const float>(got).subspan(static_cast<std::size_t>(i) * V, V);
        processed_probs(row, s, want);
        INFO("row " << i << ", V " << V << ", temperature " << s.temperature << ", top_k " << s.top_k << ", top_p " << s.top_p);
        CHECK(normalized_error(g, want) < kF32);
        int differ = 0;
        for (int j = 0; j < V; ++j) differ += (g[j] > 0.0f) != (want[j] > 0.0f);
        if (differ == 0) continue;
        // The kept sets may differ by one token only where top-p's cumulative mass meets its goal within
        // rounding (expf and std::exp differ in the last bit).
        processed_probs(row, Sampling{.temperature = s.temperature, .top_k = s.top_k}, soft);
        std::vector<int> order(V);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return soft[a] > soft[b]; });
        double mass = 0.0, acc = 0.0, nearest = 1.0;
        for (float p : soft) mass += p;
        for (int r : order) nearest = std::min(nearest, std::abs((acc += soft[r]) - s.top_p * mass));
        CHECK(s.top_p < 1.0f);
        CHECK(differ == 1);
        CHECK(nearest < 1e-5);
    }
}

TEST_CASE("device sampling draws the CPU's token for the same (seed, step, node, k)", "[cuda][kernel][sampling]") {
    CudaContext ctx;
    const int V = GENERATE(2, 1000, 32000), n = 16;
    std::vector<float> probs(static_cast<std::size_t>(n) * V);
    for (int i = 0; i < n; ++i)
        processed_probs(normal(V, 100 + i, 2.0f), Sampling{.temperature = 1.0f, .top_k = i % 2 ? 0 : 20},
                        std::span<float>(probs).subspan(static_cast<std::size_t>(i) * V, V));
    std::fill_n(probs.begin() + static_cast<std::size_t>(n - 1) * V, V, 0.0f);  // last row: all zero
    const auto d = to_device<float>(probs);
    DeviceBuffer<int> out(n);
    const kernels::Coins coins{.seed = 0x5eed, .step = 3, .stream = static_cast<std::uint32_t>(RngStream::kAccept),
                               .first_node = 5, .coin = detail::kBonusCoin};
    kernels::launch_sample_rows(ctx.stream(), out.get(), d.get(), n, V, coins);
    ctx.synchronize();
    const std::vector<int> got = download(out.get(), n);
    const StepRng rng{coins.seed, coins.step, RngStream::kAccept};
    for (int i = 0; i + 1 < n; ++i) {
        const float u = rng.uniform(coins.first_node + i, coins.coin);
        CHECK(got[i] == sample_index(std::span<const float>(probs).subspan(static_cast<std::size_t>(i) * V, V), u));
    }
    CHECK(got[n - 1] == -1);
}

// ---------------------------------------------------------------------------------------------------
// The model

TEST_CASE("CudaModel is a LanguageModel that exposes its KV cache and hidden states", "[cuda][model]") {
    STATIC_REQUIRE(LanguageModel<CudaModel>);
    STATIC_REQUIRE(ExposesKV<CudaModel>);
    STATIC_REQUIRE(ExposesHidden<CudaModel>);
    STATIC_REQUIRE(Proposer<ModelProposer<CudaModel>>);
    STATIC_REQUIRE(Verifier<TreeVerifier, CudaModel>);
}

TEST_CASE("tree forward logits match CpuModel holding the same bf16 matrices", "[cuda][model]") {
    const int which = GENERATE(0, 1, 2);
    const Config cfg = model_config(which);
    const Weights w = bf16_matrices(cfg, random_weights(cfg, 11 + which, model_scale(cfg)));
    CpuModel cpu(cfg, w);
    CudaContext ctx;
    CudaModel gpu(cfg, w, ctx);
    std::vector<int> prefix(40);
    for (int i = 0; i < 40; ++i) prefix[i] = (i * 7 + which) % cfg.vocab_size;
    const Tree tree = random_tree(12, cfg.vocab_size, 5 + which);
    detail::prefill(cpu, prefix);
    detail::prefill(gpu, prefix);
    INFO("config " << which);
    const std::vector<float> want = copy_rows(cpu.forward(tree, 0));
    const std::vector<float> got = copy_rows(gpu.forward(tree, 0));
    CHECK(normalized_error(got, want) < kModel);

    SECTION("growing the tree with forward(tree, first) gives the same rows") {
        Tree grown;
        std::vector<float> rows;
        int first = 0;
        for (int i = 0; i < tree.size(); ++i) {
            grown.add(tree[i].token, tree[i].parent);
            if (i % 5 == 4 || i + 1 == tree.size()) {
                const std::vector<float> part = copy_rows(gpu.forward(grown, first));
                rows.insert(rows.end(), part.begin(), part.end());
                first = grown.size();
            }
        }
        CHECK(normalized_error(rows, got) < kModel);
    }
}

TEST_CASE("the KV cache after commit equals decoding the accepted tokens one by one", "[cuda][model]") {
    const Config cfg = model_config(GENERATE(0, 1));
    const Weights w = bf16_matrices(cfg, random_weights(cfg, 3, model_scale(cfg)));
    CudaContext ctx;
    CudaModel tree_model(cfg, w, ctx), chain_model(cfg, w, ctx);
    CpuModel cpu(cfg, w);
    const std::vector<int> prefix{5, 9, 11, 3, 2};
    const Tree tree = random_tree(16, cfg.vocab_size, 21);
    const std::vector<int> path = tree.path_to(tree.size() - 1);
    for (auto* m : {&tree_model, &chain_model}) detail::prefill(*m, prefix);
    detail::prefill(cpu, prefix);
    tree_model.forward(tree, 0);
    tree_model.commit(path);
    cpu.forward(tree, 0);
    cpu.commit(path);
    for (int node : path) {
        chain_model.forward(Tree::chain(std::vector<int>{tree[node].token}), 0);
        chain_model.commit(std::vector<int>{0});
    }
    REQUIRE(tree_model.cache_len() == static_cast<int>(prefix.size() + path.size()));
    for (int l = 0; l < cfg.num_hidden_layers; ++l) {
        const auto copy = [](const KvView& v) {
            std::vector<float> out(v.k.begin(), v.k.end());
            out.insert(out.end(), v.v.begin(), v.v.end());
            return out;
        };
        const std::vector<float> got = copy(tree_model.kv(l)), chain = copy(chain_model.kv(l)), want = copy(cpu.kv(l));
        INFO("layer " << l);
        CHECK(tree_model.kv(l).len == tree_model.cache_len());
        // Products over different row counts round differently, so the tree's and the chain's bf16 K/V
        // agree to rounding, not bit for bit; a misplaced row would be off by O(1).
        CHECK(normalized_error(got, chain) < kModel);
        CHECK(normalized_error(got, want) < kModel);
    }
}

TEST_CASE("captured hidden states match CpuModel's: embeddings, a layer output, the final normed state", "[cuda][model]") {
    const Config cfg = model_config(1);
    const Weights w = bf16_matrices(cfg, random_weights(cfg, 8, model_scale(cfg)));
    CpuModel cpu(cfg, w);
    CudaContext ctx;
    CudaModel gpu(cfg, w, ctx);
    const std::vector<int> layers{0, 1, cfg.num_hidden_layers};
    cpu.capture_hidden(layers);
    gpu.capture_hidden(layers);
    const Tree tree = random_tree(9, cfg.vocab_size, 4);
    cpu.forward(tree, 0);
    gpu.forward(tree, 0);
    for (int i = 0; i < static_cast<int>(layers.size()); ++i) {
        INFO("layer " << layers[i]);
        const std::vector<float> want = copy_rows(cpu.hidden(i)), got = copy_rows(gpu.hidden(i));
        REQUIRE(got.size() == want.size());
        if (layers[i] == 0) CHECK(got == want);  // embeddings: widened bf16 on both sides
        else CHECK(normalized_error(got, want) < kModel);
    }
    CHECK_THROWS_WITH(gpu.hidden(3), Catch::Contains("[specdec.cuda.model]") && Catch::Contains("capture_hidden"));
}

TEST_CASE("CUDA graph replays give bit-identical logits to eager launches", "[cuda][model][graphs]") {
    const Config cfg = model_config(GENERATE(0, 1));
    const Weights w = random_weights(cfg, 6, 0.3f);
    CudaContext ctx;
    CudaModel eager(cfg, w, ctx), graphed(cfg, w, ctx, CudaModelOptions{.graphs = CudaGraphs::kOn});
    for (auto* m : {&eager, &graphed}) detail::prefill(*m, std::vector<int>{1, 2, 3, 4, 5, 6, 7});
    // The same tree sizes several times at growing cache lengths: the first of each captures, the rest replay.
    for (int round = 0; round < 3; ++round)
        for (int N : {1, 4, 9}) {
            const Tree tree = random_tree(N, cfg.vocab_size, 100 + round * 10 + N);
            const std::vector<float> a = copy_rows(eager.forward(tree, 0)), b = copy_rows(graphed.forward(tree, 0));
            INFO("round " << round << ", N " << N);
            REQUIRE(a.size() == b.size());
            CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
            const std::vector<int> path = tree.path_to(N - 1);
            eager.commit(path);
            graphed.commit(path);
        }
}

TEST_CASE("a tree larger than max_tree_nodes is refused with a hint", "[cuda][model][errors]") {
    const Config cfg = model_config(0);
    CudaContext ctx;
    CudaModel gpu(cfg, random_weights(cfg, 1), ctx, CudaModelOptions{.max_tree_nodes = 8});
    CHECK_THROWS_WITH(gpu.forward(random_tree(9, cfg.vocab_size, 1), 0),
                      Catch::Contains("[specdec.cuda.model]") && Catch::Contains("max_tree_nodes"));
}

TEST_CASE("CudaModel refuses a Qwen2 or Qwen3 block by name before uploading a weight", "[cuda][model][errors]") {
    const test::Block block = GENERATE(test::Block::kQwen2, test::Block::kQwen3);
    const Config cfg = test::tiny_block_config(block);
    const Weights w = test::random_block_weights(cfg, 1, 0.3f);
    const char* feature = block == test::Block::kQwen2 ? "qkv_bias: a Qwen2 block" : "qk_norm: a Qwen3 block";
    CHECK_THROWS_WITH(upload_weights(cfg, w), Catch::StartsWith("[specdec.cuda.model] CudaModel: the model has") &&
                                                  Catch::Contains(feature) && Catch::Contains("CpuModel runs it"));
    CHECK_THROWS_WITH(random_device_weights(cfg, 1), Catch::StartsWith("[specdec.cuda.model] CudaModel: the model has"));
}

TEST_CASE("CUDA failures name the expression, file and line", "[cuda][errors]") {
    CHECK_THROWS_WITH(SPECDEC_CUDA_CHECK(cudaErrorInvalidValue),
                      Catch::Contains("[specdec.cuda] cudaErrorInvalidValue failed at") && Catch::Contains("test_cuda.cu:"));
    CudaContext ctx;
    Gemm gemm(ctx);
    CHECK_THROWS_WITH(gemm.plan(0, 1, 8), Catch::Contains("[specdec.cuda.gemm]") && Catch::Contains("m=0"));
}

// ---------------------------------------------------------------------------------------------------
// Decoding

namespace {

/// Greedy speculative output must equal greedy autoregressive output. On a GPU the two runs multiply
/// different row counts, so their logits differ by rounding; a divergence is accepted only where the
/// target's top two logits are within that rounding of each other (checked with the CPU oracle).
}  // namespace

TEST_CASE("greedy speculative decoding on the GPU equals greedy autoregressive decoding on the GPU", "[cuda][generate]") {
    const std::uint64_t seed = GENERATE(1u, 2u, 3u);
    const Config cfg = test::tiny_config();
    const Weights w = bf16_matrices(cfg, random_weights(cfg, seed, 0.4f));
    CudaContext ctx;
    CudaModel target(cfg, w, ctx), draft(cfg, perturbed(cfg, w, 0.15f, seed + 100), ctx);
    const std::vector<int> prompt{static_cast<int>(seed % 60), 3, 17, 42};
    const GenerateOptions opts{.max_new_tokens = 40, .seed = seed};
    const Generation plain = autoregressive_generate(target, prompt, opts);
    ModelProposer proposer(draft);
    TreeVerifier verifier;
    GreedyMatch acceptor;
    SECTION("a chain of 4") {
        Chain builder{.gamma = 4};
        const Generation spec = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
        check_greedy_equal(cfg, w, prompt, plain.tokens, spec.tokens);
        CHECK(spec.n_target_calls() < plain.n_target_calls());
    }
    SECTION("a top-k tree (3, 2, 1)") {
        KAryTree builder{.k_config = {3, 2, 1}, .draw = DrawPolicy::kTopK};
        const Generation spec = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
        check_greedy_equal(cfg, w, prompt, plain.tokens, spec.tokens);
    }
}

TEST_CASE("same-seed sampling draws the same tokens on CPU and GPU where their distributions agree", "[cuda][generate][sampling]") {
    const Config cfg = model_config(1);
    const Weights w = bf16_matrices(cfg, random_weights(cfg, 17, model_scale(cfg)));
    CpuModel cpu(cfg, w);
    CudaContext ctx;
    CudaModel gpu(cfg, w, ctx);
    const Tree tree = random_tree(32, cfg.vocab_size, 2);
    const Sampling s{.temperature = 0.8f, .top_k = 20, .top_p = 0.95f};
    const int V = cfg.vocab_size, n = tree.size();
    const std::vector<float> cpu_logits = copy_rows(cpu.forward(tree, 0));
    const std::vector<float> gpu_logits = copy_rows(gpu.forward(tree, 0));
    const auto d_logits = to_device<float>(gpu_logits);
    DeviceBuffer<float> d_probs(gpu_logits.size());
    DeviceBuffer<int> d_tokens(n);
    const kernels::Coins coins{.seed = 77, .step = 0, .stream = static_cast<std::uint32_t>(RngStream::kAccept), .first_node = 0,
                               .coin = detail::kBonusCoin};
    kernels::launch_processed_probs(ctx.stream(), d_probs.get(), d_logits.get(), n, V, s.temperature, s.top_k, s.top_p);
    kernels::launch_sample_rows(ctx.stream(), d_tokens.get(), d_probs.get(), n, V, coins);
    ctx.synchronize();
    const std::vector<float> gpu_probs = download(d_probs.get(), d_probs.size());
    const std::vector<int> gpu_tokens = download(d_tokens.get(), n);
    const StepRng rng{coins.seed, coins.step, RngStream::kAccept};
    std::vector<float> p(V);
    int comparable = 0;
    for (int i = 0; i < n; ++i) {
        processed_probs(std::span<const float>(cpu_logits).subspan(static_cast<std::size_t>(i) * V, V), s, p);
        const float u = rng.uniform(i, coins.coin);
        // The draw is decided when u·total is farther from every CDF step than the distributions differ.
        double l1 = 0.0, cdf = 0.0, margin = 1.0;
        for (int j = 0; j < V; ++j) {
            l1 += std::abs(p[j] - gpu_probs[static_cast<std::size_t>(i) * V + j]);
            if (p[j] > 0.0f) margin = std::min(margin, std::abs((cdf += p[j]) - u));
        }
        if (margin <= l1) continue;
        ++comparable;
        INFO("node " << i);
        CHECK(gpu_tokens[i] == sample_index(p, u));
    }
    CHECK(comparable > n / 2);
}

// ---------------------------------------------------------------------------------------------------
// GLIDE's drafter on the GPU (glide-cape.txt §4.1): CudaGlideModel against GlideModel<CpuModel>

namespace {

/// `w` with every matrix rounded to bf16 and the norms kept: what CudaGlideModel computes with.
GlideWeights bf16_matrices(const GlideConfig& c, GlideWeights w) {
    for_each_tensor(w, c, [](const std::string& name, std::vector<float>& t, const auto&) {
        if (name.find("norm") == std::string::npos) t = rounded(t);
    });
    return w;
}

/// A drafter of its own shape (head_dim 32, one kv head) reading the top `layers` layers of `target`.
GlideConfig glide_for(const Config& target, int layers, bool tied) {
    const Config draft{.hidden_size = 128, .intermediate_size = 256, .num_hidden_layers = layers,
                       .num_attention_heads = 4, .num_key_value_heads = 1, .vocab_size = target.vocab_size,
                       .max_position_embeddings = 256, .tie_word_embeddings = tied};
    return glide_config_for(draft, target);
}

std::vector<int> tokens_of(int n, int vocab, int salt) {
    std::vector<int> t(n);
    for (int i = 0; i < n; ++i) t[i] = (i * 7 + salt * 13 + 1) % vocab;
    return t;
}

/// Logits of a chain decoded from an empty drafter cache: positions 0..n-1, each seeing its own number
/// of target rows (the KV delay at its strongest).
template <class M>
std::vector<float> chain_logits(M& model, const std::vector<int>& tokens) {
    model.reset();
    return copy_rows(model.forward(Tree::chain(tokens), 0));
}

/// A GLIDE drafter whose Llama part is the target plus noise and whose cross-attention is small and
/// random (tests/test_glide.cpp's near_target): acceptance strictly between 0 and 1.
GlideWeights near_target(const GlideConfig& cfg, const Weights& target_w, std::uint64_t seed) {
    std::map<std::string, const std::vector<float>*> llama;
    const Weights noisy = perturbed(cfg.draft, target_w, 0.05f, seed);
    for_each_tensor(noisy, cfg.draft,
                    [&](const std::string& name, const std::vector<float>& t, std::size_t) { llama[name] = &t; });
    GlideWeights w = random_glide_weights(cfg, seed, 0.1f);
    for_each_tensor(w, cfg, [&](const std::string& name, std::vector<float>& t, const auto&) {
        if (llama.count(name)) t = *llama[name];
    });
    return bf16_matrices(cfg, std::move(w));
}

}  // namespace

TEST_CASE("CudaGlideModel is a LanguageModel that ModelProposer drives", "[cuda][glide]") {
    STATIC_REQUIRE(LanguageModel<CudaGlideModel>);
    STATIC_REQUIRE(Proposer<ModelProposer<CudaGlideModel>>);
    STATIC_REQUIRE(LanguageModel<GlideModel<CudaModel>>);
}

TEST_CASE("CudaGlideModel tree logits match GlideModel<CpuModel> holding the same bf16 matrices", "[cuda][glide]") {
    // Target shapes: head_dim 8, 64, 128; target rows 37, 150 (five cross-attention chunks of 32: the split
    // for a target context of 512), 0 and 61.
    const auto [which, target_len] = GENERATE(std::tuple{0, 37}, std::tuple{1, 150}, std::tuple{2, 0}, std::tuple{2, 61});
    const Config tcfg = model_config(which);
    const Weights tw = bf16_matrices(tcfg, random_weights(tcfg, 31 + which, model_scale(tcfg)));
    const GlideConfig gcfg = glide_for(tcfg, which == 0 ? 1 : 2, which == 1);
    const GlideWeights gw = bf16_matrices(gcfg, random_glide_weights(gcfg, 41 + which, model_scale(tcfg)));
    CpuModel cpu_target(tcfg, tw);
    CudaContext ctx;
    CudaModel gpu_target(tcfg, tw, ctx);
    const std::vector<int> target_prefix = tokens_of(target_len, tcfg.vocab_size, which);
    detail::prefill(cpu_target, target_prefix);
    detail::prefill(gpu_target, target_prefix);
    GlideModel cpu(gcfg, gw, cpu_target);
    CudaGlideModel gpu(gcfg, gw, gpu_target, ctx);
    GlideModel host_copy(gcfg, gw, gpu_target);  // the host path: CudaModel::kv() copies the rows back
    INFO("config " << which << ", target rows " << target_len);

    // The drafter lags the target by 4 tokens, so the tree's positions straddle the target's length:
    // nodes below it see [0, position), nodes at or past it see every committed row.
    const std::vector<int> draft_prefix = tokens_of(std::max(0, target_len - 4), tcfg.vocab_size, which + 1);
    const Tree tree = random_tree(12, tcfg.vocab_size, 7 + which);
    detail::prefill(cpu, draft_prefix);
    detail::prefill(gpu, draft_prefix);
    detail::prefill(host_copy, draft_prefix);
    const std::vector<float> want = copy_rows(cpu.forward(tree, 0));
    const std::vector<float> got = copy_rows(gpu.forward(tree, 0));
    CHECK(normalized_error(got, want) < kModel);
    CHECK(normalized_error(copy_rows(host_copy.forward(tree, 0)), want) < kModel);

    SECTION("a chain from position 0: every query sees a different number of target rows") {
        const std::vector<int> chain = tokens_of(20, tcfg.vocab_size, 5);
        CHECK(normalized_error(chain_logits(gpu, chain), chain_logits(cpu, chain)) < kModel);
    }
    SECTION("growing the tree with forward(tree, first) gives the same rows") {
        Tree grown;
        std::vector<float> rows;
        int first = 0;
        for (int i = 0; i < tree.size(); ++i) {
            grown.add(tree[i].token, tree[i].parent);
            if (i % 5 == 4 || i + 1 == tree.size()) {
                const std::vector<float> part = copy_rows(gpu.forward(grown, first));
                rows.insert(rows.end(), part.begin(), part.end());
                first = grown.size();
            }
        }
        CHECK(normalized_error(rows, got) < kModel);
    }
}

TEST_CASE("a YaRN-scaled CudaModel's logits match CpuModel's: frequencies ramped, cos and sin scaled", "[cuda][model]") {
    Config cfg = model_config(1);  // head_dim 64: YaRN's ramp keeps some pairs, divides others by the factor
    cfg.rope_scaling = {.type = RopeScalingType::kYarn, .factor = 4.0f, .original_max_position_embeddings = 64,
                        .attention_factor = static_cast<float>(detail::yarn_mscale(4.0, 1.0))};
    const Weights w = bf16_matrices(cfg, random_weights(cfg, 17, model_scale(cfg)));
    CpuModel cpu(cfg, w);
    Config unscaled_cfg = cfg;  // the control: YaRN reaches the logits
    unscaled_cfg.rope_scaling = {};
    CpuModel unscaled(unscaled_cfg, w);
    CudaContext ctx;
    CudaModel gpu(cfg, w, ctx);
    const std::vector<int> prefix = tokens_of(150, cfg.vocab_size, 3);  // past the original 64 positions
    detail::prefill(cpu, prefix);
    detail::prefill(unscaled, prefix);
    detail::prefill(gpu, prefix);
    const Tree tree = random_tree(12, cfg.vocab_size, 9);
    const std::vector<float> want = copy_rows(cpu.forward(tree, 0));
    CHECK(normalized_error(copy_rows(gpu.forward(tree, 0)), want) < kModel);
    CHECK(normalized_error(copy_rows(unscaled.forward(tree, 0)), want) > 10 * kModel);
}

TEST_CASE("beside a Llama 3- or YaRN-scaled target, CudaGlideModel's cross queries turn as GlideModel's", "[cuda][glide]") {
    Config tcfg = model_config(1);  // head_dim 64: the ramp stretches some pairs, keeps others
    const bool yarn = GENERATE(false, true);
    tcfg.rope_scaling = yarn ? RopeScaling{.type = RopeScalingType::kYarn, .factor = 4.0f, .original_max_position_embeddings = 64,
                                           .attention_factor = static_cast<float>(detail::yarn_mscale(4.0, 1.0))}
                             : RopeScaling{.type = RopeScalingType::kLlama3, .factor = 8.0f, .original_max_position_embeddings = 64};
    const Weights tw = bf16_matrices(tcfg, random_weights(tcfg, 32, model_scale(tcfg)));
    const GlideConfig gcfg = glide_for(tcfg, 2, true);
    REQUIRE(gcfg.glide_target_rope_scaling.type == tcfg.rope_scaling.type);
    const GlideWeights gw = bf16_matrices(gcfg, random_glide_weights(gcfg, 42, model_scale(tcfg)));
    CpuModel cpu_target(tcfg, tw);
    CudaContext ctx;
    CudaModel gpu_target(tcfg, tw, ctx);
    const std::vector<int> target_prefix = tokens_of(150, tcfg.vocab_size, 1);
    detail::prefill(cpu_target, target_prefix);
    detail::prefill(gpu_target, target_prefix);
    GlideModel cpu(gcfg, gw, cpu_target);
    CudaGlideModel gpu(gcfg, gw, gpu_target, ctx);
    const std::vector<int> chain = tokens_of(40, tcfg.vocab_size, 5);
    CHECK(normalized_error(chain_logits(gpu, chain), chain_logits(cpu, chain)) < kModel);
    GlideConfig unscaled = gcfg;  // recorded without the scaling: refused by name
    unscaled.glide_target_rope_scaling = {};
    CHECK_THROWS_WITH(CudaGlideModel(unscaled, gw, gpu_target, ctx), Catch::Contains("glide_target_rope_scaling is no scaling"));
}

TEST_CASE("after CudaGlideModel commits a path, the next forward equals a fresh drafter decoding the accepted tokens",
          "[cuda][glide]") {
    const Config tcfg = model_config(1);
    const Weights tw = bf16_matrices(tcfg, random_weights(tcfg, 3, model_scale(tcfg)));
    const GlideConfig gcfg = glide_for(tcfg, 2, false);
    const GlideWeights gw = bf16_matrices(gcfg, random_glide_weights(gcfg, 4, model_scale(tcfg)));
    CudaContext ctx;
    CudaModel target(tcfg, tw, ctx);
    CpuModel cpu_target(tcfg, tw);
    // Few committed tokens on both sides, so that one misplaced KV row moves the logits by O(1/5) of
    // the attention; the tree's positions 3.. straddle the target's 6 rows.
    const std::vector<int> target_prefix{5, 9, 11, 3, 2, 8}, prefix{5, 9, 11};
    detail::prefill(target, target_prefix);
    detail::prefill(cpu_target, target_prefix);
    CudaGlideModel tree_model(gcfg, gw, target, ctx), fresh(gcfg, gw, target, ctx);
    GlideModel cpu(gcfg, gw, cpu_target);
    const Tree tree = random_tree(16, tcfg.vocab_size, 21);
    const std::vector<int> path = tree.path_to(tree.size() - 1);
    REQUIRE(path.size() >= 2);
    const Tree next = Tree::chain(std::vector<int>{17});
    detail::prefill(tree_model, prefix);
    detail::prefill(cpu, prefix);
    tree_model.forward(tree, 0);
    tree_model.commit(path);
    cpu.forward(tree, 0);
    cpu.commit(path);
    REQUIRE(tree_model.cache_len() == static_cast<int>(prefix.size() + path.size()));
    const std::vector<float> got = copy_rows(tree_model.forward(next, 0));

    std::vector<int> accepted = prefix;
    for (int node : path) accepted.push_back(tree[node].token);
    detail::prefill(fresh, accepted);
    // Products over different row counts round differently, so the tree's and the chain's bf16 K/V
    // agree to rounding, not bit for bit; a misplaced row would be off by far more.
    CHECK(normalized_error(got, copy_rows(fresh.forward(next, 0))) < kModel);
    CHECK(normalized_error(got, copy_rows(cpu.forward(next, 0))) < kModel);

    SECTION("truncate back to the prefix, then decode the path as one chain; the same last row") {
        tree_model.truncate(static_cast<int>(prefix.size()));
        std::vector<int> rest(accepted.begin() + static_cast<std::ptrdiff_t>(prefix.size()), accepted.end());
        rest.push_back(next[0].token);
        const Rows rows = tree_model.forward(Tree::chain(rest), 0);
        const std::span<const float> row = rows.row(rows.rows() - 1);
        const std::vector<float> last(row.begin(), row.end());
        CHECK(normalized_error(last, got) < kModel);
    }
    SECTION("reset, then decode everything again: the same row") {
        tree_model.reset();
        detail::prefill(tree_model, accepted);
        CHECK(normalized_error(copy_rows(tree_model.forward(next, 0)), got) < kModel);
    }
}

TEST_CASE("greedy speculative decoding with CudaGlideModel as drafter equals greedy decoding of the CudaModel target",
          "[cuda][glide][generate]") {
    const std::uint64_t seed = GENERATE(1u, 2u, 3u);
    const Config cfg = test::tiny_config();
    const Weights w = bf16_matrices(cfg, random_weights(cfg, seed, 0.4f));
    CudaContext ctx;
    CudaModel target(cfg, w, ctx);
    // A drafter of the target's own shape reading both target layers, near the target.
    const GlideConfig gcfg = glide_config_for(cfg, cfg);
    CudaGlideModel glide(gcfg, near_target(gcfg, w, seed + 50), target, ctx);
    const std::vector<int> prompt{static_cast<int>(seed % 60), 3, 17, 42};
    const GenerateOptions opts{.max_new_tokens = 40, .seed = seed};
    const Generation plain = autoregressive_generate(target, prompt, opts);
    ModelProposer proposer(glide);
    TreeVerifier verifier;
    GreedyMatch acceptor;
    SECTION("a chain of 4") {
        Chain builder{.gamma = 4};
        const Generation spec = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
        check_greedy_equal(cfg, w, prompt, plain.tokens, spec.tokens);
        CHECK(spec.n_target_calls() < plain.n_target_calls());  // drafts were accepted: the check is not vacuous
    }
    SECTION("a top-k tree (3, 2, 1)") {
        KAryTree builder{.k_config = {3, 2, 1}, .draw = DrawPolicy::kTopK};
        const Generation spec = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
        check_greedy_equal(cfg, w, prompt, plain.tokens, spec.tokens);
    }
    SECTION("CAPE's expanded chain (GLIDE's own tree, §4.2)") {
        ExpandedChain builder{.gamma = 5};
        const Generation spec = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
        check_greedy_equal(cfg, w, prompt, plain.tokens, spec.tokens);
    }
}

TEST_CASE("a CUDA GLIDE drafter that does not fit its target is refused naming the values", "[cuda][glide][errors]") {
    const Config tcfg = test::tiny_config(true);  // 2 layers, 4 heads of 8, 2 kv heads, vocab 64
    CudaContext ctx;
    CudaModel target(tcfg, random_weights(tcfg, 61, 0.3f), ctx);
    const GlideConfig good = glide_for(tcfg, 1, true);
    const auto build = [&](const GlideConfig& cfg) {
        [[maybe_unused]] const CudaGlideModel model(cfg, random_glide_weights(cfg, 62), target, ctx);
    };
    CHECK_NOTHROW(build(good));
    const auto refused = [&](auto change, const std::string& ours, const std::string& theirs) {
        GlideConfig bad = good;
        change(bad);
        CHECK_THROWS_WITH(build(bad), Catch::Contains("[specdec.cuda.glide]") && Catch::Contains(ours) &&
                                          Catch::Contains(theirs));
    };
    refused([](GlideConfig& c) { c.glide_target_layers = 3; }, "glide_target_layers is 3", "num_hidden_layers 2");
    refused([](GlideConfig& c) { c.glide_cross_heads = 8; }, "glide_cross_heads is 8", "num_attention_heads 4");
    refused([](GlideConfig& c) { c.glide_cross_head_dim = 4; }, "glide_cross_head_dim is 4", "head_dim 8");
    refused([](GlideConfig& c) { c.glide_target_kv_heads = 4; }, "glide_target_kv_heads is 4", "num_key_value_heads 2");
    refused([](GlideConfig& c) { c.glide_target_rope_theta = 500000.0f; }, "glide_target_rope_theta is 500000",
            "rope_theta 10000");
    refused([](GlideConfig& c) { c.draft.vocab_size = 100; }, "vocab_size is 100", "vocab_size 64");

    CudaContext other;
    CHECK_THROWS_WITH(CudaGlideModel(good, random_glide_weights(good, 63), target, other),
                      Catch::Contains("[specdec.cuda.glide]") && Catch::Contains("CudaContext"));
}
