// specdec/detail/train/dataset.hpp — token files, deterministic training windows, evaluation, and a teacher cache.
// SPDX-License-Identifier: MIT
#pragma once

// A tokenised corpus is one flat binary file (llm.c's .bin shards, with our own header):
//
//   offset  size  field
//   0       8     magic "SDTOKENS"
//   8       4     version = 1                       (uint32, little-endian)
//   12      4     bytes per token: 2 (uint16) or 4 (uint32)
//   16      8     count: number of tokens           (uint64)
//   24      8     reserved, 0
//   32      ...   count token ids
//
// The file is memory-mapped read-only. Windows of T + 1 tokens (T inputs, T shifted targets) start at
// offsets drawn from the counter-based generator keyed by (seed, step, window), so a run is
// reproducible and can resume at any step without replaying the generator.

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "../core/concepts.hpp"
#include "../core/error.hpp"
#include "../core/rng.hpp"
#include "trainable_llama.hpp"
#include "../core/tree.hpp"

namespace specdec::train {

// ---------------------------------------------------------------------------------------------------
// The token file

constexpr char kTokenFileMagic[8] = {'S', 'D', 'T', 'O', 'K', 'E', 'N', 'S'};
constexpr std::uint32_t kTokenFileVersion = 1;
constexpr std::size_t kTokenFileHeaderBytes = 32;

/// Writes tokens to `path` in the format above, as uint16 when every id fits, else uint32.
inline void write_token_file(const std::string& path, std::span<const int> tokens) {
    int max_token = 0;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        detail::require(tokens[i] >= 0, "dataset", [&] {
            return "write_token_file '" + path + "': token " + std::to_string(tokens[i]) + " at index " +
                   std::to_string(i) + " is negative";
        });
        max_token = std::max(max_token, tokens[i]);
    }
    const std::uint32_t width = max_token < 65536 ? 2 : 4;
    std::ofstream out(path, std::ios::binary);
    detail::require(out.good(), "dataset", [&] { return "cannot create '" + path + "': " + std::strerror(errno); });
    char header[kTokenFileHeaderBytes] = {};
    const std::uint64_t count = tokens.size();
    std::memcpy(header, kTokenFileMagic, 8);
    std::memcpy(header + 8, &kTokenFileVersion, 4);
    std::memcpy(header + 12, &width, 4);
    std::memcpy(header + 16, &count, 8);
    out.write(header, sizeof header);
    for (int t : tokens) {
        if (width == 2) {
            const std::uint16_t v = static_cast<std::uint16_t>(t);
            out.write(reinterpret_cast<const char*>(&v), 2);
        } else {
            const std::uint32_t v = static_cast<std::uint32_t>(t);
            out.write(reinterpret_cast<const char*>(&v), 4);
        }
    }
    detail::require(out.good(), "dataset", [&] { return "writing '" + path + "' failed: " + std::strerror(errno); });
}

/// A token file, memory-mapped read-only. Errors name the file and what is wrong with it.
class TokenFile {
public:
    explicit TokenFile(std::string path) : path_(std::move(path)) {
        const int fd = ::open(path_.c_str(), O_RDONLY);
        detail::require(fd >= 0, "dataset", [&] { return "cannot open '" + path_ + "': " + std::strerror(errno); });
        struct stat st {};
        const bool stat_ok = ::fstat(fd, &st) == 0;
        const std::size_t size = stat_ok ? static_cast<std::size_t>(st.st_size) : 0;
        if (!stat_ok || size < kTokenFileHeaderBytes) {
            ::close(fd);
            detail::fail("dataset", "'" + path_ + "' is truncated: " + std::to_string(size) +
                                        " bytes, the header alone is " + std::to_string(kTokenFileHeaderBytes));
        }
        void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
        ::close(fd);
        detail::require(p != MAP_FAILED, "dataset",
                        [&] { return "cannot map '" + path_ + "': " + std::strerror(errno); });
        base_ = p;
        bytes_ = size;
        check_header();
    }
    ~TokenFile() {
        if (base_ != nullptr) ::munmap(base_, bytes_);
    }
    TokenFile(const TokenFile&) = delete;
    TokenFile& operator=(const TokenFile&) = delete;
    TokenFile(TokenFile&& o) noexcept
        : path_(std::move(o.path_)),
          base_(std::exchange(o.base_, nullptr)),
          bytes_(o.bytes_),
          width_(o.width_),
          count_(o.count_) {}

    const std::string& path() const { return path_; }
    std::size_t size() const { return count_; }
    int bytes_per_token() const { return static_cast<int>(width_); }

