// bench_model — is the CPU model's forward at the hardware's floor, and is verifying a tree almost free?
//
// Measures in one run, on this machine:
//   1. the ceilings: read bandwidth and f32 FMA rate, 1 thread and all threads (ceilings.hpp);
//   2. for each model shape (the ~15M and ~110M Llamas of llama2.c's scale, and the demo target if
//      models/target exists), in float32 and bfloat16 weights, random weights:
//        - decode: one token on a 256-token cache, median latency, beside its floor
//          (bytes that must be read: weight matrices + the KV cache, / measured bandwidth);
//        - tree verification: N = 1, 2, 4, 8, 16, 32, 64 nodes (a random tree), ratio to N = 1;
//        (these two in interleaved rounds, each round with its own bandwidth pass, ratios taken
//        within a round: see below)
//        - prefill: 512 tokens, GFLOP/s as a share of the FMA ceiling;
//      and, beside the fast model (W packed as panels where the CPU has AVX-512), the model that
//      multiplies W as stored (decode and N = 16, "rows"), for bf16 the model whose products take x
//      in float32 ("f32x": W widened, no vdpbf16ps), and the plain-loop reference's decode.
// Weights are ordinary heap memory, touched and warmed by a first run before timing.
//   3. only with --only 1.1B-hf / gguf-1.1B: the 1.1B (TinyLlama) shape written as a random bf16 HF
//      folder of two shards / a GGUF BF16 file in $TMPDIR (2.2 GB, removed after): the time the loader
//      + CpuModel (bf16) take beside the time to read the files — matrices left in the mapped file
//      (LoadOptions::defer_matrices) and through float32 Weights — then bf16 decode beside its floor.
//
// Build and run:  cmake --build build --target bench_model && ./build/bench_model [--threads N] [--csv F] [--quick]
//                 [--only demo|15M|110M|1.1B-hf|gguf-1.1B]
// Prints a table (progress to stderr); --csv writes the same rows. Takes 2-4 minutes (--quick: ~30 s).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../machine.hpp"
#include "ceilings.hpp"
#include "specdec.hpp"

using namespace specdec;
using namespace bench;

