// The decoding loop: greedy speculative decoding equals plain greedy decoding for every composition
// that claims it; concepts ask for nothing more than the loop uses; bad input is named.
#include <tuple>

#include <limits>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_generate {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

struct Pair {  // a target and a drafter that is the target plus noise: acceptance strictly in (0, 1)
    Config cfg;
    CpuModel target, draft;
    Pair(std::uint64_t seed, float noise)
        : cfg(test::tiny_config()),
          target(cfg, random_weights(cfg, seed, 0.4f)),
          draft(cfg, perturbed(cfg, random_weights(cfg, seed, 0.4f), noise, seed + 100)) {}
};

// Each composition: a builder factory and an acceptor, all claiming greedy losslessness.
struct ChainGreedy {
    static Chain builder() { return {.gamma = 4}; }
    using Acc = GreedyMatch;
};
struct ChainSpecSampling {
    static Chain builder() { return {.gamma = 3}; }
    using Acc = SpeculativeSampling;
};
struct TopKTreeGreedy {
    static KAryTree builder() { return {.k_config = {3, 2, 1}, .draw = DrawPolicy::kTopK}; }
    using Acc = GreedyMatch;
};
struct TopKTreeSampleAndMatch {
    static KAryTree builder() { return {.k_config = {2, 2}, .draw = DrawPolicy::kTopK}; }
    using Acc = SampleAndMatch;
};
struct SampledTreeMultiDraft {
    static KAryTree builder() { return {.k_config = {4, 2, 2, 1}, .draw = DrawPolicy::kSampleWithoutReplacement}; }
    using Acc = MultiDraftSampling;
};
struct SampledTreeWithReplacement {
    static KAryTree builder() { return {.k_config = {3, 1}, .draw = DrawPolicy::kSampleWithReplacement}; }
    using Acc = MultiDraftSampling;
};
using GreedyCompositions = std::tuple<ChainGreedy, ChainSpecSampling, TopKTreeGreedy, TopKTreeSampleAndMatch,
                                      SampledTreeMultiDraft, SampledTreeWithReplacement>;

}  // namespace

TEMPLATE_LIST_TEST_CASE("greedy speculative output equals plain greedy decoding token for token", "[generate][lossless]",
                        GreedyCompositions) {
    const std::uint64_t seed = GENERATE(range(1, 9));
    Pair m(seed, 0.15f);
    const std::vector<int> prompt{static_cast<int>(seed % 60), 3, 17, 42};
    const GenerateOptions opts{.max_new_tokens = 40, .seed = seed};
    const Generation plain = autoregressive_generate(m.target, prompt, opts);
    ModelProposer proposer(m.draft);
    auto builder = TestType::builder();
    TreeVerifier verifier;
    typename TestType::Acc acceptor;
    const Generation spec = speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt, opts);
    REQUIRE(plain.tokens.size() == 40);
    CHECK(spec.tokens == plain.tokens);
    CHECK(spec.n_target_calls() < plain.n_target_calls());  // some drafts were accepted ...
    int rejected_somewhere = 0;
    for (const StepRecord& s : spec.steps) rejected_somewhere += s.n_accepted < s.depth;
    CHECK(rejected_somewhere > 0);  // ... and some were not: the check is not vacuous
    // The library's check (specdec::check::greedy_identity) agrees, on a composition made by a factory.
    const auto make = [&] { return check::Composition{ModelProposer(m.draft), TestType::builder(), typename TestType::Acc{}}; };
    const std::vector<check::GreedyResult> g = check::greedy_identity(m.target, make, {prompt}, 40, seed);
    REQUIRE(g.size() == 1);
    CHECK(g[0].identical() == (spec.tokens == plain.tokens));
    CHECK(g[0].n_target_calls == spec.n_target_calls());
}