    /// Token i. Call check_vocab first: an id of 2^31 or more does not fit an int.
    int operator[](std::size_t i) const { return static_cast<int>(id(i)); }

    /// Throws naming the first token >= vocab_size (a corpus tokenised for another vocabulary), read
    /// as stored (unsigned), so that an id of 2^31 or more cannot pass as a negative int.
    void check_vocab(int vocab_size) const {
        for (std::size_t i = 0; i < count_; ++i)
            detail::require(id(i) < static_cast<std::uint32_t>(std::max(vocab_size, 0)), "dataset", [&] {
                return "'" + path_ + "': token " + std::to_string(id(i)) + " at index " + std::to_string(i) +
                       " is outside the model's vocabulary of " + std::to_string(vocab_size);
            });
    }

private:
    std::uint32_t id(std::size_t i) const {
        const unsigned char* data = static_cast<const unsigned char*>(base_) + kTokenFileHeaderBytes;
        if (width_ == 2) {
            std::uint16_t v;
            std::memcpy(&v, data + 2 * i, 2);
            return v;
        }
        std::uint32_t v;
        std::memcpy(&v, data + 4 * i, 4);
        return v;
    }

    void check_header() {
        const unsigned char* h = static_cast<const unsigned char*>(base_);
        detail::require(std::memcmp(h, kTokenFileMagic, 8) == 0, "dataset", [&] {
            return "'" + path_ +
                   "' has a bad magic number: expected \"SDTOKENS\" (a token file written by write_token_file)";
        });
        std::uint32_t version;
        std::memcpy(&version, h + 8, 4);
        std::memcpy(&width_, h + 12, 4);
        std::memcpy(&count_, h + 16, 8);
        detail::require(version == kTokenFileVersion, "dataset", [&] {
            return "'" + path_ + "' has version " + std::to_string(version) + ", this reader knows version " +
                   std::to_string(kTokenFileVersion);
        });
        detail::require(width_ == 2 || width_ == 4, "dataset", [&] {
            return "'" + path_ + "' has " + std::to_string(width_) +
                   " bytes per token, expected 2 (uint16) or 4 (uint32)";
        });
        const std::size_t payload = bytes_ - kTokenFileHeaderBytes;
        detail::require(count_ <= payload / width_, "dataset", [&] {
            return "'" + path_ + "' is truncated: the header counts " + std::to_string(count_) + " tokens of " +
                   std::to_string(width_) + " bytes, the file holds " + std::to_string(payload) +
                   " bytes after the header";
        });
    }

    std::string path_;
    void* base_ = nullptr;
    std::size_t bytes_ = 0;
    std::uint32_t width_ = 2;
    std::uint64_t count_ = 0;
};

// ---------------------------------------------------------------------------------------------------
// Splits and windows

/// Token indices [begin, end) of a file.
struct TokenRange {
    std::size_t begin = 0;
    std::size_t end = 0;
    std::size_t size() const { return end - begin; }
};

struct Split {
    TokenRange train;
    TokenRange held_out;
};

/// The last `held_out_fraction` of the tokens are held out (a separate file works too: use its
/// whole range). The split is at a token boundary, so no window spans both parts.
inline Split split_tail(std::size_t n_tokens, double held_out_fraction) {
    detail::require(held_out_fraction >= 0.0 && held_out_fraction < 1.0, "dataset", [&] {
        return "held_out_fraction must be in [0, 1), got " + std::to_string(held_out_fraction);
    });
    const std::size_t cut = n_tokens - static_cast<std::size_t>(std::floor(held_out_fraction * double(n_tokens)));
    return {{0, cut}, {cut, n_tokens}};
}

/// B windows of T + 1 consecutive tokens: inputs (B, T) and the next-token targets (B, T).
struct WindowBatch {
    int B = 0;
    int T = 0;
    std::vector<int> inputs;              // (B, T)
    std::vector<int> targets;             // (B, T)
    std::vector<std::size_t> starts;      // (B) token index of each window's first input
};

}  // namespace specdec::train