namespace {

struct Row {
    std::string model, dtype, what;
    int n = 0;
    double median_ms = 0, best_ms = 0, ratio = 0;  // ratio: x floor (decode), / N=1 (tree), % FMA (prefill)
};

double median_of(std::vector<double> v) {  // of an even count, the mean of the middle two
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
}

std::size_t matrix_params(const Config& c) {
    const std::size_t D = c.hidden_size, F = c.intermediate_size, q = std::size_t(c.num_attention_heads) * c.head_dim();
    return c.num_hidden_layers * (q * D + 2 * std::size_t(c.kv_dim()) * D + D * q + 3 * F * D) +
           std::size_t(c.vocab_size) * D;  // the head; the embedding is gathered, not read whole
}

Tree random_tree(int n, int vocab, std::uint64_t seed) {
    Tree t;
    StepRng rng{seed, 0, RngStream::kUser};
    t.add_root(1);
    for (int i = 1; i < n; ++i)
        t.add(static_cast<int>(rng.uniform(i, 1) * vocab), static_cast<int>(rng.uniform(i, 0) * i));
    return t;
}

// ---- 1.1B from a sharded HF folder: load time against reading the files, then decode against its floor

/// Writes a random bf16 checkpoint of `c` as HF's sharded layout in `dir` (two shards, cut at half the
/// bytes): tensors generated one at a time, never a float32 copy of the model.
void write_random_sharded(const std::filesystem::path& dir, const Config& c, int n_shards) {
    std::filesystem::create_directories(dir);
    save_config(c, dir / "config.json", "bfloat16");
    Weights shapes;  // only for the names and sizes: for_each_tensor visits them, nothing is allocated
    shapes.layers.resize(c.num_hidden_layers);
    std::vector<std::pair<std::string, std::size_t>> tensors;
    std::size_t total = 0;
    for_each_tensor(shapes, c, [&](const std::string& name, const std::vector<float>&, std::size_t n) {
        tensors.emplace_back(name, n);
        total += 2 * n;
    });
    json::Object weight_map;
    std::size_t at = 0;
    std::uint64_t state = 0x9E3779B97F4A7C15ull;
    for (int s = 0; s < n_shards; ++s) {
        char file[64];
        std::snprintf(file, sizeof file, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
        std::deque<std::vector<bf16>> data;
        std::vector<TensorToWrite> out;
        std::size_t bytes = 0;
        for (; at < tensors.size() && (s + 1 == n_shards || bytes < total / n_shards); ++at) {
            const auto& [name, n] = tensors[at];
            auto& v = data.emplace_back(n);
            const bool norm = name.find("norm") != std::string::npos;
            for (bf16& x : v) {  // uniform in [-0.035, 0.035] (std 0.02), from xorshift64*: fast, reproducible
                state ^= state >> 12, state ^= state << 25, state ^= state >> 27;
                const float u = static_cast<float>((state * 0x2545F4914F6CDD1Dull) >> 40) * (1.0f / 16777216.0f);
                x = to_bf16(norm ? 1.0f : 0.07f * (u - 0.5f));
            }
            out.push_back({name, DType::kBF16, detail::hf_shape(name, c), std::as_bytes(std::span<const bf16>(v))});
            weight_map.set(name, std::string(file));
            bytes += 2 * n;
        }
        write_safetensors(dir / file, out, {{"format", "pt"}});
    }
    json::Object index;
    index.set("weight_map", std::move(weight_map));
    std::ofstream(dir / kSafetensorsIndexName) << json::dump(json::Value(std::move(index)), 2) << "\n";
}

/// Seconds to read every file of `dir` once into a buffer (what `cat dir/* > /dev/null` does).
double read_seconds(const std::filesystem::path& dir) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<char> buf(std::size_t(1) << 22);
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        std::FILE* f = std::fopen(e.path().c_str(), "rb");
        if (!f) continue;
        while (std::fread(buf.data(), 1, buf.size(), f) == buf.size()) {
        }
        std::fclose(f);
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void print(const Row& r);

/// Seconds a loader + CpuModel take, `make(LoadOptions)` returning the model: deferred (the file's
/// matrices packed in place) in a fresh process first, then through float32 Weights, then deferred
/// again. The first includes the kernel handing this process pages it never had (zeroed; slow in a
/// VM whose host backs guest memory on first touch); the later ones get pages freed by the earlier.
struct LoadTimes {
    double cold_s = 0, full_s = 0, warm_s = 0;
};

template <class Make>
LoadTimes load_times(const char* name, Make&& make) {
    using clock = std::chrono::steady_clock;
    const auto timed = [&](LoadOptions o) {
        const auto t0 = clock::now();
        { const auto model = make(o); }
        return std::chrono::duration<double>(clock::now() - t0).count();
    };
    LoadTimes t;
    std::fprintf(stderr, "%s: loading with the matrices left in the mapped file(s) ...\n", name);
    t.cold_s = timed({.defer_matrices = true});
    std::fprintf(stderr, "%s: loading into float32 Weights, then the model ...\n", name);
    t.full_s = timed({});
    std::fprintf(stderr, "%s: deferred again ...\n", name);
    t.warm_s = timed({.defer_matrices = true});
    return t;
}

/// The 1.1B (TinyLlama) shape from a two-shard bf16 HF folder written to `dir`: load time beside the
/// time to read the files, then bf16 decode on a 256-token cache beside its floor. Removes `dir`.
void bench_sharded_hf(ThreadPool& pool, double best_gbs, const std::filesystem::path& dir, std::vector<Row>& rows) {
    const Config cfg{.hidden_size = 2048, .intermediate_size = 5632, .num_hidden_layers = 22, .num_attention_heads = 32,
                     .num_key_value_heads = 4, .vocab_size = 32000, .max_position_embeddings = 2048};
    std::fprintf(stderr, "1.1B-hf: writing a random bf16 checkpoint (2 shards) to %s ...\n", dir.c_str());
    std::filesystem::remove_all(dir);
    write_random_sharded(dir, cfg, 2);
    const double read_s = std::min(read_seconds(dir), read_seconds(dir));  // the page cache holds it: best of two
    const ModelOptions options{.max_tree_nodes = 64, .weight_format = WeightFormat::kBF16, .pool = &pool};
    const LoadTimes t = load_times(
        "1.1B-hf", [&](LoadOptions o) { Checkpoint ck = load_checkpoint(dir, o); return CpuModel(ck.config, std::move(ck.weights), options); });
    std::printf("1.1B-hf: read the files %.2f s; load_checkpoint + CpuModel bf16: %.2f s through float32 Weights; deferred "
                "(defer_matrices) %.2f s first, %.2f s again: %.2f s beyond reading\n",
                read_s, t.full_s, t.cold_s, t.warm_s, t.warm_s - read_s);
    rows.push_back({"1.1B-hf", "bf16", "read", 0, 1e3 * read_s, 1e3 * read_s, 1.0});
    rows.push_back({"1.1B-hf", "bf16", "load f32", 0, 1e3 * t.full_s, 1e3 * t.full_s, t.full_s / read_s});
    rows.push_back({"1.1B-hf", "bf16", "load 1st", 0, 1e3 * t.cold_s, 1e3 * t.cold_s, t.cold_s / read_s});
    rows.push_back({"1.1B-hf", "bf16", "load", 0, 1e3 * t.warm_s, 1e3 * t.warm_s, t.warm_s / read_s});
    for (std::size_t i = rows.size() - 4; i < rows.size(); ++i) print(rows[i]);
    Checkpoint ck = load_checkpoint(dir, {.defer_matrices = true});
    CpuModel model(ck.config, std::move(ck.weights), options);
    std::vector<int> context(256);
    for (int i = 0; i < 256; ++i) context[i] = (i * 37) % cfg.vocab_size;
    detail::prefill(model, context, 64);
    const Tree one = Tree::chain(std::vector<int>{5});
    const double bytes = double(matrix_params(cfg)) * 2 + 2.0 * 4 * cfg.num_hidden_layers * 256 * cfg.kv_dim();
    const Timing d = time_runs([&](int) { model.forward(one, 0); }, 5, 2.0);
    const double floor_s = bytes / (best_gbs * 1e9);
    rows.push_back({"1.1B-hf", "bf16", "decode", 1, 1e3 * d.median, 1e3 * d.best, d.median / floor_s});
    print(rows.back());
    std::filesystem::remove_all(dir);
}

void print(const Row& r) {
    std::printf("%-8s %-5s %-9s %4d %11.3f %11.3f %9.2f\n", r.model.c_str(), r.dtype.c_str(), r.what.c_str(), r.n,
                r.median_ms, r.best_ms, r.ratio);
    std::fflush(stdout);
}

// ---- a 1.1B-shape model (TinyLlama's: D 2048, F 5632, 22 layers, 32 heads, 4 kv heads, V 32000) exported
// to GGUF BF16 in the temporary folder and loaded back: load time beside the time to read the file, then
// decode beside its floor. Its own case (--only gguf-1.1B), not in the default run: it writes 2.2 GB.

int gguf_case(ThreadPool& pool, double best_gbs, HugeVector<float>& big, bool quick) {
    const Config cfg{.hidden_size = 2048, .intermediate_size = 5632, .num_hidden_layers = 22, .num_attention_heads = 32,
                     .num_key_value_heads = 4, .vocab_size = 32000, .max_position_embeddings = 2048};
    const std::filesystem::path path = std::filesystem::temp_directory_path() / "specdec_bench_1.1B.gguf";
    {
        std::fprintf(stderr, "gguf-1.1B: weights (a cheap generator: the values do not matter here) ...\n");
        Weights w;
        w.layers.resize(static_cast<std::size_t>(cfg.num_hidden_layers));
        std::uint64_t state = 0x9E3779B97F4A7C15ull;
        for_each_tensor(w, cfg, [&](const std::string& name, std::vector<float>& t, std::size_t n) {
            t.resize(n);
            const bool norm = name.find("norm") != std::string::npos;
            for (float& x : t) {
                state ^= state << 13, state ^= state >> 7, state ^= state << 17;
                x = norm ? 1.0f : 0.02f * (static_cast<float>(state >> 40) / 16777216.0f - 0.5f);
            }
        });
        std::fprintf(stderr, "gguf-1.1B: save_gguf BF16 ...\n");
        save_gguf(path, cfg, w, nullptr, GgufSaveType::kBF16);
    }
    const double file_gb = static_cast<double>(std::filesystem::file_size(path)) / 1e9;
    // Reading the file: its bytes into memory once (from the page cache, where save_gguf left it).
    const auto t0 = std::chrono::steady_clock::now();
    {
        std::FILE* f = std::fopen(path.c_str(), "rb");
        if (!f) throw std::runtime_error("cannot read " + path.string());
        std::vector<char> chunk(std::size_t(64) << 20);
        double sum = 0;
        while (const std::size_t n = std::fread(chunk.data(), 1, chunk.size(), f)) sum += chunk[n - 1];
        std::fclose(f);
        if (sum == 0.5) std::printf(" ");
    }
    const ModelOptions options{.max_tree_nodes = 64, .weight_format = WeightFormat::kBF16, .pool = &pool};
    const double read_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const LoadTimes t = load_times("gguf-1.1B", [&](LoadOptions o) {
        GgufModel g = load_gguf(path, o);
        return CpuModel(g.config, std::move(g.weights), options);
    });
    GgufModel m = load_gguf(path, {.defer_matrices = true});
    CpuModel model(m.config, std::move(m.weights), options);
    std::filesystem::remove(path);  // the model no longer reads it
    std::printf("gguf-1.1B: file %.2f GB; reading it %.2f s (%.1f GB/s); load_gguf + CpuModel bf16: %.2f s through float32 "
                "Weights; deferred (defer_matrices) %.2f s first, %.2f s again: %.2f s beyond the read\n",
                file_gb, read_s, file_gb / read_s, t.full_s, t.cold_s, t.warm_s, t.warm_s - read_s);
    std::vector<int> context(256);
    for (int i = 0; i < 256; ++i) context[static_cast<std::size_t>(i)] = (i * 37) % cfg.vocab_size;
    detail::prefill(model, context, 64);
    const double bytes = double(matrix_params(cfg)) * 2 + 2.0 * 4 * cfg.num_hidden_layers * 256 * cfg.kv_dim();
    best_gbs = std::max(best_gbs, read_bandwidth(pool, big.data(), big.size()));
    const Tree one = Tree::chain(std::vector<int>{5});
    const Timing d = time_runs([&](int) { model.forward(one, 0); }, 3, quick ? 0.5 : 2.0);
    const double floor_s = bytes / (best_gbs * 1e9);
    std::printf("%-8s %-5s %-9s %4s %11s %11s %9s\n", "model", "dtype", "what", "N", "median ms", "best ms", "ratio");
    print({"gguf-1.1B", "bf16", "decode", 1, 1e3 * d.median, 1e3 * d.best, d.median / floor_s});
    std::printf("decode floor %.1f ms: %.2f GB of bf16 matrices + KV at %.1f GB/s\n", 1e3 * floor_s, bytes / 1e9, best_gbs);
    return 0;
}

int run(int argc, char** argv) {
    int threads = 0;
    std::string csv;
    bool quick = false;
    std::string only;  // one shape by name
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--threads" && i + 1 < argc) threads = std::atoi(argv[++i]);
        else if (a == "--csv" && i + 1 < argc) csv = argv[++i];
        else if (a == "--quick") quick = true;
        else if (a == "--only" && i + 1 < argc) only = argv[++i];
        else {
            std::fprintf(stderr, "usage: bench_model [--threads N] [--csv FILE] [--quick] [--only demo|15M|110M|1.1B-hf|gguf-1.1B]\n");
            return 2;
        }
    }
    ThreadPool pool(threads);
    std::fprintf(stderr, "ceilings ...\n");
    Ceilings ceil;
    HugeVector<float> big((std::size_t(1) << 30) / sizeof(float));  // kept for each round's bandwidth pass
    ceil = measure_ceilings(pool, big);
    double best_gbs = ceil.read_gbs_all;
    if (only == "gguf-1.1B") return gguf_case(pool, best_gbs, big, quick);
    std::printf("%s; threads %d; read %.1f GB/s (1 thread) %.1f GB/s (all); f32 FMA %.1f GFLOP/s (1 thread) %.1f (all)\n",
                example::machine_name().c_str(), pool.size(), ceil.read_gbs_1, ceil.read_gbs_all, ceil.fma_gflops_1, ceil.fma_gflops_all);
    const bool dot = panels_available() && bf16_dot_available();
    if (dot) std::printf("bf16 dot (vdpbf16ps, bf16 x bf16 -> f32) %.1f GFLOP/s (all)\n", ceil.dot_gflops_all);
    std::printf("decode and trees: medians over interleaved rounds (best ms: the best round; decode = the N = 1 tree); "
                "decode ratio = time / floor, floor = (matrix bytes + KV bytes) / the best read bandwidth of the run so "
                "far; tree ratio = / N=1 in the same round; rows and f32x: N=16 / their own decode; prefill ratio = %% "
                "of %.1f GFLOP/s (f32)%s\n\n",
                ceil.fma_gflops_all, dot ? " or of the bf16 dot ceiling (bf16, whose products run on it)" : "");
    std::printf("fast path: %s\n\n", panels_available() ? "W packed as panels, panel_matmul (AVX-512)"
                                                        : "W as stored, matmul's rows kernel (no AVX-512)");
    std::printf("%-8s %-5s %-9s %4s %11s %11s %9s\n", "model", "dtype", "what", "N", "median ms", "best ms", "ratio");

    struct Shape {
        std::string name;
        Config cfg;
    };
    std::vector<Shape> shapes;
    if (std::filesystem::exists("models/target/config.json"))
        shapes.push_back({"demo", load_config("models/target/config.json")});
    shapes.push_back({"15M", Config{.hidden_size = 288, .intermediate_size = 768, .num_hidden_layers = 6,
                                    .num_attention_heads = 6, .num_key_value_heads = 6, .vocab_size = 32000,
                                    .max_position_embeddings = 1024}});
    shapes.push_back({"110M", Config{.hidden_size = 768, .intermediate_size = 2048, .num_hidden_layers = 12,
                                     .num_attention_heads = 12, .num_key_value_heads = 12, .vocab_size = 32000,
                                     .max_position_embeddings = 1024}});
    std::vector<Row> rows;
    const auto record = [&](Row r) {
        print(r);
        rows.push_back(std::move(r));
    };
    const double min_s = quick ? 0.05 : 0.3;
    if (only == "1.1B-hf") bench_sharded_hf(pool, best_gbs, std::filesystem::temp_directory_path() / "specdec_bench_1b_hf", rows);
    for (const Shape& s : shapes) {
        if (!only.empty() && s.name != only) continue;
        Config cfg = s.cfg;
        cfg.max_position_embeddings = std::max(cfg.max_position_embeddings, 1024);
        std::fprintf(stderr, "%s: random weights ...\n", s.name.c_str());
        const Weights w = random_weights(cfg, 1, 0.02f);
        for (WeightFormat fmt : {WeightFormat::kF32, WeightFormat::kBF16}) {
            const std::string dtype = fmt == WeightFormat::kF32 ? "f32" : "bf16";
            std::fprintf(stderr, "%s %s ...\n", s.name.c_str(), dtype.c_str());
            CpuModel model(cfg, w, {.max_tree_nodes = 512, .weight_format = fmt, .pool = &pool});
            std::vector<int> context(256);
            for (int i = 0; i < 256; ++i) context[i] = (i * 37) % cfg.vocab_size;
            detail::prefill(model, context, 64);
            // Decode (a one-node tree: a forward of one node, never committed, so every repetition sees
            // the same cache) and trees of N nodes, in interleaved rounds. This machine's bandwidth
            // drifts by up to ±40% within minutes; a decode step is bound by it and a 16-node tree by
            // arithmetic, so medians taken a minute apart gave N = 16 / N = 1 anywhere from 1.3 to
            // 1.9 for one build. So each round times every N once, starting one size later than the
            // round before (what follows the round's bandwidth pass ran measurably slower), a ratio
            // is formed within each round and the median over rounds reported. The decode floor uses
            // the best bandwidth seen in the run, the ceiling's or any round's: drift can only make
            // the ratio worse, never flatter it.
            const double bytes = double(matrix_params(cfg)) * (fmt == WeightFormat::kF32 ? 4 : 2) +
                                 2.0 * 4 * cfg.num_hidden_layers * 256 * cfg.kv_dim();
            const std::vector<int> sizes = {1, 2, 4, 8, 16, 32, 64};
            std::vector<Tree> trees;
            for (int n : sizes) trees.push_back(random_tree(n, cfg.vocab_size, 7 + n));
            const int rounds = quick ? 3 : 9;
            std::vector<double> round_gbs;
            std::vector<std::vector<double>> tree_ms(sizes.size()), tree_ratio(sizes.size());
            for (int r = 0; r < rounds; ++r) {
                std::fprintf(stderr, "\r  round %d of %d", r + 1, rounds);
                round_gbs.push_back(read_bandwidth(pool, big.data(), big.size()));
                std::vector<double> t(sizes.size());
                for (std::size_t j = 0; j < sizes.size(); ++j) {
                    const std::size_t i = (j + std::size_t(r)) % sizes.size();
                    t[i] = time_runs([&](int) { model.forward(trees[i], 0); }, 3, min_s / rounds).median;
                }
                for (std::size_t i = 0; i < sizes.size(); ++i) {
                    tree_ms[i].push_back(1e3 * t[i]);
                    tree_ratio[i].push_back(t[i] / t[0]);
                }
            }
            std::fprintf(stderr, "\n");
            best_gbs = std::max(best_gbs, *std::max_element(round_gbs.begin(), round_gbs.end()));
            const double floor_s = bytes / (best_gbs * 1e9);
            std::printf("%s %s: %d rounds, read %.1f-%.1f GB/s (median %.1f); decode floor at %.1f GB/s\n",
                        s.name.c_str(), dtype.c_str(), rounds, *std::min_element(round_gbs.begin(), round_gbs.end()),
                        *std::max_element(round_gbs.begin(), round_gbs.end()), median_of(round_gbs), best_gbs);
            const auto best_of = [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); };
            record({s.name, dtype, "decode", 1, median_of(tree_ms[0]), best_of(tree_ms[0]), median_of(tree_ms[0]) * 1e-3 / floor_s});
            const Tree one = Tree::chain(std::vector<int>{5});
            if (fmt == WeightFormat::kF32 || !quick) {
                CpuModel ref(cfg, w, {.max_tree_nodes = 512, .weight_format = fmt, .reference = true});
                detail::prefill(ref, context, 64);
                const Timing r = time_runs([&](int) { ref.forward(one, 0); }, 2, min_s);
                record({s.name, dtype, "reference (1 thread)", 1, 1e3 * r.median, 1e3 * r.best, r.median / floor_s});
            }
            for (std::size_t i = 0; i < sizes.size(); ++i)
                record({s.name, dtype, "tree", sizes[i], median_of(tree_ms[i]), best_of(tree_ms[i]), median_of(tree_ratio[i])});
            // Another build of the same weights, measured beside the fast model: decode, and N = 16 as a
            // ratio to its own decode.
            const auto beside = [&](const std::string& name, const ModelOptions& options) {
                CpuModel other(cfg, w, options);
                detail::prefill(other, context, 64);
                const Timing d = time_runs([&](int) { other.forward(one, 0); }, 5, min_s);
                record({s.name, dtype, name + " dec", 1, 1e3 * d.median, 1e3 * d.best, d.median / floor_s});
                const Tree t16 = random_tree(16, cfg.vocab_size, 7 + 16);
                const Timing t = time_runs([&](int) { other.forward(t16, 0); }, 5, min_s);
                record({s.name, dtype, name + " tree", 16, 1e3 * t.median, 1e3 * t.best, t.median / d.median});
            };
            // W multiplied as stored (matmul's rows kernel): what the panels gain.
            if (panels_available())
                beside("rows", {.max_tree_nodes = 512, .weight_format = fmt, .pool = &pool, .panels = false});
            // bf16 products taking x as float32 (W widened in registers) instead of rounding x to bf16
            // for vdpbf16ps (ModelOptions::bf16_inputs): what AVX512-BF16 gains.
            if (fmt == WeightFormat::kBF16 && dot)
                beside("f32x", {.max_tree_nodes = 512, .weight_format = fmt, .pool = &pool, .bf16_inputs = false});
            // Prefill of 512 tokens on an empty cache.
            model.reset();
            std::vector<int> prompt(512);
            for (int i = 0; i < 512; ++i) prompt[i] = (i * 101) % cfg.vocab_size;
            const Tree chain = Tree::chain(prompt);
            const Timing pf = time_runs([&](int) { model.forward(chain, 0); }, 2, min_s);
            const double flops = 2.0 * double(matrix_params(cfg)) * 512 +
                                 2.0 * 2 * cfg.num_hidden_layers * cfg.hidden_size * (512.0 * 513 / 2);
            const double peak = fmt == WeightFormat::kBF16 && dot ? ceil.dot_gflops_all : ceil.fma_gflops_all;
            record({s.name, dtype, "prefill", 512, 1e3 * pf.median, 1e3 * pf.best, 100.0 * flops / pf.median / 1e9 / peak});
        }
    }
    if (!csv.empty()) {
        std::FILE* f = std::fopen(csv.c_str(), "w");
        if (!f) throw std::runtime_error("cannot write " + csv);
        std::fprintf(f, "model,dtype,what,n,median_ms,best_ms,ratio,read_gbs,fma_gflops,dot_gflops\n");
        for (const Row& r : rows)
            std::fprintf(f, "%s,%s,%s,%d,%.4f,%.4f,%.4f,%.2f,%.2f,%.2f\n", r.model.c_str(), r.dtype.c_str(),
                         r.what.c_str(), r.n, r.median_ms, r.best_ms, r.ratio, ceil.read_gbs_all, ceil.fma_gflops_all,
                         ceil.dot_gflops_all);
        std::fclose(f);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_model: %s\n", e.what());
        return 1;
    }
}
