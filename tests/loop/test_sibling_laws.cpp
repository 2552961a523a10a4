// Siblings and the law they were drawn from. Speculative sampling over siblings (MultiDraftSampling) is
// exact only for draws from the one q recorded on their parent: two candidates hung with laws of their
// own, or sampled siblings thinned by pruned() other than from the end, are refused by name (SampleAndMatch
// takes them, exactly); thinning that keeps the first draws stays exact. And a proposer drafting with the
// target object itself is refused before it touches the target's cache.
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_sibling_laws {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

constexpr int V = 6;

struct Models {
    Config cfg = test::tiny_config(true, V);
    Weights w = random_weights(cfg, 2024, 0.3f);  // spread-out laws
    CpuModel target{cfg, w};
    CpuModel draft{cfg, perturbed(cfg, w, 0.8f, 77)};
};

/// Two deterministic candidates under the root, each recorded by add_drafted with its own one-hot law (two
/// prompt-lookup continuations, say). With `last_law_only`, the tree a builder would make by recording only
/// the second law after hanging both: the lie MultiDraftSampling cannot see, kept as the control.
struct TwoCandidates {
    bool last_law_only = false;
    template <Proposer P>
    Tree build(P&, int root, const StepContext& ctx) {
        Tree t;
        t.add_root(root);
        if (ctx.room < 1) return t;
        const int a = (5 * root + 1) % V, b = (5 * root + 2) % V;
        if (!last_law_only) {
            for (const int c : {a, b}) add_drafted(t, 0, DraftToken{.token = c, .q = {}, .sampled = false}, ctx.sampling, V);
            return t;
        }
        t.add(a, 0, 0.0f, Draw::kSampledWithReplacement);
        t.add(b, 0, 1.0f, Draw::kSampledWithReplacement);
        std::vector<float> one_hot(V, 0.0f);
        one_hot[static_cast<std::size_t>(b)] = 1.0f;
        t.set_child_dist(0, one_hot);
        return t;
    }
};

/// Four siblings sampled from the drafter's q under the root, then thinned: `first_two` keeps the first two
/// draws (what drawing two would have given); otherwise a token drawn before is dropped (deduplication).
struct Thinned {
    DrawPolicy draw = DrawPolicy::kSampleWithReplacement;
    bool first_two = true;
    template <ScoresNodes P>
    Tree build(P& p, int root, const StepContext& ctx) {
        const Tree t = KAryTree{.k_config = {4}, .draw = draw}.build(p, root, ctx);
        std::vector<std::uint8_t> keep(static_cast<std::size_t>(t.size()), 1);
        for (int i = 1; i < t.size(); ++i)
            for (int j = 1; j < i; ++j)
                if (first_two ? i > 2 : keep[static_cast<std::size_t>(j)] && t[j].token == t[i].token) keep[static_cast<std::size_t>(i)] = 0;
        // No repeats to drop without replacement: drop the first draw (where the step has room for one).
        if (!first_two && draw == DrawPolicy::kSampleWithoutReplacement && t.size() > 1) keep[1] = 0;
        return pruned(t, keep);
    }
};

const std::vector<std::vector<int>> kPrompts{{1, 4, 2}, {3, 0, 5, 5}};
const Sampling kT1{.temperature = 1.0f};

}  // namespace

TEST_CASE("two candidates recorded with laws of their own are refused by MultiDraftSampling, exact under SampleAndMatch",
          "[sibling_laws][lossless][sampling]") {
    Models m;
    NoProposer none{V};
    TreeVerifier verifier;
    MultiDraftSampling multi;
    CHECK_THROWS_WITH(speculative_generate(m.target, none, TwoCandidates{}, verifier, multi, kPrompts[0],
                                           {.max_new_tokens = 8, .sampling = kT1}),
                      Catch::StartsWith("[specdec.acceptor] MultiDraftSampling needs children sampled") &&
                          Catch::Contains("recorded with more than one law q") && Catch::Contains("use SampleAndMatch"));

    const auto exact = [] { return check::Composition{NoProposer{V}, TwoCandidates{}, SampleAndMatch{}}; };
    const check::Report report = check::check_lossless(m.target, exact, kPrompts, kT1, 2000);
    INFO(report.to_string());
    CHECK(report.lossless());
    CHECK(report.powered());

    // What the refusal prevents: the same siblings with one recorded law pass MultiDraftSampling's check and
    // lose the target's law (the first candidate's q is 0, so it is accepted whenever the target allows it).
    const auto lying = [] { return check::Composition{NoProposer{V}, TwoCandidates{.last_law_only = true}, MultiDraftSampling{}}; };
    const check::Report lost = check::check_lossless(m.target, lying, kPrompts, kT1, 2000);
    INFO(lost.to_string());
    CHECK_FALSE(lost.lossless());
}

