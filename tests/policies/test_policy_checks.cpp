// The member-by-member checks agree with the concepts on every shipped policy and on minimal archetypes.
// What they say about a malformed policy is checked by compiling one (tests/policies/fail/, registered
// in CMakeLists.txt as ctest entries that look for the message).
#include <tuple>

#include "catch.hpp"
#include "examples/prompt_lookup.hpp"
#include "helpers.hpp"

namespace test_policy_checks {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

/// The smallest proposer of each kind, with exactly the members the concepts ask for.
struct ScoringArchetype {
    int vocab_size() const { return 4; }
    void start(std::span<const int>) {}
    void observe(const StepOutcome&) {}
    Rows propose(const Tree&, std::span<const int>) { return {}; }
};
struct DraftingArchetype {
    int vocab_size() const { return 4; }
    void start(std::span<const int>) {}
    void observe(const StepOutcome&) {}
    Draft draft(std::span<const int>, int, const StepContext&) { return {}; }
};
struct ModelArchetype {
    int vocab_size() const { return 4; }
    int cache_len() const { return 0; }
    int context_size() const { return 8; }
    Rows forward(const Tree&, int) { return {}; }
    void commit(std::span<const int>) {}
    void truncate(int) {}
    void reset() {}
};
struct AcceptorArchetype {
    AcceptResult accept(const Tree&, Rows, const StepContext&) { return {}; }
};

}  // namespace

TEST_CASE("the member checks pass on every shipped policy and on minimal archetypes", "[concepts][checks]") {
    STATIC_REQUIRE(check_language_model<CpuModel>());
    STATIC_REQUIRE(check_language_model<ModelArchetype>());
    STATIC_REQUIRE(check_proposer<ModelProposer<CpuModel>>());
    STATIC_REQUIRE(check_proposer<NoProposer>());
    STATIC_REQUIRE(check_proposer<ScoringArchetype>());
    STATIC_REQUIRE(check_proposer<DraftingArchetype>());
    STATIC_REQUIRE(check_proposer<test::Stepper>());
    STATIC_REQUIRE(check_proposer<example::PromptLookup>());
    STATIC_REQUIRE(check_tree_builder<Chain, ScoringArchetype>());
    STATIC_REQUIRE(check_tree_builder<Chain, DraftingArchetype>());
    STATIC_REQUIRE(check_tree_builder<KAryTree, ModelProposer<CpuModel>>());
    STATIC_REQUIRE(check_tree_builder<RootOnly, NoProposer>());
    STATIC_REQUIRE(check_verifier<TreeVerifier, CpuModel>());
    STATIC_REQUIRE(check_verifier<TreeVerifier, ModelArchetype>());
    STATIC_REQUIRE(check_acceptor<GreedyMatch>());
    STATIC_REQUIRE(check_acceptor<SampleAndMatch>());
    STATIC_REQUIRE(check_acceptor<MultiDraftSampling>());
    STATIC_REQUIRE(check_acceptor<SpeculativeSampling>());
    STATIC_REQUIRE(check_acceptor<AcceptorArchetype>());
    STATIC_REQUIRE(check_composition<CpuModel, ModelProposer<CpuModel>, Chain, TreeVerifier, SpeculativeSampling>());
    STATIC_REQUIRE(check_composition<ModelArchetype, DraftingArchetype, Chain, TreeVerifier, AcceptorArchetype>());
    // and the concepts hold exactly there
    STATIC_REQUIRE(LanguageModel<ModelArchetype>);
    STATIC_REQUIRE(ScoresNodes<ScoringArchetype>);
    STATIC_REQUIRE(DraftsTokens<DraftingArchetype>);
    STATIC_REQUIRE(Acceptor<AcceptorArchetype>);
}

TEST_CASE("the archetypes compose: the loop asks for nothing the checks do not name", "[concepts][checks]") {
    test::Stepper proposer{.vocab = 64, .per_call = 3};
    const Config cfg = test::tiny_config();
    CpuModel target(cfg, random_weights(cfg, 3, 0.4f));
    Chain builder{.gamma = 4};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const Generation g = speculative_generate(target, proposer, builder, verifier, acceptor, std::vector<int>{1, 2},
                                              GenerateOptions{.max_new_tokens = 10});
    CHECK(g.tokens == autoregressive_generate(target, std::vector<int>{1, 2}, GenerateOptions{.max_new_tokens = 10}).tokens);
}

namespace {

/// Drafts one token per call with whatever law it is given: malformed on purpose.
struct LawDrafter {
    int token = 1;
    std::vector<float> q;
    bool sampled = true;
    int vocab_size() const { return 4; }
    void start(std::span<const int>) {}
    void observe(const StepOutcome&) {}
    Draft draft(std::span<const int>, int, const StepContext&) const { return {{token, q, sampled}}; }
};

}  // namespace

TEST_CASE("a drafted token is refused by name when its law cannot be the one it was drawn from",
          "[proposer][errors]") {
    const Sampling s{.temperature = 1.0f};
    const std::vector<int> text{0};
    const StepContext ctx{s, StepRng{}, text, 1};
    Chain builder{.gamma = 1};
    const auto build = [&](LawDrafter p) { return builder.build(p, 0, ctx); };
    CHECK_NOTHROW(build({.token = 1, .q = {0.25f, 0.25f, 0.25f, 0.25f}}));
    CHECK_NOTHROW(build({.token = 1, .q = {}, .sampled = false}));  // deterministic: q = one-hot
    CHECK_THROWS_WITH(build({.token = 1, .q = {}}), Catch::Contains("marked sampled") && Catch::Contains("0 entries"));
    CHECK_THROWS_WITH(build({.token = 1, .q = {0.5f, 0.5f, 0.5f, 0.5f}}), Catch::Contains("summing to 2"));
    CHECK_THROWS_WITH(build({.token = 1, .q = {1.0f, 0.0f, 0.0f, 0.0f}}), Catch::Contains("q[token] = 0"));
    CHECK_THROWS_WITH(build({.token = 1, .q = {0.5f, 0.5f}}), Catch::Contains("law q of 2 entries"));
    CHECK_THROWS_WITH(build({.token = 7, .q = {}, .sampled = false}), Catch::Contains("token id 7"));
}

}  // namespace test_policy_checks
