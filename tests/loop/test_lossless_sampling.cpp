// Losslessness under sampling: over many fixed seeds, the first two generated tokens of each
// lossless composition follow the target's own distribution (chi-square at p = 0.001); a deliberately
// lossy acceptor fails the same check, so the check has teeth. Seeds are fixed: the test cannot flake.
#include <map>
#include <utility>

#include "catch.hpp"
#include "helpers.hpp"

using namespace specdec;

namespace {

constexpr int kVocab = 6;
constexpr int kRuns = 2000;  // enough: the lossy acceptor below scores ~54000 against a bound of ~45

struct Models {
    Config cfg = test::tiny_config(true, kVocab);
    // std 0.3 weights give spread-out next-token distributions over 6 tokens (p ~ .67/.13/.12/...),
    // and a drafter far enough from them that acceptance is partial.
    Weights w = random_weights(cfg, 2024, 0.3f);
    CpuModel target{cfg, w};
    CpuModel draft{cfg, perturbed(cfg, w, 0.8f, 77)};
};

/// Accepts every draft of a chain without looking at the target: lossy on purpose.
struct AcceptEverything {
    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        AcceptResult r{{0}, 0};
        for (int node = 0;;) {
            const auto kids = tree.children(node);
            if (kids.empty()) break;
            r.path.push_back(node = kids[0]);
        }
        std::vector<float> p(logits.cols);
        processed_probs(logits.row(r.path.back()), ctx.sampling, p);
        r.bonus = sample_index(p, ctx.rng.uniform(0));
        return r;
    }
};

test::Stepper g_stepper{.vocab = kVocab, .per_call = 2};

/// The drafter of most compositions: the perturbed model, scoring the builder's nodes.
struct PlainDrafter {
    ModelProposer<CpuModel> operator()(Models& m) const { return ModelProposer(m.draft); }
};

template <class Builder, class Acc, class MakeProposer = PlainDrafter>
test::ChiSquare check_composition(Builder builder, Acc acceptor, const Sampling& s, MakeProposer make = {}) {
    Models m;
    const std::vector<int> prompt{1, 4, 2};
    const auto expected = test::exact_two_tokens(m.target, prompt, s);
    auto proposer = make(m);
    const auto observed = test::sampled_two_tokens(m.target, proposer, builder, acceptor, prompt, s, kRuns);
    const test::ChiSquare r = test::chi_square(observed, expected, kRuns);
    REQUIRE(r.dof >= 8);  // enough populated cells that the test means something
    return r;
}

}  // namespace

