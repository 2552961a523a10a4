// Every drafter kind under target-initialised MCSD (§3.1), whose steps start from the target's bonus law
// with no pending root: a plain small model, one of a prefix vocabulary (padded), GLIDE, EDD, EAGLE and
// FSPAD. At T = 0 the composition is plain greedy decoding; at T = 1 (two seeds, lossy) it runs, commits
// only tokens of the vocabulary, and each drafter's rows for every root it scored equal those of a fresh
// drafter fed the committed text.
#include <algorithm>
#include <cmath>
#include <memory>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_target_initialised_drafters {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

constexpr int kVocab = 16;

Config target_config() {
    Config c = test::tiny_config(true, kVocab);
    c.num_hidden_layers = 4;  // EDD reads state 1, EAGLE/FSPAD state 4
    return c;
}

/// A proposer that passes everything to `inner` and records, at each step's first propose, the rows it
/// returned for the roots it was asked about, with the committed text they followed (tracked from
/// start/observe as the loop defines them: a pending root, or none after a deferred bonus).
template <class P>
struct Spy {
    struct Seen {
        std::vector<int> committed;
        int root = 0;
        std::vector<float> row;  // (V)
    };
    explicit Spy(P& p) : inner(&p) {}
    P* inner;
    std::vector<Seen> seen;
    std::vector<int> committed;
    int pending = -1;
    bool fresh = true;
    int bonus_law_steps = 0;  // steps that began without a pending root

    int vocab_size() const { return inner->vocab_size(); }
    long n_calls() const { return inner->n_calls(); }
    void start(std::span<const int> prompt) {
        committed.assign(prompt.begin(), prompt.end() - 1);
        pending = prompt.back();
        fresh = true;
        inner->start(prompt);
    }
    Rows propose(const Tree& tree, std::span<const int> nodes) {
        const Rows rows = inner->propose(tree, nodes);
        if (fresh) {
            bonus_law_steps += pending < 0;
            for (std::size_t j = 0; j < nodes.size(); ++j)
                if (tree[nodes[j]].parent < 0) {
                    const auto r = rows.row(static_cast<int>(j));
                    seen.push_back({committed, tree[nodes[j]].token, {r.begin(), r.end()}});
                }
        }
        fresh = false;
        return rows;
    }
    void observe(const StepOutcome& outcome) {
        if (pending >= 0) committed.push_back(pending);
        for (std::size_t i = pending >= 0 ? 1 : 0; i < outcome.path.size(); ++i)
            committed.push_back(outcome.tree[outcome.path[i]].token);
        pending = outcome.next_root;
        fresh = true;
        inner->observe(outcome);
    }
};

/// Runs target-initialised MCSD with the drafter `make(target)` builds (an object with a `proposer`):
/// greedy equals plain greedy; at T = 1 every token is in the vocabulary and every recorded root row
/// equals a fresh drafter's over the same committed text.
template <class Make>
void check_pairing(const Weights& tw, Make make) {
    const Config tc = target_config();
    const std::vector<int> prompt{1, 4, 2, 9, 3};
    TreeVerifier verifier;
    LossyTargetInitialisedSampling acceptor{.allow_lossy = true};
    {
        CpuModel target(tc, tw);
        const GenerateOptions opts{.max_new_tokens = 20};
        const Generation plain = autoregressive_generate(target, prompt, opts);
        auto d = make(target);
        TargetInitialisedTree builder{.n_seeds = 2, .k_config = {2, 1}};
        const Generation g = speculative_generate(target, d->proposer, builder, verifier, acceptor, prompt, opts);
        CHECK(g.tokens == plain.tokens);
    }
    CpuModel target(tc, tw);
    auto d = make(target);
    Spy spy(d->proposer);
    TargetInitialisedTree builder{.n_seeds = 2, .k_config = {2, 2, 1}};
    const GenerateOptions opts{.max_new_tokens = 24, .sampling = {.temperature = 1.0f}, .seed = 5};
    Generation g;
    REQUIRE_NOTHROW(g = speculative_generate(target, spy, builder, verifier, acceptor, prompt, opts));
    CHECK(g.tokens.size() == 24u);
    CHECK(std::all_of(g.tokens.begin(), g.tokens.end(), [](int t) { return t >= 0 && t < kVocab; }));
    CHECK(spy.bonus_law_steps > 0);  // the steps this test is about happened
    REQUIRE(!spy.seen.empty());
    float worst = 0.0f;
    for (const auto& s : spy.seen) {
        CpuModel fresh_target(tc, tw);
        auto fresh = make(fresh_target);
        std::vector<int> text = s.committed;
        text.push_back(s.root);
        detail::prefill(fresh_target, std::span<const int>(text).first(text.size() - 1));
        fresh->proposer.start(text);
        Tree root;
        root.add_root(s.root);
        const std::vector<int> node{0};
        const Rows want = fresh->proposer.propose(root, node);
        REQUIRE(want.data.size() == s.row.size());
        for (std::size_t i = 0; i < s.row.size(); ++i) worst = std::max(worst, std::abs(want.data[i] - s.row[i]));
    }
    CAPTURE(spy.seen.size(), spy.bonus_law_steps);
    CHECK(worst < 1e-4f);
}

