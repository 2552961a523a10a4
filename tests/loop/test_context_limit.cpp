// The room left: every shipped composition generates to exactly the context limit (prompt +
// max_new_tokens = the target's context), greedy equal to plain greedy and at T = 1 without error,
// because the loop bounds every draft by what the contexts and max_new_tokens leave (StepContext::room).
// A drafter whose context cannot hold the request is refused up front, naming it. New methods' compositions
// join the list below as they land.
#include <string>
#include <tuple>

#include "catch.hpp"
#include "helpers.hpp"
#include "world.hpp"

namespace test_context_limit {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

/// The shared models (world.hpp), drawn from seeds 11..14.
struct World : test::World {
    World() : test::World(11) {}
};

// Each composition: its proposer (and the levels it is made of), its builder, and the acceptor that keeps
// it lossless at T = 1. Greedy runs use GreedyMatch, lossless for any tree.

struct Autoregressive {
    static constexpr const char* kName = "autoregressive";
    NoProposer proposer;
    RootOnly builder;
    using Sampled = SampleAndMatch;
    explicit Autoregressive(World& w) : proposer{w.target.vocab_size()} {}
};
struct SdChain {
    static constexpr const char* kName = "SD chain";
    ModelProposer<CpuModel> proposer;
    Chain builder{.gamma = 4};
    using Sampled = SpeculativeSampling;
    explicit SdChain(World& w) : proposer(w.small) {}
};
struct TopKTree {
    static constexpr const char* kName = "top-k tree";
    ModelProposer<CpuModel> proposer;
    KAryTree builder{.k_config = {3, 2, 1}, .draw = DrawPolicy::kTopK};
    using Sampled = SampleAndMatch;
    explicit TopKTree(World& w) : proposer(w.mid) {}
};
struct SampledTree {
    static constexpr const char* kName = "sampled tree without replacement (MCSD)";
    ModelProposer<CpuModel> proposer;
    KAryTree builder{.k_config = {4, 2, 2, 1}, .draw = DrawPolicy::kSampleWithoutReplacement};
    using Sampled = MultiDraftSampling;
    explicit SampledTree(World& w) : proposer(w.mid) {}
};
struct SampledTreeWithReplacement {
    static constexpr const char* kName = "sampled tree with replacement (SpecInfer)";
    ModelProposer<CpuModel> proposer;
    KAryTree builder{.k_config = {3, 2}, .draw = DrawPolicy::kSampleWithReplacement};
    using Sampled = MultiDraftSampling;
    explicit SampledTreeWithReplacement(World& w) : proposer(w.small) {}
};
struct MaxGramChain {
    static constexpr const char* kName = "Max-Gram";
    MaxGram proposer;
    Chain builder{.gamma = 6};
    using Sampled = SpeculativeSampling;
    explicit MaxGramChain(World& w) : proposer(w.bigram) {}
};
struct CsVertical {  // the failing case: Review(small, MaG, budget 3) + Chain{4}
    static constexpr const char* kName = "CS vertical: Review(small, Max-Gram)";
    MaxGram mag;
    Review<CpuModel, MaxGram> proposer;
    Chain builder{.gamma = 4};
    using Sampled = SpeculativeSampling;
    explicit CsVertical(World& w) : mag(w.bigram), proposer(w.small, mag, {.budget = 3}) {}
};
struct CsTwoLevel {  // CS(small, MaG), K [[4,0],[0,3]]
    static constexpr const char* kName = "CS(small, Max-Gram)";
    MaxGram mag;
    Review<CpuModel, MaxGram> level;
    Horizontal<Review<CpuModel, MaxGram>, MaxGram> proposer;
    Chain builder{.gamma = 4};
    using Sampled = SpeculativeSampling;
    explicit CsTwoLevel(World& w) : mag(w.bigram), level(w.small, mag, {.budget = 3}), proposer({4, 0}, level, mag) {}
};
struct CsThreeLevel : test::CsThreeLevels {  // CS(mid, small, MaG), K [[2,2,0],[0,1,0],[0,0,3]], lenience 3 (example 06)
    static constexpr const char* kName = "CS(mid, small, Max-Gram)";
    Chain builder{.gamma = 4};
    using Sampled = SpeculativeSampling;
    explicit CsThreeLevel(World& w) : CsThreeLevels(w) {}
};
struct CsTree {  // CS + tree: 8 children of each lead node, K [[1,3],[0,1]]
    static constexpr const char* kName = "CS + tree";
    MaxGram mag;
    Review<CpuModel, MaxGram> level;
    Horizontal<Review<CpuModel, MaxGram>, MaxGram> proposer;
    ExpandedChain builder{.gamma = 4, .sizes = ExpansionSizes::fixed(7), .max_drafts = 32};
    using Sampled = SampleAndMatch;
    explicit CsTree(World& w) : mag(w.bigram), level(w.mid, mag, {.budget = 1}), proposer({1, 3}, level, mag) {}
};
struct GlideChain {
    static constexpr const char* kName = "GLIDE chain";
    ModelProposer<GlideModel<CpuModel>> proposer;
    Chain builder{.gamma = 4};
    using Sampled = SpeculativeSampling;
    explicit GlideChain(World& w) : proposer(w.glide) {}
};
struct Cape {
    static constexpr const char* kName = "CAPE";
    ModelProposer<CpuModel> proposer;
    ExpandedChain builder{.gamma = 5};
    using Sampled = SampleAndMatch;
    explicit Cape(World& w) : proposer(w.mid) {}
};
struct FixedExpansion {
    static constexpr const char* kName = "fixed expansion";
    ModelProposer<CpuModel> proposer;
    ExpandedChain builder{.gamma = 5, .sizes = ExpansionSizes::fixed(3)};
    using Sampled = SampleAndMatch;
    explicit FixedExpansion(World& w) : proposer(w.mid) {}
};

struct Pct {  // EDD's pruned candidate tree over a plain drafter
    static constexpr const char* kName = "PCT";
    ModelProposer<CpuModel> proposer;
    PrunedCandidateTree builder{.expand_threshold = 0.05f};
    using Sampled = SampleAndMatch;
    explicit Pct(World& w) : proposer(w.mid) {}
};
struct Eagle2 {
    static constexpr const char* kName = "EAGLE-2 tree";
    ModelProposer<CpuModel> proposer;
    Eagle2Tree builder{.total_tokens = 12, .depth = 4, .top_k = 3};
    using Sampled = SampleAndMatch;
    explicit Eagle2(World& w) : proposer(w.mid) {}
};
struct EddPct {  // EDD's drafter on the target's states + PCT
    static constexpr const char* kName = "EDD + PCT";
    CpuModel drafter;
    EddProposer<CpuModel> proposer;
    PrunedCandidateTree builder{.expand_threshold = 0.05f};
    using Sampled = SampleAndMatch;
    explicit EddPct(World& w)
        : drafter(edd_drafter_config(w.cfg), train::edd_initial_weights(edd_drafter_config(w.cfg), w.w, 15, 0.4f)),
          proposer(w.target, drafter, edd_hidden_layer(w.cfg)) {}
};

using Compositions = std::tuple<Autoregressive, SdChain, TopKTree, SampledTree, SampledTreeWithReplacement, MaxGramChain,
                                CsVertical, CsTwoLevel, CsThreeLevel, CsTree, GlideChain, Cape, FixedExpansion, Pct, Eagle2,
                                EddPct>;

/// Prompts of several lengths, up to the whole context but one token; some repeat themselves.
std::vector<std::vector<int>> prompts(int context, int vocab) {
    std::vector<std::vector<int>> out;
    for (int len : {1, 9, 25, 64, 100, context - 5, context - 1}) {
        std::vector<int> p(len);
        for (int i = 0; i < len; ++i) p[i] = (len % 2 == 0) ? (7 * i + len) % vocab : (i % 5) * 11 % vocab;
        out.push_back(std::move(p));
    }
    return out;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("every shipped composition generates to exactly the context limit", "[generate][context]",
                        Compositions) {
    World w;
    TestType c(w);
    CAPTURE(TestType::kName);
    const int context = w.target.context_size();
    TreeVerifier verifier;
    for (const std::vector<int>& prompt : prompts(context, w.cfg.vocab_size)) {
        const int n = context - static_cast<int>(prompt.size());
        CAPTURE(prompt.size(), n);
        const GenerateOptions greedy{.max_new_tokens = n, .seed = 1};
        const Generation plain = autoregressive_generate(w.target, prompt, greedy);
        GreedyMatch match;
        const Generation g = speculative_generate(w.target, c.proposer, c.builder, verifier, match, prompt, greedy);
        CHECK(g.tokens == plain.tokens);
        typename TestType::Sampled acceptor;
        const GenerateOptions sampled{.max_new_tokens = n, .sampling = {.temperature = 1.0f}, .seed = prompt.size()};
        const Generation s = speculative_generate(w.target, c.proposer, c.builder, verifier, acceptor, prompt, sampled);
        CHECK(s.tokens.size() == static_cast<std::size_t>(n));
        CHECK(w.target.cache_len() <= context);
    }
}

TEST_CASE("no draft reaches past the room left: max_new_tokens - 1 after the root", "[generate][context]") {
    World w;
    ModelProposer proposer(w.small);
    Chain builder{.gamma = 6};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const std::vector<int> prompt{1, 2, 3};
    const Generation g = speculative_generate(w.target, proposer, builder, verifier, acceptor, prompt,
                                              GenerateOptions{.max_new_tokens = 20});
    int emitted = 0;
    for (const StepRecord& s : g.steps) {
        CHECK(s.depth == std::min(6, 20 - emitted - 1));
        emitted += s.n_emitted;
    }
    CHECK(emitted == 20);
}

TEST_CASE("a drafter whose context cannot hold the request is refused up front, naming it", "[generate][context][errors]") {
    World w;
    // The small drafter with a context of 64 positions (the target's is 128).
    Config short_cfg = w.cfg;
    short_cfg.max_position_embeddings = 64;
    CpuModel short_drafter(short_cfg, perturbed(w.cfg, w.w, 0.35f, 13));
    const std::vector<int> prompt(10, 7);
    TreeVerifier verifier;
    GreedyMatch acceptor;
    Chain builder{.gamma = 4};
    SECTION("a plain drafter") {
        ModelProposer proposer(short_drafter);
        CHECK_THROWS_WITH(speculative_generate(w.target, proposer, builder, verifier, acceptor, prompt,
                                               GenerateOptions{.max_new_tokens = 100}),
                          Catch::StartsWith("[specdec.generate] the drafter (the model of a ModelProposer) holds 64 "
                                            "positions, the target 128, and this request needs 110 (prompt of 10 tokens + "
                                            "max_new_tokens 100)") &&
                              Catch::Contains("lower max_new_tokens to 54"));
        // What fits the drafter runs, to the drafter's last position.
        const Generation g = speculative_generate(w.target, proposer, builder, verifier, acceptor, prompt,
                                                  GenerateOptions{.max_new_tokens = 54});
        CHECK(g.tokens == autoregressive_generate(w.target, prompt, GenerateOptions{.max_new_tokens = 54}).tokens);
    }
    SECTION("a reviewer one level down in a cascade") {
        MaxGram mag(w.bigram);
        Review small_level(short_drafter, mag, {.budget = 3});
        Review mid_level(w.mid, small_level, {.budget = 2});
        CHECK_THROWS_WITH(speculative_generate(w.target, mid_level, builder, verifier, acceptor, prompt,
                                               GenerateOptions{.max_new_tokens = 100}),
                          Catch::StartsWith("[specdec.generate] the drafter (the reviewer of a Review at depth 1") &&
                              Catch::Contains("holds 64 positions, the target 128, and this request needs 110"));
    }
    SECTION("a prompt longer than the drafter's context") {
        ModelProposer proposer(short_drafter);
        const std::vector<int> long_prompt(70, 7);
        CHECK_THROWS_WITH(speculative_generate(w.target, proposer, builder, verifier, acceptor, long_prompt,
                                               GenerateOptions{.max_new_tokens = 1}),
                          Catch::Contains("needs 71") && Catch::Contains("shorten the prompt"));
    }
}

}  // namespace test_context_limit
