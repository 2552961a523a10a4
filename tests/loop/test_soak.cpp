// The soak: every shipped composition, many generations in a row on one set of models, with random
// prompts, seeds, temperatures, top-k/top-p, gammas and tree shapes. After each generation: greedy
// output equals plain greedy decoding; the target's cache holds exactly the committed text, row for row
// what a fresh prefill of that text gives, and still does after a truncate; generations that fill the
// context to its last position end cleanly. Memory: ASan/LSan check leaks in CI; scripts/soak.sh runs
// thousands of generations and compares the resident set after warm-up with the one at the end.
//
// SPECDEC_SOAK_STEPS sets the number of generations (default 320: about a second in Release); when it is set the
// test prints its progress and checks the resident set.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "catch.hpp"
#include "helpers.hpp"
#include "world.hpp"

namespace test_soak {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

/// The shared models (world.hpp, seeds 21..24), EDD's one-layer drafter on the target's states, and a
/// second copy of the target that only prefills: the reference for the cache.
struct World : test::World {
    World() : test::World(21) {}
    CpuModel reference{cfg, w};
    CpuModel edd_drafter{edd_drafter_config(cfg), train::edd_initial_weights(edd_drafter_config(cfg), w, 25, 0.4f)};
};

using Rng = std::mt19937_64;

int uniform_int(Rng& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
float uniform_float(Rng& rng, float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

// Each composition: a proposer, a builder given a random shape each generation, and the acceptor that
// keeps it lossless when sampling (GreedyMatch at T = 0).

struct Autoregressive {
    static constexpr const char* kName = "autoregressive";
    NoProposer proposer;
    RootOnly builder;
    SampleAndMatch sampled;
    explicit Autoregressive(World& w) : proposer{w.target.vocab_size()} {}
    void shuffle(Rng&) {}
};
struct SdChain {
    static constexpr const char* kName = "SD chain";
    ModelProposer<CpuModel> proposer;
    Chain builder;
    SpeculativeSampling sampled;
    explicit SdChain(World& w) : proposer(w.small) {}
    void shuffle(Rng& rng) { builder.gamma = uniform_int(rng, 1, 8); }
};
struct TokenTree {
    static constexpr const char* kName = "token tree (KAryTree)";
    ModelProposer<CpuModel> proposer;
    KAryTree builder;
    MultiDraftSampling sampled_draws;
    SampleAndMatch sampled_top_k;
    explicit TokenTree(World& w) : proposer(w.mid) {}
    void shuffle(Rng& rng) {
        builder.k_config.assign(static_cast<std::size_t>(uniform_int(rng, 1, 4)), 1);
        for (int& k : builder.k_config) k = uniform_int(rng, 1, 4);
        builder.draw = static_cast<DrawPolicy>(uniform_int(rng, 0, 2));
    }
};
struct CsDrafting : test::CsThreeLevels {  // CS(mid, small, Max-Gram) as example 06 composes it
    static constexpr const char* kName = "CS Drafting";
    Chain builder;
    SpeculativeSampling sampled;
    explicit CsDrafting(World& w) : CsThreeLevels(w) {}
    void shuffle(Rng& rng) { builder.gamma = uniform_int(rng, 1, 8); }
};
struct Glide {
    static constexpr const char* kName = "GLIDE chain";
    ModelProposer<GlideModel<CpuModel>> proposer;
    Chain builder;
    SpeculativeSampling sampled;
    explicit Glide(World& w) : proposer(w.glide) {}
    void shuffle(Rng& rng) { builder.gamma = uniform_int(rng, 1, 8); }
};
struct GlideCape {
    static constexpr const char* kName = "GLIDE + CAPE";
    ModelProposer<GlideModel<CpuModel>> proposer;
    ExpandedChain builder;
    SampleAndMatch sampled;
    explicit GlideCape(World& w) : proposer(w.glide) {}
    void shuffle(Rng& rng) {
        builder.gamma = uniform_int(rng, 1, 6);
        builder.max_drafts = uniform_int(rng, builder.gamma, 32);
        if (uniform_int(rng, 0, 1) == 1) builder.sizes = ExpansionSizes::fixed(uniform_int(rng, 1, 4));
        else builder.sizes = ExpansionSizes{};
    }
};
struct EddPct {
    static constexpr const char* kName = "EDD + PCT";
    EddProposer<CpuModel> proposer;
    PrunedCandidateTree builder;
    SampleAndMatch sampled;
    explicit EddPct(World& w) : proposer(w.target, w.edd_drafter, edd_hidden_layer(w.cfg)) {}
    void shuffle(Rng& rng) {
        builder.expand_threshold = uniform_float(rng, 0.02f, 0.5f);
        builder.leaf_threshold = uniform_float(rng, 0.005f, 0.1f);
        builder.width = uniform_int(rng, 1, 5);
        builder.max_depth = uniform_int(rng, 1, 8);
        builder.max_drafts = uniform_int(rng, 1, 48);
    }
};
struct Eagle2 {
    static constexpr const char* kName = "EAGLE-2 tree";
    ModelProposer<CpuModel> proposer;
    Eagle2Tree builder;
    SampleAndMatch sampled;
    explicit Eagle2(World& w) : proposer(w.mid) {}
    void shuffle(Rng& rng) {
        builder.total_tokens = uniform_int(rng, 1, 24);
        builder.depth = uniform_int(rng, 1, 6);
        builder.top_k = uniform_int(rng, 1, 5);
    }
};

/// Resident set size in bytes (/proc/self/statm's second field, in pages).
long resident_bytes() {
    std::ifstream statm("/proc/self/statm");
    long size = 0, resident = 0;
    statm >> size >> resident;
    return resident * ::sysconf(_SC_PAGESIZE);
}

/// The target's cache holds `committed` (cache_len and every row), as the reference's fresh prefill of
/// it does; then again after truncating to a random shorter length.
void check_cache(World& w, const std::vector<int>& committed, Rng& rng) {
    REQUIRE(w.target.cache_len() == static_cast<int>(committed.size()));
    w.reference.reset();
    prefill(w.reference, committed);
    const auto same_rows = [&](int rows) {
        for (int l = 0; l < w.target.num_layers(); ++l) {
            const KvView got = w.target.kv(l), want = w.reference.kv(l);
            REQUIRE(got.len == rows);
            REQUIRE(want.len >= rows);
            const std::size_t n = static_cast<std::size_t>(rows) * got.n_kv_heads * got.head_dim;
            REQUIRE(got.k.size() >= n);
            float worst = 0.0f;
            for (std::size_t i = 0; i < n; ++i) {
                worst = std::max(worst, std::abs(got.k[i] - want.k[i]) / (1.0f + std::abs(want.k[i])));
                worst = std::max(worst, std::abs(got.v[i] - want.v[i]) / (1.0f + std::abs(want.v[i])));
            }
            CAPTURE(l, rows);
            REQUIRE(worst < 1e-4f);
        }
    };
    same_rows(static_cast<int>(committed.size()));
    if (committed.empty()) return;
    const int keep = uniform_int(rng, 0, static_cast<int>(committed.size()));
    w.target.truncate(keep);
    REQUIRE(w.target.cache_len() == keep);
    same_rows(keep);
}

struct Tally {
    int generations = 0, greedy = 0, filled = 0;
    long tokens = 0;
};

/// One generation of composition C with a random request; checks (1)-(3) of the header.
template <class C>
void generate_once(World& w, C& c, Rng& rng, Tally& tally) {
    const int context = w.target.context_size();
    const int V = w.cfg.vocab_size;
    std::vector<int> prompt(static_cast<std::size_t>(uniform_int(rng, 1, context - 1)));
    const bool repetitive = uniform_int(rng, 0, 1) == 1;  // Max-Gram finds matches in repeats
    for (std::size_t i = 0; i < prompt.size(); ++i)
        prompt[i] = repetitive && i >= 6 ? prompt[i - 6] : uniform_int(rng, 0, V - 1);
    const int room = context - static_cast<int>(prompt.size());
    const bool fill = uniform_int(rng, 0, 3) == 0;  // to the last position of the context
    GenerateOptions opts{.max_new_tokens = fill ? room : uniform_int(rng, 1, std::min(room, 40)),
                         .seed = static_cast<std::uint64_t>(rng())};
    const bool greedy = uniform_int(rng, 0, 2) == 0;
    if (!greedy) {
        opts.sampling.temperature = uniform_float(rng, 0.3f, 1.5f);
        if (uniform_int(rng, 0, 1) == 1) opts.sampling.top_k = uniform_int(rng, 1, V);
        if (uniform_int(rng, 0, 1) == 1) opts.sampling.top_p = uniform_float(rng, 0.5f, 1.0f);
    }
    c.shuffle(rng);
    CAPTURE(C::kName, prompt.size(), opts.max_new_tokens, opts.seed, opts.sampling.temperature, opts.sampling.top_k,
            opts.sampling.top_p);
    TreeVerifier verifier;
    Generation g;
    if (greedy) {
        GreedyMatch match;
        g = speculative_generate(w.target, c.proposer, c.builder, verifier, match, prompt, opts);
    } else if constexpr (requires { c.sampled_draws; }) {
        // A tree of draws needs MultiDraftSampling; a top-k tree's children are not draws: SampleAndMatch.
        if (c.builder.draw == DrawPolicy::kTopK)
            g = speculative_generate(w.target, c.proposer, c.builder, verifier, c.sampled_top_k, prompt, opts);
        else
            g = speculative_generate(w.target, c.proposer, c.builder, verifier, c.sampled_draws, prompt, opts);
    } else {
        g = speculative_generate(w.target, c.proposer, c.builder, verifier, c.sampled, prompt, opts);
    }
    REQUIRE(g.tokens.size() == static_cast<std::size_t>(opts.max_new_tokens));
    for (int t : g.tokens) REQUIRE((t >= 0 && t < V));

    // The committed text is the prompt and the output but the last token, which stays pending.
    std::vector<int> committed = prompt;
    committed.insert(committed.end(), g.tokens.begin(), g.tokens.end() - 1);
    check_cache(w, committed, rng);

    if (greedy) {
        const Generation plain = autoregressive_generate(w.target, prompt, opts);
        REQUIRE(g.tokens == plain.tokens);
        ++tally.greedy;
    }
    ++tally.generations;
    tally.filled += fill;
    tally.tokens += static_cast<long>(g.tokens.size());
}

int soak_steps() {
    const char* s = std::getenv("SPECDEC_SOAK_STEPS");
    return s != nullptr && std::atoi(s) > 0 ? std::atoi(s) : 320;
}

}  // namespace

TEST_CASE("soak: every composition, many random generations in a row, stays lossless and keeps its cache exact",
          "[soak][generate]") {
    const int steps = soak_steps();
    const bool verbose = std::getenv("SPECDEC_SOAK_STEPS") != nullptr;
    World w;
    Autoregressive ar(w);
    SdChain sd(w);
    TokenTree tree(w);
    CsDrafting cs(w);
    Glide glide(w);
    GlideCape cape(w);
    EddPct edd(w);
    Eagle2 eagle(w);
    constexpr int kCompositions = 8;
    Rng rng(20250101);
    Tally tally;
    const int warm_up = std::max(kCompositions * 4, steps / 10);
    [[maybe_unused]] long rss_warm = 0;  // unused under ASan
    for (int i = 0; i < steps; ++i) {
        switch (i % kCompositions) {  // round robin: each composition follows every other one on the same models
            case 0: generate_once(w, ar, rng, tally); break;
            case 1: generate_once(w, sd, rng, tally); break;
            case 2: generate_once(w, tree, rng, tally); break;
            case 3: generate_once(w, cs, rng, tally); break;
            case 4: generate_once(w, glide, rng, tally); break;
            case 5: generate_once(w, cape, rng, tally); break;
            case 6: generate_once(w, edd, rng, tally); break;
            case 7: generate_once(w, eagle, rng, tally); break;
        }
        if (i + 1 == warm_up) rss_warm = resident_bytes();
        if (verbose && ((i + 1) % std::max(1, steps / 20) == 0 || i + 1 == steps))
            std::fprintf(stderr, "soak: %d/%d generations, %ld tokens, %d greedy, %d filled the context, RSS %.1f MiB\n",
                         i + 1, steps, tally.tokens, tally.greedy, tally.filled, resident_bytes() / 1048576.0);
    }
    CHECK(tally.generations == steps);
    // The resident set after warm-up against the end: caches and scratch are sized by then, so anything
    // more is a leak or unbounded growth. Checked only when the run is long (a soak), and not under ASan,
    // whose quarantine holds freed memory on purpose.
#if !defined(__SANITIZE_ADDRESS__)
    if (verbose && steps >= 4 * warm_up) {
        const long rss_end = resident_bytes();
        CAPTURE(rss_warm, rss_end);
        CHECK(rss_end <= rss_warm + std::max(4L << 20, rss_warm / 20));
    }
#endif
}

}  // namespace test_soak