struct Plain {
    CpuModel draft;
    ModelProposer<CpuModel> proposer{draft};
    Plain(const Config& c, const Weights& w) : draft(c, w) {}
};

struct Padded {
    CpuModel draft;
    ModelProposer<CpuModel> inner{draft};
    PaddedVocabProposer<ModelProposer<CpuModel>> proposer{inner, kVocab};
    Padded(const Config& c, const Weights& w) : draft(c, w) {}
};

struct Glide {
    GlideModel<CpuModel> model;
    ModelProposer<GlideModel<CpuModel>> proposer{model};
    Glide(const GlideConfig& c, const GlideWeights& w, const CpuModel& target) : model(c, w, target) {}
};

struct Edd {
    CpuModel drafter;
    EddProposer<CpuModel> proposer;
    Edd(CpuModel& target, const Config& c, const Weights& w) : drafter(c, w), proposer(target, drafter, edd_hidden_layer(target.config())) {}
};

struct Feature {
    FeatureDrafter drafter;
    FeatureProposer<CpuModel> proposer;
    Feature(CpuModel& target, const FeatureCheckpoint& ck) : drafter(ck), proposer(target, drafter) {}
};

}  // namespace

TEST_CASE("target-initialised MCSD runs every drafter kind that scores nodes", "[mcsd][drafters]") {
    const Config tc = target_config();
    const Weights tw = random_weights(tc, 2024, 0.3f);
    SECTION("a small model") {
        const Weights dw = perturbed(tc, tw, 0.5f, 77);
        check_pairing(tw, [&](CpuModel&) { return std::make_unique<Plain>(tc, dw); });
    }
    SECTION("a small model of a prefix vocabulary, padded") {
        Config dc = tc;
        dc.vocab_size = 12;
        const Weights dw = random_weights(dc, 31, 0.3f);
        check_pairing(tw, [&](CpuModel&) { return std::make_unique<Padded>(dc, dw); });
    }
    SECTION("GLIDE, reading the target's KV cache") {
        const Config draft{.hidden_size = 16, .intermediate_size = 24, .num_hidden_layers = 1, .num_attention_heads = 2,
                           .num_key_value_heads = 1, .vocab_size = kVocab, .max_position_embeddings = 128};
        const GlideConfig gc = glide_config_for(draft, tc, true);
        const GlideWeights gw = random_glide_weights(gc, 3, 0.3f);
        check_pairing(tw, [&](CpuModel& target) { return std::make_unique<Glide>(gc, gw, target); });
    }
    SECTION("EDD, reading the target's states") {
        const Config dc = edd_drafter_config(tc);
        const Weights dw = random_weights(dc, 41, 0.3f);
        check_pairing(tw, [&](CpuModel& target) { return std::make_unique<Edd>(target, dc, dw); });
    }
    SECTION("EAGLE and FSPAD, reading the target's features") {
        for (const bool fspad : {false, true}) {
            CAPTURE(fspad);
            const FeatureCheckpoint ck =
                initial_feature_drafter(tc, tw, fspad ? Connector::kSampler : Connector::kFc, fspad, 51, 0.3f);
            check_pairing(tw, [&](CpuModel& target) { return std::make_unique<Feature>(target, ck); });
        }
    }
}

}  // namespace test_target_initialised_drafters