TEST_CASE("sampled siblings thinned to their first draws stay exact, thinned otherwise they lose their q",
          "[sibling_laws][lossless][sampling]") {
    Models m;
    for (const DrawPolicy draw : {DrawPolicy::kSampleWithReplacement, DrawPolicy::kSampleWithoutReplacement}) {
        CAPTURE(draw == DrawPolicy::kSampleWithReplacement);
        const auto first_two = [&] {
            return check::Composition{ModelProposer(m.draft), Thinned{.draw = draw, .first_two = true}, MultiDraftSampling{}};
        };
        const check::Report report = check::check_lossless(m.target, first_two, kPrompts, kT1, 2000);
        INFO(report.to_string());
        CHECK(report.lossless());
        CHECK(report.powered());

        ModelProposer proposer(m.draft);
        TreeVerifier verifier;
        MultiDraftSampling multi;
        CHECK_THROWS_WITH(speculative_generate(m.target, proposer, Thinned{.draw = draw, .first_two = false}, verifier,
                                               multi, kPrompts[0], {.max_new_tokens = 24, .sampling = kT1}),
                          Catch::StartsWith("[specdec.acceptor] MultiDraftSampling needs children sampled") &&
                              Catch::Contains("has no recorded q"));
        SampleAndMatch any;
        CHECK_NOTHROW(speculative_generate(m.target, proposer, Thinned{.draw = draw, .first_two = false}, verifier, any,
                                           kPrompts[0], {.max_new_tokens = 24, .sampling = kT1}));
    }
}

TEST_CASE("a proposer that drafts with the target object itself is refused, a second object of its weights drafts it",
          "[sibling_laws][errors]") {
    Models m;
    const std::vector<int>& prompt = kPrompts[1];
    const GenerateOptions opts{.max_new_tokens = 20};
    TreeVerifier verifier;
    GreedyMatch greedy;
    const std::string refused = "[specdec.generate] the proposer drafts with the target model object itself";
    ModelProposer self(m.target);
    CHECK_THROWS_WITH(speculative_generate(m.target, self, Chain{.gamma = 3}, verifier, greedy, prompt, opts),
                      Catch::StartsWith(refused) && Catch::Contains("a second model object"));
    const TextCodec letters{.decode =
                                [](std::span<const int> ids) {
                                    std::string s;
                                    for (const int id : ids) s += static_cast<char>('a' + id);
                                    return s;
                                },
                            .encode =
                                [](std::string_view text) {
                                    std::vector<int> ids;
                                    for (const char c : text) ids.push_back(c - 'a');
                                    return ids;
                                },
                            .special = [](int) { return false; }};
    TextBridgeProposer bridge(m.target, letters, letters, V, 3);
    CHECK_THROWS_WITH(speculative_generate(m.target, bridge, Chain{.gamma = 3}, verifier, greedy, prompt, opts),
                      Catch::StartsWith(refused));

    CpuModel twin(m.cfg, m.w);
    ModelProposer same_weights(twin);
    const Generation g = speculative_generate(m.target, same_weights, Chain{.gamma = 3}, verifier, greedy, prompt, opts);
    CHECK(g.tokens == autoregressive_generate(m.target, prompt, opts).tokens);
    CHECK(g.tau() > 3.5);  // every draft the target's own choice: 4 tokens a step but where the request ends
}

}  // namespace test_sibling_laws
