// Shared by the benchmarks: timing with medians, and the machine's ceilings measured in the same run
// (read bandwidth over a large buffer, register-resident FMA rate), each the best of many short passes.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

#include "detail/model/matmul.hpp"
#include "detail/model/thread_pool.hpp"

namespace bench {

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
    const std::size_t h = times.size() / 2;  // of an even count, the mean of the middle two
    return {times.size() % 2 == 1 ? times[h] : (times[h - 1] + times[h]) / 2, times.front()};
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

/// vdpbf16ps: each instruction multiplies 32 bf16 pairs and adds them into 16 floats, 64 flops.
SPECDEC_TARGET_AVX512_BF16 float dot_loop_bf16(long iters, float seed) {
    __m512 acc[kChains512];
    for (int c = 0; c < kChains512; ++c) acc[c] = _mm512_set1_ps(seed + float(c));
    const __m512i a = _mm512_set1_epi32(0x3F803F80), b = _mm512_set1_epi32(0x33D633D6);  // bf16 pairs (1, 1), (1e-7, 1e-7)
    for (long it = 0; it < iters; ++it)
#pragma GCC unroll 16
        for (int c = 0; c < kChains512; ++c) acc[c] = _mm512_dpbf16_ps(acc[c], (__m512bh)a, (__m512bh)b);
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

/// Runs the bf16 dot loop where the CPU has AVX512-BF16; returns flops per iteration (0 without it).
double dot_best(long iters, float seed, float* sink) {
#if defined(__x86_64__)
    if (specdec::cpu_features().avx512_bf16) return *sink = dot_loop_bf16(iters, seed), 4.0 * 16 * kChains512;
#endif
    return *sink = seed, 0.0;
}

struct Ceilings {
    double read_gbs_1 = 0, read_gbs_all = 0;     // GB/s
    double fma_gflops_1 = 0, fma_gflops_all = 0; // GFLOP/s
    double dot_gflops_all = 0;                   // bf16 x bf16 -> f32 (vdpbf16ps), all threads; 0 without AVX512-BF16
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

/// Peak arithmetic rate: 30 passes of ~3 ms, every thread running a register-resident loop
/// (fma_best or dot_best, which return flops per iteration).
template <class Loop>
double peak_rate(ThreadPool& pool, Loop loop) {
    const long iters = 500'000;
    std::vector<float> sinks(std::size_t(pool.size()));
    std::vector<double> flops_per_iter(std::size_t(pool.size()));
    double best = 0;
    for (int pass = 0; pass < 30; ++pass) {
        const auto t0 = Clock::now();
        pool.parallel_for(pool.size(), [&](int t) {
            flops_per_iter[std::size_t(t)] = loop(iters, 1.0f + float(t), &sinks[std::size_t(t)]);
        });
        const double secs = seconds_since(t0);
        double flops = 0;
        for (double f : flops_per_iter) flops += f * double(iters);
        best = std::max(best, flops / secs / 1e9);
    }
    return best;
}

/// The f32 FMA ceiling of `pool`'s threads: the better of all threads measured together and the
/// thread count times one thread alone. On a machine shared with other work, all threads rarely run
/// undisturbed for a whole pass at once, and the first figure alone can come out at one core's rate.
inline double fma_ceiling(ThreadPool& pool) {
    ThreadPool one(1);
    return std::max(peak_rate(pool, fma_best), pool.size() * peak_rate(one, fma_best));
}

/// Fills `big` (first touch in parallel, so pages spread over the threads) and measures all four ceilings.
/// Pass a HugeVector: the model's weights and KV cache sit on huge pages, so their floor is read from
/// the same kind of memory.
inline Ceilings measure_ceilings(ThreadPool& pool, std::span<float> big) {
    ThreadPool one(1);
    pool.parallel_for(64, [&](int t) {
        const std::size_t b = big.size() * std::size_t(t) / 64, e = big.size() * std::size_t(t + 1) / 64;
        for (std::size_t i = b; i < e; ++i) big[i] = float(i % 1000) * 1e-3f;
    });
    Ceilings c;
    c.threads = pool.size();
    c.read_gbs_1 = read_bandwidth(one, big.data(), big.size());
    c.read_gbs_all = read_bandwidth(pool, big.data(), big.size());
    c.fma_gflops_1 = peak_rate(one, fma_best);
    c.fma_gflops_all = peak_rate(pool, fma_best);
    c.dot_gflops_all = peak_rate(pool, dot_best);
    return c;
}

}  // namespace bench
