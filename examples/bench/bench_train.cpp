// bench_train — how close does training come to the FMA peak?
//
// Measures in one run, on this machine:
//   1. the f32 FMA ceiling of the threads (ceilings.hpp's fma_ceiling: all threads together, or the
//      thread count times one thread, whichever is higher), before and after the rounds, the higher
//      kept: on a shared machine the pass that ran undisturbed shows what the hardware can do;
//   2. training steps (forward, cross-entropy, backward, clipping, AdamW) of the demo target's shape
//      (models/target/config.json and the batch of models/target/train.json when present, else the
//      same numbers built in) on random tokens, the reference path (TrainOptions::reference: the
//      layers' plain loops, products through matmul on transposed copies) and the fast path
//      (gemm.hpp's products, kernels.hpp's steps), alternating in rounds within this process so
//      that both see the same machine; medians and the spread over the rounds;
//   3. model FLOPs utilisation = 3 · forward_flops_per_token (6 · weights in products + the causal
//      attention's products) · tokens/s ÷ the FMA ceiling; and where the fast step's time goes;
//   4. the same work per CPU second (the process's CPU time, spinning workers included) as a share of
//      one core's ceiling: what the code achieves while it runs, which other work on a shared machine
//      does not change the way it changes the wall-clock figures.
//
// Build and run:  cmake --build build --target bench_train && ./build/bench_train [--threads N] [--rounds R]
//                 [--batch B] [--seq T]
// Prints a table (progress to stderr). Under a minute with the defaults (2 threads, 5 rounds).
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "../machine.hpp"
#include "ceilings.hpp"
#include "specdec.hpp"

using namespace specdec;
using namespace specdec::train;
using namespace bench;

namespace {

struct Shape {
    Config config;
    int B = 16, T = 128;
};

/// The demo target's shape: from models/ when run from the repository root, else built in.
Shape target_shape() {
    Shape s{Config{.hidden_size = 256, .intermediate_size = 704, .num_hidden_layers = 6, .num_attention_heads = 8,
                   .num_key_value_heads = 4, .vocab_size = 4096, .max_position_embeddings = 512,
                   .tie_word_embeddings = true}};
    if (std::filesystem::exists("models/target/config.json")) s.config = load_config("models/target/config.json");
    if (std::filesystem::exists("models/target/train.json")) {
        const json::Value hp = json::parse(detail::read_text_file("models/target/train.json", "bench_train"), "train.json");
        s.B = static_cast<int>(hp.at("batch").as_int());
        s.T = static_cast<int>(hp.at("seq_len").as_int());
    }
    return s;
}

/// Seconds spent in each part of a step, and the CPU seconds of the whole step (all threads).
struct StepTimes {
    double forward = 0, loss = 0, backward = 0, update = 0, cpu = 0;
    double total() const { return forward + loss + backward + update; }
};

double process_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

/// One training step, timed by part.
StepTimes step(TrainableLlama& model, AdamW<>& optimizer, const Shape& s, const std::vector<int>& tokens,
               const std::vector<int>& targets) {
    StepTimes t;
    const double cpu0 = process_cpu_seconds();
    auto t0 = Clock::now();
    model.zero_grad();
    model.forward(ModelInput{.B = s.B, .T = s.T, .tokens = tokens});
    t.forward = seconds_since(t0);
    t0 = Clock::now();
    model.cross_entropy(targets);
    t.loss = seconds_since(t0);
    t0 = Clock::now();
    model.backward();
    t.backward = seconds_since(t0);
    t0 = Clock::now();
    clip_grad_norm(model.pool(), model.grads(), model.config(), 1.0);
    optimizer.step(model.pool(), model.params(), model.grads(), 1e-4f);
    t.update = seconds_since(t0);
    t.cpu = process_cpu_seconds() - cpu0;
    return t;
}

double median_of(std::vector<double> v) {  // of an even count, the mean of the middle two
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
}

int run(int argc, char** argv) {
    int threads = 2, rounds = 5;
    Shape s = target_shape();
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (a == "--rounds" && i + 1 < argc) rounds = std::max(1, std::atoi(argv[++i]));
        else if (a == "--batch" && i + 1 < argc) s.B = std::atoi(argv[++i]);
        else if (a == "--seq" && i + 1 < argc) s.T = std::atoi(argv[++i]);
        else {
            std::fprintf(stderr, "usage: bench_train [--threads N] [--rounds R] [--batch B] [--seq T]\n");
            return 2;
        }
    }
    ThreadPool pool(threads);
    const Config& c = s.config;
    std::fprintf(stderr, "measuring the FMA ceiling...\n");
    ThreadPool one(1);
    double peak = fma_ceiling(pool), peak_one = peak_rate(one, fma_best);