TEST_CASE("with a Qwen2 or Qwen3 target and drafter, greedy speculative output is plain greedy output",
          "[generate][lossless][qwen]") {
    const test::Block block = GENERATE(test::Block::kQwen2, test::Block::kQwen3);
    const std::uint64_t seed = GENERATE(1u, 2u, 3u);
    const Config cfg = test::tiny_block_config(block);
    const Weights w = test::random_block_weights(cfg, seed, 0.4f);
    CpuModel target(cfg, w), draft(cfg, perturbed(cfg, w, 0.15f, seed + 100));  // matrices and biases perturbed
    const std::vector<int> prompt{static_cast<int>(seed % 60), 3, 17, 42};
    const GenerateOptions opts{.max_new_tokens = 40, .seed = seed};
    const Generation plain = autoregressive_generate(target, prompt, opts);
    ModelProposer proposer(draft);
    KAryTree builder{.k_config = {3, 2, 1}, .draw = DrawPolicy::kTopK};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const Generation spec = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
    REQUIRE(plain.tokens.size() == 40);
    CHECK(spec.tokens == plain.tokens);
    CHECK(spec.n_target_calls() < plain.n_target_calls());  // drafts were accepted ...
    int rejected_somewhere = 0;
    for (const StepRecord& s : spec.steps) rejected_somewhere += s.n_accepted < s.depth;
    CHECK(rejected_somewhere > 0);  // ... and rejected: the comparison is not vacuous
}

TEST_CASE("policies written in the call (temporaries) decode as named ones do", "[generate]") {
    Pair m(3, 0.15f);
    const std::vector<int> prompt{5, 3, 17, 42};
    const GenerateOptions opts{.max_new_tokens = 24, .sampling = {.temperature = 1.0f}, .seed = 9};
    ModelProposer proposer(m.draft);
    Chain builder{.gamma = 4};
    TreeVerifier verifier;
    SpeculativeSampling acceptor;
    const Generation named = speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt, opts);
    const Generation all = speculative_generate(m.target, ModelProposer(m.draft), Chain{.gamma = 4}, TreeVerifier{},
                                                SpeculativeSampling{}, prompt, opts);
    const Generation mixed = speculative_generate(m.target, proposer, Chain{.gamma = 4}, verifier, SpeculativeSampling{}, prompt, opts);
    CHECK(all.tokens == named.tokens);
    CHECK(mixed.tokens == named.tokens);
    CHECK(all.n_target_calls() == named.n_target_calls());
}

TEST_CASE("the output is cut at max_new_tokens and at the EOS token", "[generate]") {
    Pair m(5, 0.1f);
    const std::vector<int> prompt{1, 2};
    ModelProposer proposer(m.draft);
    Chain builder{.gamma = 6};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    for (int n : {0, 1, 7, 13}) {
        const Generation g = speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt,
                                                  GenerateOptions{.max_new_tokens = n});
        CHECK(g.tokens.size() == static_cast<std::size_t>(n));
        CHECK(m.target.cache_len() <= static_cast<int>(prompt.size()) + n);
    }
    const Generation full = autoregressive_generate(m.target, prompt, GenerateOptions{.max_new_tokens = 20});
    const int eos = full.tokens[9];
    const auto first = std::find(full.tokens.begin(), full.tokens.end(), eos) - full.tokens.begin();
    const Generation cut = speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt,
                                                GenerateOptions{.max_new_tokens = 20, .eos_token = eos});
    CHECK(cut.tokens.size() == static_cast<std::size_t>(first + 1));
    CHECK(cut.tokens.back() == eos);
}

TEST_CASE("per-step records add up to the output", "[generate][metrics]") {
    Pair m(3, 0.1f);
    const std::vector<int> prompt{9, 8, 7};
    ModelProposer proposer(m.draft);
    Chain builder{.gamma = 3};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const Generation g = speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt,
                                              GenerateOptions{.max_new_tokens = 30});
    int emitted = 0;
    for (const StepRecord& s : g.steps) {
        CHECK(s.n_drafted == std::min(3, 30 - emitted - 1));  // the last steps draft only what can be emitted
        emitted += s.n_emitted;
        CHECK(s.n_accepted <= s.depth);
        CHECK(s.t_verify >= 0.0);
    }
    CHECK(emitted == 30);
    CHECK_THAT(g.tau(), Catch::WithinRel(30.0 / g.steps.size(), 1e-12));
    const auto per_pos = g.accepted_at_depth();
    REQUIRE(per_pos.size() == 3);
    CHECK(per_pos[0] >= per_pos[1]);
    CHECK(per_pos[1] >= per_pos[2]);
}