namespace specdec::detail {

inline void fill_window(train::WindowBatch& w, int b, const train::TokenFile& file, std::size_t start) {
    w.starts[b] = start;
    for (int t = 0; t < w.T; ++t) {
        w.inputs[static_cast<std::size_t>(b) * w.T + t] = file[start + t];
        w.targets[static_cast<std::size_t>(b) * w.T + t] = file[start + t + 1];
    }
}

inline train::WindowBatch empty_batch(const train::TokenFile& file, train::TokenRange range, int B, int T) {
    detail::require(B > 0 && T > 0, "dataset", [&] {
        return "windows of B = " + std::to_string(B) + ", T = " + std::to_string(T) + ": both must be > 0";
    });
    detail::require(range.begin <= range.end && range.end <= file.size() &&
                        range.size() >= static_cast<std::size_t>(T) + 1,
                    "dataset", [&] {
                        return "'" + file.path() + "': range [" + std::to_string(range.begin) + ", " +
                               std::to_string(range.end) + ") of a " + std::to_string(file.size()) +
                               "-token file cannot hold a window of T + 1 = " + std::to_string(T + 1) + " tokens";
                    });
    train::WindowBatch w{B, T, std::vector<int>(static_cast<std::size_t>(B) * T),
                         std::vector<int>(static_cast<std::size_t>(B) * T), std::vector<std::size_t>(B)};
    return w;
}

}  // namespace specdec::detail

namespace specdec::train {

/// Training windows for one step: window b starts uniformly in the range, drawn from Philox keyed by
/// (seed, step, b); the same (seed, step) always gives the same batch.
inline WindowBatch random_windows(const TokenFile& file, TokenRange range, int B, int T, std::uint64_t seed,
                                  std::uint32_t step) {
    WindowBatch w = detail::empty_batch(file, range, B, T);
    const std::uint64_t n_starts = range.size() - T;  // starts in [begin, end - T - 1]
    for (int b = 0; b < B; ++b) {
        const auto r =
            philox4x32({step, static_cast<std::uint32_t>(b), 0, static_cast<std::uint32_t>(RngStream::kUser)},
                       {static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)});
        const std::uint64_t u = (std::uint64_t{r[0]} << 32) | r[1];
        detail::fill_window(w, b, file, range.begin + u % n_starts);
    }
    return w;
}

/// Windows first..first+B-1 of `count` evenly spaced windows over the range: a fixed evaluation set.
inline WindowBatch spaced_windows(const TokenFile& file, TokenRange range, int T, int count, int first, int B) {
    WindowBatch w = detail::empty_batch(file, range, B, T);
    const std::size_t last_start = range.size() - T - 1;
    for (int b = 0; b < B; ++b) {
        const std::size_t i = static_cast<std::size_t>(first + b);
        const std::size_t start = count <= 1 ? 0 : i * last_start / static_cast<std::size_t>(count - 1);
        detail::fill_window(w, b, file, range.begin + start);
    }
    return w;
}

// ---------------------------------------------------------------------------------------------------
// Evaluation

struct EvalResult {
    double loss = 0.0;        // mean next-token cross-entropy (nats)
    double perplexity = 0.0;  // exp(loss)
    int n_windows = 0;
    long n_tokens = 0;
};

/// Mean loss over `n_windows` evenly spaced windows of the range, B at a time; batch_loss(w) returns
/// the mean loss of one batch of windows (every row counts: the windows have equal size).
template <class BatchLoss>
EvalResult evaluate_windows(const TokenFile& file, TokenRange range, int T, int n_windows, int B, BatchLoss&& batch_loss) {
    detail::require(n_windows > 0, "dataset",
                    [&] { return "evaluate: n_windows must be > 0, got " + std::to_string(n_windows); });
    double sum = 0.0;
    for (int first = 0; first < n_windows; first += B) {
        const int b = std::min(B, n_windows - first);
        sum += batch_loss(spaced_windows(file, range, T, n_windows, first, b)) * b;
    }
    EvalResult r;
    r.n_windows = n_windows;
    r.n_tokens = static_cast<long>(n_windows) * T;
    r.loss = sum / n_windows;
    r.perplexity = std::exp(r.loss);
    return r;
}

/// The same for a Llama. Overwrites the model's activations and dlogits (it is a forward pass);
/// leaves parameters and gradients alone.
inline EvalResult evaluate(TrainableLlama& model, const TokenFile& file, TokenRange range, int T, int n_windows,
                           int B = 4) {
    return evaluate_windows(file, range, T, n_windows, B, [&](const WindowBatch& w) {
        model.forward(ModelInput{.B = w.B, .T = T, .tokens = w.inputs});
        return model.cross_entropy(w.targets, /*weight=*/0.0);
    });
}

// ---------------------------------------------------------------------------------------------------
// Teacher cache

struct TeacherOptions {
    int top_k = 8;                   // entries kept per position (0: none)
    std::vector<int> hidden_layers;  // CpuModel numbering: 0 embeddings, l layer l, L final normed
};

