// Improved MCSD's early-stop decision models (§3.3): the 0.4 rule, training that lowers the loss on
// logged drafting steps, and a decision-stopped fork that stays lossless.
#include "catch.hpp"
#include "helpers.hpp"

namespace test_decision_model {  // a unity build compiles several test files as one

using namespace specdec;

TEST_CASE("drafting stops only when every candidate's predicted acceptance is below 0.4", "[mcsd][decision]") {
    CHECK(stop_drafting(std::vector<float>{0.1f, 0.39f, 0.2f}));
    CHECK_FALSE(stop_drafting(std::vector<float>{0.1f, 0.4f, 0.2f}));  // one candidate at 0.4 keeps drafting
    CHECK_FALSE(stop_drafting(std::vector<float>{0.9f}));
    CHECK_FALSE(stop_drafting(std::vector<float>{}));
    CHECK(stop_drafting(std::vector<float>{0.5f, 0.6f}, 0.7f));
}

TEST_CASE("Type 2's features are q's entropy and top-k probabilities", "[mcsd][decision]") {
    const std::vector<float> q{0.5f, 0.25f, 0.125f, 0.125f};
    const std::vector<float> f = law_features(q, 2);
    REQUIRE(f.size() == 3);
    CHECK_THAT(f[0], Catch::WithinRel(static_cast<float>(0.5 * std::log(2.0) + 0.25 * std::log(4.0) + 0.25 * std::log(8.0)), 1e-5f));
    CHECK(f[1] == 0.5f);
    CHECK(f[2] == 0.25f);
}

TEST_CASE("training a decision model of either type lowers its loss on logged drafting steps", "[mcsd][decision][train]") {
    const Config cfg = test::tiny_config();
    const Weights w = random_weights(cfg, 11, 0.4f);
    CpuModel target(cfg, w), draft(cfg, perturbed(cfg, w, 0.6f, 12));
    draft.capture_hidden({cfg.num_hidden_layers});
    std::vector<std::vector<int>> texts;
    for (int start : {3, 17, 42, 8}) {
        const std::vector<int> p{start, 5};
        const Generation g = autoregressive_generate(target, p, GenerateOptions{.max_new_tokens = 60, .sampling = {.temperature = 1.0f}, .seed = 9});
        std::vector<int> t = p;
        t.insert(t.end(), g.tokens.begin(), g.tokens.end());
        texts.push_back(t);
    }
    const Sampling s{.temperature = 1.0f};
    const std::vector<DecisionSample> data = log_drafting_steps(target, draft, texts, s, 4, 3);
    REQUIRE(data.size() == 4 * 62);
    const bool type1 = GENERATE(true, false);
    CAPTURE(type1);
    DecisionModel m(type1 ? DecisionModelConfig{.input = DecisionInput::kDraftHidden, .n_in = cfg.hidden_size, .hidden = 16, .n_layers = 3}
                          : DecisionModelConfig{.input = DecisionInput::kDraftLaw, .n_in = 5, .hidden = 16, .n_layers = 2, .top_k = 4},
                    21);
    const std::vector<double> curve = train::train_decision_model(m, data, {.epochs = 15, .batch = 32, .lr = 3e-3f});
    CAPTURE(curve.front(), curve.back());
    CHECK(curve.back() < 0.95 * curve.front());  // Type 2 reads 5 numbers: it learns less than Type 1

    // A fork stopped by the trained model stays lossless under greedy decoding (the stop only shortens drafts).
    DecisionStop<CpuModel> stop{&m, &draft, 0.4f};
    DynamicFork<DecisionStop<CpuModel>> fork{.width = 4, .max_depth = 4, .stop = stop};
    ModelProposer proposer(draft);
    TreeVerifier verifier;
    MultiDraftSampling acceptor;
    const std::vector<int> prompt{3, 9, 1};
    const GenerateOptions opts{.max_new_tokens = 16};
    const Generation g = speculative_generate(target, proposer, fork, verifier, acceptor, prompt, opts);
    CHECK(g.tokens == autoregressive_generate(target, prompt, opts).tokens);
}

}  // namespace test_decision_model