TEST_CASE("on_step sees exactly the generated tokens, in order, each with its tree depth", "[generate]") {
    Pair m(7, 0.15f);
    const std::vector<int> prompt{4, 5, 6};
    ModelProposer proposer(m.draft);
    Chain builder{.gamma = 4};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const int n = GENERATE(1, 9, 37);  // cut inside a step's accepted drafts, and not
    std::vector<int> seen, depths;
    int steps = 0;
    GenerateOptions opts{.max_new_tokens = n};
    opts.on_step = [&](std::span<const int> tokens, std::span<const int> d) {
        REQUIRE(d.size() == tokens.size());
        seen.insert(seen.end(), tokens.begin(), tokens.end());
        depths.insert(depths.end(), d.begin(), d.end());
        ++steps;
    };
    const Generation g = speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt, opts);
    CHECK(seen == g.tokens);
    CHECK(steps == static_cast<int>(g.steps.size()));
    CHECK(depths == g.token_depth);
    int accepted = 0;
    for (int d : depths) accepted += d > 0;
    if (n > 1) CHECK(accepted > 0);  // drafts were accepted (n = 1 leaves no room for one): not vacuous
    CHECK(autoregressive_generate(m.target, prompt, GenerateOptions{.max_new_tokens = n}).tokens == seen);
}

TEST_CASE("on_step names the target's own token first where a step's root was drawn from a deferred law", "[generate]") {
    // Target-initialised MCSD defers its bonus: the next step's roots are drawn from that law, so a step
    // emits the target's token first and the accepted drafts after it.
    Pair m(7, 0.15f);
    const std::vector<int> prompt{3, 16, 29, 42, 55, 4, 17, 30, 43, 56};
    ModelProposer proposer(m.draft);
    TargetInitialisedTree builder{.n_seeds = 2, .k_config = {2, 1, 1}};
    TreeVerifier verifier;
    LossyTargetInitialisedSampling acceptor{.allow_lossy = true};
    std::vector<int> depths;
    GenerateOptions opts{.max_new_tokens = 30};
    opts.on_step = [&](std::span<const int>, std::span<const int> d) { depths.insert(depths.end(), d.begin(), d.end()); };
    const Generation g = speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt, opts);
    CHECK(depths == g.token_depth);
    int led_by_target = 0;  // steps whose first token is the target's and which accepted drafts after it
    std::size_t at = 0;
    for (const StepRecord& r : g.steps) {
        if (r.n_emitted > 1 && g.token_depth[at] == 0 && g.token_depth[at + 1] > 0) ++led_by_target;
        at += static_cast<std::size_t>(r.n_emitted);
    }
    CHECK(led_by_target > 0);  // the case the old count (the first n_accepted tokens) got wrong occurred
}

// ---- concepts: archetypes that model exactly what the concept asks ------------------------------------

namespace {

/// The smallest LanguageModel: it predicts (last token + 1) mod V and has no real cache.
struct CountingModel {
    int len = 0;
    std::vector<float> out;
    int vocab_size() const { return 5; }
    int cache_len() const { return len; }
    int context_size() const { return 100; }
    Rows forward(const Tree& t, int first) {
        out.assign(static_cast<std::size_t>(t.size() - first) * 5, 0.0f);
        for (int i = first; i < t.size(); ++i) out[(i - first) * 5 + (t[i].token + 1) % 5] = 1.0f;
        return Rows{out, 5};
    }
    void commit(std::span<const int> path) { len += static_cast<int>(path.size()); }
    void truncate(int n) { len = n; }
    void reset() { len = 0; }
};

/// The smallest Proposer: always proposes token (node's token + 1) mod V, i.e. it is always right.
struct CountingProposer {
    std::vector<float> out;
    int vocab_size() const { return 5; }
    void start(std::span<const int>) {}
    Rows propose(const Tree& t, std::span<const int> nodes) {
        out.assign(nodes.size() * 5, 0.0f);
        for (std::size_t j = 0; j < nodes.size(); ++j) out[j * 5 + (t[nodes[j]].token + 1) % 5] = 1.0f;
        return Rows{out, 5};
    }
    void observe(const StepOutcome&) {}
};

struct NotAModel {
    int vocab_size() const { return 1; }
};

}  // namespace