    const Weights w = random_weights(c, 1, 0.02f);
    TrainableLlama reference(c, w, pool, TrainOptions{.reference = true}), fast(c, w, pool);
    AdamW<> opt_reference(c, w), opt_fast(c, w);
    const int N = s.B * s.T;
    std::vector<int> tokens(N), targets(N);
    StepRng rng{7, 0, RngStream::kUser};
    for (int i = 0; i < N; ++i) {
        tokens[i] = static_cast<int>(rng.uniform(static_cast<std::uint32_t>(i), 0) * c.vocab_size);
        targets[i] = static_cast<int>(rng.uniform(static_cast<std::uint32_t>(i), 1) * c.vocab_size);
    }

    // A warm-up step each (first touch of the activations), then the rounds, alternating.
    step(reference, opt_reference, s, tokens, targets);
    step(fast, opt_fast, s, tokens, targets);
    std::vector<double> ref_s, fast_s, ref_cpu, fast_cpu;
    std::vector<StepTimes> fast_parts;
    for (int r = 0; r < rounds; ++r) {
        std::fprintf(stderr, "round %d/%d\n", r + 1, rounds);
        const StepTimes a = step(reference, opt_reference, s, tokens, targets);
        ref_s.push_back(a.total()), ref_cpu.push_back(a.cpu);
        fast_parts.push_back(step(fast, opt_fast, s, tokens, targets));
        fast_s.push_back(fast_parts.back().total()), fast_cpu.push_back(fast_parts.back().cpu);
    }
    peak = std::max(peak, fma_ceiling(pool));
    peak_one = std::max(peak_one, peak_rate(one, fma_best));

    const double flops_per_token = 3.0 * forward_flops_per_token(c, s.T);
    std::printf("bench_train: %s; %s, %d threads; %zu parameters (L %d, D %d, F %d, heads %d/%d, V %d%s); batch %d x %d\n",
                example::machine_name().c_str(), cpu_features().avx512 ? "AVX-512" : cpu_features().avx2_fma ? "AVX2" : "scalar", threads,
                parameter_count(w, c), c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.num_attention_heads,
                c.num_key_value_heads, c.vocab_size, c.tie_word_embeddings ? ", tied" : "", s.B, s.T);
    const double attention = 3.0 * c.num_hidden_layers * 4.0 * c.num_attention_heads * c.head_dim() * (s.T + 1) / 2.0;
    std::printf("f32 FMA ceiling %.1f GFLOP/s (best pass of %d threads, before and after the rounds); %.1f MFLOP per training "
                "token (3 x forward: weight products %.1f, causal attention %.1f)\n",
                peak, threads, flops_per_token / 1e6, (flops_per_token - attention) / 1e6, attention / 1e6);
    std::printf("\n%-10s %9s %19s %9s %8s %9s %9s %13s\n", "path", "ms/step", "(min - max, rounds)", "tokens/s",
                "GFLOP/s", "% of FMA", "CPU ms", "% per CPU s");
    const auto row = [&](const char* name, const std::vector<double>& times, const std::vector<double>& cpu) {
        const double med = median_of(times), cpu_med = median_of(cpu);
        const auto [lo, hi] = std::minmax_element(times.begin(), times.end());
        const double tps = N / med;
        std::printf("%-10s %9.1f %8.1f - %-6.1f %3zu %9.0f %8.1f %8.1f%% %9.1f %12.1f%%\n", name, med * 1e3, *lo * 1e3,
                    *hi * 1e3, times.size(), tps, tps * flops_per_token / 1e9, 100.0 * tps * flops_per_token / 1e9 / peak,
                    cpu_med * 1e3, 100.0 * N * flops_per_token / cpu_med / 1e9 / peak_one);
    };
    row("reference", ref_s, ref_cpu);
    row("fast", fast_s, fast_cpu);
    std::printf("(%% per CPU s: model FLOPs per CPU second of the process, all threads, over one thread's ceiling "
                "%.1f GFLOP/s)\n", peak_one);
    std::vector<double> f, l, b, u;
    for (const StepTimes& t : fast_parts) f.push_back(t.forward), l.push_back(t.loss), b.push_back(t.backward), u.push_back(t.update);
    std::printf("\nfast step, medians: forward %.1f ms, cross-entropy %.1f ms, backward %.1f ms, clip + AdamW %.1f ms\n",
                median_of(f) * 1e3, median_of(l) * 1e3, median_of(b) * 1e3, median_of(u) * 1e3);
    std::printf("speed-up of fast over reference: %.2fx (median step)\n", median_of(ref_s) / median_of(fast_s));
    return 0;
}

}  // namespace

int main(int argc, char** argv) try {
    return run(argc, argv);
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
// Prints: the ceiling, then one row per path (median ms per step with the spread over the rounds,
// tokens/s, model GFLOP/s, % of the FMA ceiling, CPU ms per step and the work per CPU second as a
// share of one core's ceiling), then where the fast step's time goes.