TEST_CASE("sampled output follows the target's distribution for every lossless acceptor", "[lossless][sampling][slow]") {
    const Sampling s = GENERATE(Sampling{.temperature = 1.0f}, Sampling{.temperature = 1.5f, .top_k = 5, .top_p = 0.95f});
    CAPTURE(s.temperature, s.top_k, s.top_p);
    SECTION("chain + SpeculativeSampling") {
        const auto r = check_composition(Chain{.gamma = 3}, SpeculativeSampling{}, s);
        CAPTURE(r.statistic, r.dof);
        CHECK(r.statistic < test::chi_square_critical(r.dof));
    }
    SECTION("sampled tree with replacement + MultiDraftSampling (SpecInfer)") {
        const auto r = check_composition(KAryTree{{3, 2}, DrawPolicy::kSampleWithReplacement}, MultiDraftSampling{}, s);
        CAPTURE(r.statistic, r.dof);
        CHECK(r.statistic < test::chi_square_critical(r.dof));
    }
    SECTION("sampled tree without replacement + MultiDraftSampling (MCSD)") {
        const auto r = check_composition(KAryTree{{3, 2}, DrawPolicy::kSampleWithoutReplacement}, MultiDraftSampling{}, s);
        CAPTURE(r.statistic, r.dof);
        CHECK(r.statistic < test::chi_square_critical(r.dof));
    }
    SECTION("top-k tree + SampleAndMatch") {
        const auto r = check_composition(KAryTree{{2, 2}, DrawPolicy::kTopK}, SampleAndMatch{}, s);
        CAPTURE(r.statistic, r.dof);
        CHECK(r.statistic < test::chi_square_critical(r.dof));
    }
    SECTION("CAPE tree (greedy chain + confidence-sized leaves) + SampleAndMatch") {
        const auto r = check_composition(ExpandedChain{.gamma = 3, .sizes = {{0.5f, 1.0f}, {3, 1}}}, SampleAndMatch{}, s);
        CAPTURE(r.statistic, r.dof);
        CHECK(r.statistic < test::chi_square_critical(r.dof));
    }
    SECTION("PCT tree (top-k children, pruned by path confidence) + SampleAndMatch") {
        // PCT's children are the drafter's top-k, not draws: SampleAndMatch is the acceptor that stays exact.
        const auto r = check_composition(
            PrunedCandidateTree{.expand_threshold = 0.2f, .leaf_threshold = 0.05f, .width = 3, .max_depth = 3},
            SampleAndMatch{}, s);
        CAPTURE(r.statistic, r.dof);
        CHECK(r.statistic < test::chi_square_critical(r.dof));
    }
    SECTION("EAGLE-2 tree (top-k expansion, global top-N rerank) + SampleAndMatch") {
        // Deterministic top-k children reranked after drafting, as PCT's: SampleAndMatch stays exact
        // (EAGLE's own acceptance, a point-mass q per candidate, has the same law).
        const auto r = check_composition(Eagle2Tree{.total_tokens = 8, .depth = 3, .top_k = 3}, SampleAndMatch{}, s);
        CAPTURE(r.statistic, r.dof);
        CHECK(r.statistic < test::chi_square_critical(r.dof));
    }
    SECTION("EDD drafter (the target's states as a soft prompt) + PCT tree + SampleAndMatch") {
        // EDD's paper runs greedy only; at T > 0 its PCT tree of top-k children goes with SampleAndMatch.
        const auto r = check_composition(
            PrunedCandidateTree{.expand_threshold = 0.2f, .leaf_threshold = 0.05f, .width = 3, .max_depth = 3},
            SampleAndMatch{}, s, [](Models& m) {
                static CpuModel drafter{edd_drafter_config(m.cfg), random_weights(edd_drafter_config(m.cfg), 78, 0.3f)};
                return EddProposer(m.target, drafter, edd_hidden_layer(m.cfg));
            });
        CAPTURE(r.statistic, r.dof);
        CHECK(r.statistic < test::chi_square_critical(r.dof));
    }
    SECTION("a cascade (drafter reviewing a deterministic drafter, lenience 3) + SpeculativeSampling") {
        // CS Drafting's vertical cascade: the drafter reviews leniently, so its tokens do NOT follow its
        // own distribution; each carries the law it was drawn from, which keeps the target exact.
        const auto r = check_composition(Chain{.gamma = 3}, SpeculativeSampling{}, s, [](Models& m) {
            return Review(m.draft, g_stepper, ReviewOptions{.budget = 3, .lenience = {3.0}});
        });
        CAPTURE(r.statistic, r.dof);
        CHECK(r.statistic < test::chi_square_critical(r.dof));
    }
    SECTION("a deterministic token drafter (q = one-hot, like Max-Gram) + SpeculativeSampling") {
        const auto r = check_composition(Chain{.gamma = 3}, SpeculativeSampling{}, s, [](Models&) { return g_stepper; });
        CAPTURE(r.statistic, r.dof);
        CHECK(r.statistic < test::chi_square_critical(r.dof));
    }
    SECTION("autoregressive decoding (the reference the others are held to)") {
        const auto r = check_composition(RootOnly{}, SampleAndMatch{}, s);
        CAPTURE(r.statistic, r.dof);
        CHECK(r.statistic < test::chi_square_critical(r.dof));
    }
}

TEST_CASE("the same check detects a deliberately lossy acceptor", "[lossless][sampling][slow]") {
    const auto r = check_composition(Chain{.gamma = 2}, AcceptEverything{}, Sampling{.temperature = 1.0f});
    CAPTURE(r.statistic, r.dof);
    CHECK(r.statistic > test::chi_square_critical(r.dof));
}