TEST_CASE("the loop needs nothing beyond the concepts", "[concepts]") {
    STATIC_REQUIRE(LanguageModel<CountingModel>);
    STATIC_REQUIRE(Proposer<CountingProposer>);
    STATIC_REQUIRE(LanguageModel<CpuModel>);
    STATIC_REQUIRE(ExposesKV<CpuModel>);
    STATIC_REQUIRE(ExposesHidden<CpuModel>);
    STATIC_REQUIRE_FALSE(LanguageModel<NotAModel>);
    STATIC_REQUIRE_FALSE(ExposesKV<CountingModel>);
    STATIC_REQUIRE_FALSE(Proposer<CountingModel>);
    STATIC_REQUIRE_FALSE(Acceptor<CountingModel>);
    STATIC_REQUIRE_FALSE(TreeBuilder<GreedyMatch, CountingProposer>);
    STATIC_REQUIRE_FALSE(Verifier<GreedyMatch, CpuModel>);

    CountingModel target;
    CountingProposer proposer;
    Chain builder{.gamma = 3};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const std::vector<int> prompt{2};
    const Generation g = speculative_generate(target, proposer, builder, verifier, acceptor, prompt,
                                              GenerateOptions{.max_new_tokens = 8});
    CHECK(g.tokens == std::vector<int>{3, 4, 0, 1, 2, 3, 4, 0});
    CHECK(g.n_target_calls() == 2);  // a perfect drafter: gamma + 1 tokens per forward
}

// ---- bad input ----------------------------------------------------------------------------------------