/// What a drafter learns from a frozen target, computed once per window: at every position the
/// target's top-k next-token ids and their probabilities under the full softmax (so 1 - Σ probs is
/// the tail mass kl_divergence_topk expects), and the hidden states of chosen layers. Worth it when a
/// drafter trains several epochs over the same windows: the target's forward is the expensive part.
struct TeacherCache {
    int T = 0, K = 0, D = 0;
    std::vector<int> hidden_layers;
    std::vector<int> inputs;                  // (W, T) the windows' tokens
    std::vector<int> targets;                 // (W, T) their next tokens
    std::vector<int> top_ids;                 // (W, T, K) most likely first
    std::vector<float> top_probs;             // (W, T, K)
    std::vector<std::vector<float>> hidden;   // per hidden layer: (W, T, D)

    int n_windows() const { return T == 0 ? 0 : static_cast<int>(inputs.size() / T); }
    /// The top-k rows of windows [first, first + count), ready for kl_divergence_topk.
    TopKRows topk(int first) const {
        const std::size_t off = static_cast<std::size_t>(first) * T * K;
        return {top_ids.data() + off, top_probs.data() + off, K};
    }
};

/// Runs the frozen target over each window (one chain forward from an empty cache) and keeps what the
/// options ask for. The target's cache is reset before and after each window.
template <class Model>
    requires ExposesHidden<Model>
TeacherCache build_teacher_cache(Model& target, const WindowBatch& windows, const TeacherOptions& options) {
    const int V = target.vocab_size(), T = windows.T;
    detail::require(options.top_k >= 0 && options.top_k <= V, "dataset", [&] {
        return "teacher cache: top_k = " + std::to_string(options.top_k) + ", expected 0..V (" + std::to_string(V) +
               ")";
    });
    TeacherCache c;
    c.T = T;
    c.K = options.top_k;
    c.hidden_layers = options.hidden_layers;
    c.inputs = windows.inputs;
    c.targets = windows.targets;
    c.hidden.resize(options.hidden_layers.size());
    target.capture_hidden(options.hidden_layers);
    std::vector<int> order(V);
    std::vector<double> probs(V);
    for (int b = 0; b < windows.B; ++b) {
        target.reset();
        const Rows logits =
            target.forward(Tree::chain(std::span(windows.inputs).subspan(static_cast<std::size_t>(b) * T, T)), 0);
        for (int t = 0; t < T; ++t) {
            const std::span<const float> z = logits.row(t);
            const double mx = *std::max_element(z.begin(), z.end());
            double sum = 0.0;
            for (int j = 0; j < V; ++j) sum += (probs[j] = std::exp(double(z[j]) - mx));
            for (int j = 0; j < V; ++j) order[j] = j;
            std::partial_sort(order.begin(), order.begin() + c.K, order.end(),
                              [&](int a, int b2) { return probs[a] > probs[b2] || (probs[a] == probs[b2] && a < b2); });
            for (int e = 0; e < c.K; ++e) {
                c.top_ids.push_back(order[e]);
                c.top_probs.push_back(static_cast<float>(probs[order[e]] / sum));
            }
        }
        for (std::size_t i = 0; i < options.hidden_layers.size(); ++i) {
            const Rows h = target.hidden(static_cast<int>(i));
            c.D = h.cols;
            c.hidden[i].insert(c.hidden[i].end(), h.data.begin(), h.data.end());
        }
    }
    target.reset();
    return c;
}

/// What a frozen target says about B windows of T tokens, in full: the states of one layer (B, T, D)
/// and the next-token distributions (B, T, V), from one chain forward per window (the CPU model's
/// prefill path). EDD reads state L-3 as its soft prompt, EAGLE/FSPAD state L as features.
struct HiddenTeacher {
    int B = 0, T = 0, D = 0, V = 0;
    std::vector<float> states;
    std::vector<float> probs;
};

template <ExposesHidden Target>
HiddenTeacher hidden_teacher(Target& target, ThreadPool& pool, int layer, const WindowBatch& w) {
    HiddenTeacher t{w.B, w.T, 0, target.vocab_size(), {}, {}};
    target.capture_hidden({layer});
    t.probs.resize(static_cast<std::size_t>(w.B) * w.T * t.V);
    for (int b = 0; b < w.B; ++b) {
        target.reset();
        const Rows logits = target.forward(Tree::chain(std::span(w.inputs).subspan(static_cast<std::size_t>(b) * w.T, w.T)), 0);
        softmax_rows(pool, t.probs.data() + static_cast<std::size_t>(b) * w.T * t.V, logits.data.data(), w.T, t.V);
        const Rows h = target.hidden(0);
        t.D = h.cols;
        t.states.insert(t.states.end(), h.data.begin(), h.data.end());
    }
    target.reset();
    return t;
}

}  // namespace specdec::train