TEST_CASE("bad generation input is a specdec::error naming the value", "[generate][errors]") {
    Pair m(2, 0.1f);
    ModelProposer proposer(m.draft);
    Chain builder{.gamma = 2};
    TreeVerifier verifier;
    GreedyMatch greedy;
    const std::vector<int> prompt{1, 2, 3};
    const auto run = [&](auto& acceptor, std::span<const int> p, GenerateOptions o) {
        return speculative_generate(m.target, proposer, builder, verifier, acceptor, p, o);
    };
    SECTION("a prompt token outside the vocabulary") {
        const std::vector<int> bad{1, 64};
        CHECK_THROWS_AS(run(greedy, bad, {}), specdec::error);
        CHECK_THROWS_WITH(run(greedy, bad, {}), Catch::Contains("prompt token 1 has id 64"));
    }
    SECTION("an empty prompt") {
        CHECK_THROWS_WITH(run(greedy, std::vector<int>{}, {}), Catch::Contains("prompt is empty"));
    }
    SECTION("logits that hold NaN name the step and the node, greedy and sampled") {
        const Config cfg = test::tiny_config();
        Weights w = random_weights(cfg, 3, 0.3f);
        w.layers[1].w_down[5] = std::numeric_limits<float>::quiet_NaN();  // as a corrupted file would hold it
        CpuModel broken(cfg, w);
        CHECK_THROWS_WITH(autoregressive_generate(broken, prompt, {.max_new_tokens = 4}),
                          Catch::Contains("[specdec.generate] step 0: the target's logits for tree node 0 (token 3) hold NaN"));
        CHECK_THROWS_WITH(autoregressive_generate(broken, prompt, {.max_new_tokens = 4, .sampling = {.temperature = 1.0f}}),
                          Catch::Contains("step 0: the target's logits for tree node 0") && Catch::Contains("NaN"));
        w.layers[1].w_down[5] = std::numeric_limits<float>::infinity();
        CpuModel overflowing(cfg, w);
        CHECK_THROWS_WITH(autoregressive_generate(overflowing, prompt, {.max_new_tokens = 4}), Catch::Contains("hold"));
    }
    SECTION("a prompt longer than the context") {
        const std::vector<int> long_prompt(120, 1);
        CHECK_THROWS_WITH(run(greedy, long_prompt, {.max_new_tokens = 10}),
                          Catch::Contains("prompt of 120 tokens + max_new_tokens 10") && Catch::Contains("128"));
    }
    SECTION("a tree wider than the target's max_tree_nodes, refused at the first step") {
        // A short text would hold the 273 nodes beside it; the refusal does not wait for a long one.
        CpuModel narrow(m.cfg, random_weights(m.cfg, 2, 0.4f), ModelOptions{.max_tree_nodes = 64});
        KAryTree wide{.k_config = {16, 16}};
        CHECK_THROWS_WITH(speculative_generate(narrow, proposer, wide, verifier, greedy, prompt, {.max_new_tokens = 8}),
                          Catch::Contains("[specdec.generate] the tree builder built a tree of 273 nodes") &&
                              Catch::Contains("max_tree_nodes = 64"));
    }
    SECTION("mismatched target and drafter vocabularies") {
        const Config small = test::tiny_config(true, 50);
        CpuModel other(small, random_weights(small, 1));
        ModelProposer wrong(other);
        CHECK_THROWS_WITH(speculative_generate(m.target, wrong, builder, verifier, greedy, prompt, {}),
                          Catch::Contains("64 tokens") && Catch::Contains("50"));
    }
    SECTION("invalid sampling parameters") {
        SampleAndMatch any;
        CHECK_THROWS_WITH(run(any, prompt, {.sampling = {.temperature = 1, .top_p = 2}}), Catch::Contains("top_p"));
    }
    SECTION("an acceptor used outside its precondition names itself, what it needs and what to use") {
        const GenerateOptions t1{.sampling = {.temperature = 1}};
        CHECK_THROWS_WITH(run(greedy, prompt, {.sampling = {.temperature = 0.8f}}),
                          Catch::StartsWith("[specdec.acceptor] GreedyMatch needs greedy decoding (temperature 0)") &&
                              Catch::Contains("got temperature 0.8") && Catch::Contains("use SampleAndMatch"));
        KAryTree topk{.k_config = {2, 2}, .draw = DrawPolicy::kTopK};
        MultiDraftSampling multi;
        CHECK_THROWS_WITH(speculative_generate(m.target, proposer, topk, verifier, multi, prompt, t1),
                          Catch::StartsWith("[specdec.acceptor] MultiDraftSampling needs children sampled from their "
                                            "parent's recorded draft distribution q") &&
                              Catch::Contains("node 1 (child of node 0) was drawn by top-k") &&
                              Catch::Contains("use SampleAndMatch"));
        // A tree of sampled siblings: SpeculativeSampling names itself and points to MultiDraftSampling.
        KAryTree tree{.k_config = {2}, .draw = DrawPolicy::kSampleWithReplacement};
        SpeculativeSampling chain_only;
        CHECK_THROWS_WITH(speculative_generate(m.target, proposer, tree, verifier, chain_only, prompt, t1),
                          Catch::StartsWith("[specdec.acceptor] SpeculativeSampling needs a chain (at most one child per "
                                            "node), but node 0 has 2 children, sampled with replacement") &&
                              Catch::Contains("use MultiDraftSampling"));
        // A top-k chain with siblings (CAPE): SpeculativeSampling, and SampleAndMatch is what takes it.
        ExpandedChain cape{.gamma = 3};
        CHECK_THROWS_WITH(speculative_generate(m.target, proposer, cape, verifier, chain_only, prompt, t1),
                          Catch::StartsWith("[specdec.acceptor] SpeculativeSampling needs a chain") &&
                              Catch::Contains("children, drawn by top-k") && Catch::Contains("use SampleAndMatch") &&
                              !Catch::Contains("MultiDraftSampling needs"));
        // A chain of top-k drafts at T > 0: the message names SpeculativeSampling, not the walk it shares.
        KAryTree topk_chain{.k_config = {1, 1}, .draw = DrawPolicy::kTopK};
        CHECK_THROWS_WITH(speculative_generate(m.target, proposer, topk_chain, verifier, chain_only, prompt, t1),
                          Catch::StartsWith("[specdec.acceptor] SpeculativeSampling needs children sampled from their "
                                            "parent's recorded draft distribution q") &&
                              Catch::Contains("node 1 (child of node 0) was drawn by top-k") &&
                              Catch::Contains("use SampleAndMatch"));
        // A forest: every acceptor names itself.
        const Tree forest = Tree::from_nodes(std::vector<Node>{{.token = 3}, {.token = 4}});
        const std::vector<float> logits(2 * 64, 0.0f);
        const StepContext ctx{t1.sampling, StepRng{}, prompt, 3};
        CHECK_THROWS_WITH(SampleAndMatch{}.accept(forest, Rows{logits, 64}, ctx),
                          Catch::StartsWith("[specdec.acceptor] SampleAndMatch needs a tree with exactly one root at node "
                                            "0 (the pending token), got 2 roots"));
        CHECK_THROWS_WITH(SpeculativeSampling{}.accept(forest, Rows{logits, 64}, ctx),
                          Catch::StartsWith("[specdec.acceptor] SpeculativeSampling needs a tree with exactly one root"));
    }
    SECTION("an invalid k-config") {
        KAryTree bad{.k_config = {2, 0}};
        CHECK_THROWS_WITH(speculative_generate(m.target, proposer, bad, verifier, greedy, prompt, {}),
                          Catch::Contains("k_config[1] = 0"));
    }
}

}  // namespace test_generate
