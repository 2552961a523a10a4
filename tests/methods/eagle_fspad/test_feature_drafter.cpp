// EAGLE's feature drafter and FSPAD (fspad.txt): the connectors' arithmetic, PAD's split of the last
// down_proj, the loss against hand-computed values, the trainable drafter's gradients, training rows
// equal to what the drafter computes when it drafts, the checkpoint folder, greedy and T = 1
// losslessness with EAGLE-2's tree, the drafter's cache after rejections, and bad input.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "helpers.hpp"

namespace test_feature_drafter {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::train;

namespace {

Config target_config(int vocab = 16) {
    Config c = test::tiny_config(true, vocab);
    c.num_hidden_layers = 3;
    return c;
}

std::vector<int> some_tokens(int n, int vocab, int seed) {
    std::vector<int> t(n);
    for (int i = 0; i < n; ++i) t[i] = (seed * 7 + i * 5 + i * i) % vocab;
    return t;
}

float worst_difference(std::span<const float> a, std::span<const float> b) {
    REQUIRE(a.size() == b.size());
    float worst = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
    return worst;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

/// The committed text's features, as a target prefilled with it holds them.
std::vector<float> features_of(const Config& tc, const Weights& tw, std::span<const int> text) {
    CpuModel t(tc, tw);
    t.capture_hidden({tc.num_hidden_layers});
    detail::prefill(t, text, static_cast<int>(text.size()));
    const Rows f = t.committed_hidden(0);
    return {f.data.begin(), f.data.end()};
}

}  // namespace

TEST_CASE("the FC connector and the Feature Sampler compute their formulas", "[eagle][fspad]") {
    const int D = 2, I = 3, n = 2;
    const std::vector<float> e{1.0f, -2.0f, 0.5f, 0.25f}, f{3.0f, 1.0f, -1.0f, 2.0f};  // (n, D)
    SECTION("EAGLE: eta = FC(concat(e, f)), (D, 2D)") {
        ConnectorWeights w;
        w.fc = {1, 0, 0, 0,  /* row 0 reads e0 */ 0, 0, 0, 1 /* row 1 reads f1 */};
        FeatureConnector c(Connector::kFc, w, D, I, ModelOptions{.reference = true});
        std::vector<float> eta(n * D);
        c.apply(eta.data(), e.data(), f.data(), n);
        CHECK(eta == std::vector<float>{1.0f, 1.0f, 0.5f, 2.0f});
    }
    SECTION("FSPAD: eta = Down(SiLU(Gate(e)) * Up(f)) through I, no residual") {
        ConnectorWeights w;
        w.gate = {1, 0, 0, 1, 1, 1};     // (I, D)
        w.up = {0, 1, 1, 0, 1, -1};      // (I, D)
        w.down = {1, 0, 2, 0, 1, -1};    // (D, I)
        FeatureConnector c(Connector::kSampler, w, D, I, ModelOptions{.reference = true});
        std::vector<float> eta(n * D);
        c.apply(eta.data(), e.data(), f.data(), n);
        for (int r = 0; r < n; ++r) {
            const float* er = e.data() + r * D;
            const float* fr = f.data() + r * D;
            const float h[3] = {silu(er[0]) * fr[1], silu(er[1]) * fr[0], silu(er[0] + er[1]) * (fr[0] - fr[1])};
            CHECK(eta[r * D + 0] == Approx(h[0] + 2 * h[2]).epsilon(1e-5));
            CHECK(eta[r * D + 1] == Approx(h[1] - h[2]).epsilon(1e-5));
        }
    }
}

TEST_CASE("PAD splits the last down_proj: the first half feeds the head, the second is the feature", "[fspad]") {
    const Config tc = target_config();
    Config pad = feature_drafter_config(tc, true), plain = feature_drafter_config(tc, false);
    const Weights wp = random_weights(pad, 3, 0.3f);
    REQUIRE(wp.layers[0].w_down.size() == static_cast<std::size_t>(2 * tc.hidden_size * tc.intermediate_size));
    CHECK(pad.parameter_count() == plain.parameter_count() + std::int64_t{tc.hidden_size} * tc.intermediate_size);
    const std::size_t half = wp.layers[0].w_down.size() / 2;
    Weights token = wp, feature = wp;  // plain layers holding one half each
    token.layers[0].w_down.assign(wp.layers[0].w_down.begin(), wp.layers[0].w_down.begin() + half);
    feature.layers[0].w_down.assign(wp.layers[0].w_down.begin() + half, wp.layers[0].w_down.end());
    CpuModel m_pad(pad, wp), m_token(plain, token), m_feature(plain, feature);
    for (CpuModel* m : {&m_pad, &m_token, &m_feature}) m->capture_hidden({1});
    const Tree chain = Tree::chain(some_tokens(6, tc.vocab_size, 1));
    const std::vector<float> lp(m_pad.forward(chain).data.begin(), m_pad.forward(chain).data.end());
    const std::vector<float> hp(m_pad.hidden(0).data.begin(), m_pad.hidden(0).data.end());
    const Rows lt = m_token.forward(chain);
    CHECK(worst_difference(lp, lt.data) < 1e-5f);  // f~ -> head: the token branch
    m_feature.forward(chain);
    CHECK(worst_difference(hp, m_feature.hidden(0).data) < 1e-5f);  // f: the feature branch
    CHECK(worst_difference(hp, m_token.hidden(0).data) > 1e-3f);    // the two branches differ

    SECTION("the trainable layer computes the same function") {
        ThreadPool pool(2);
        TrainableLlama t(pad, wp, pool);
        t.capture_hidden({1});
        const std::vector<int> toks = some_tokens(6, tc.vocab_size, 1);
        t.forward(ModelInput{.B = 1, .T = 6, .tokens = toks});
        CHECK(worst_difference(t.logits(), lp) < 1e-4f);
        CHECK(worst_difference(t.hidden(0), hp) < 1e-4f);
    }
    SECTION("the checkpoint keeps the doubled projection") {
        const std::filesystem::path dir = std::filesystem::temp_directory_path() / "specdec_test_pad_layer";
        save_checkpoint(dir, pad, wp, SaveFormat::kF32);
        const Checkpoint back = load_checkpoint(dir);
        CHECK(back.config.partial_alignment);
        CHECK(back.weights.layers[0].w_down == wp.layers[0].w_down);
        std::filesystem::remove_all(dir);
    }
}

TEST_CASE("the loss L = 0.1 L_t + L_f against hand-computed values, masked rows left out", "[eagle][fspad]") {
    // Two rows, V = 2, D = 2; row 1 is masked (a prompt position).
    // Row 0: logits (0, ln 3) -> q = (1/4, 3/4); target p = (1/2, 1/2): L_t = -(.5 ln .25 + .5 ln .75).
    // Feature (0.5, 3), target (0, 0): SmoothL1 (beta 1) = (0.5·0.25 + (3 - 0.5)) / 2 = 1.3125.
    ThreadPool pool(1);
    const std::vector<float> logits{0.0f, std::log(3.0f), 5.0f, -5.0f}, probs{0.5f, 0.5f, 1.0f, 0.0f};
    const std::vector<float> feature{0.5f, 3.0f, 9.0f, 9.0f}, target{0.0f, 0.0f, 0.0f, 0.0f};
    const std::vector<std::uint8_t> counted{1, 0};
    std::vector<float> dlogits(4, 0.0f), dfeature(4, 0.0f);
    const FeatureLoss l = feature_loss(pool, dlogits.data(), logits.data(), probs.data(), dfeature.data(), feature.data(),
                                       target.data(), 2, 2, 2, counted.data(), 0.1);
    const double lt = -(0.5 * std::log(0.25) + 0.5 * std::log(0.75));
    CHECK(l.token == Approx(lt).epsilon(1e-5));
    CHECK(l.feature == Approx(1.3125).epsilon(1e-6));
    CHECK(l.total == Approx(0.1 * lt + 1.3125).epsilon(1e-5));
    // d/dlogits = 0.1 (q - p); d/dfeature = (d, sign) / D; the masked row gets nothing.
    CHECK(dlogits[0] == Approx(0.1 * (0.25 - 0.5)).epsilon(1e-5));
    CHECK(dlogits[1] == Approx(0.1 * (0.75 - 0.5)).epsilon(1e-5));
    CHECK(dfeature[0] == Approx(0.25).epsilon(1e-6));
    CHECK(dfeature[1] == Approx(0.5).epsilon(1e-6));
    CHECK(dlogits[2] == 0.0f);
    CHECK(dfeature[3] == 0.0f);
}

TEST_CASE("the trainable feature drafter's gradients match finite differences", "[eagle][fspad]") {
    Config tc = target_config(24);
    tc.hidden_size = 16;
    tc.intermediate_size = 24;
    const Connector kind = GENERATE(Connector::kFc, Connector::kSampler);
    const bool pad = GENERATE(false, true);
    CAPTURE(static_cast<int>(kind), pad);
    const Weights tw = random_weights(tc, 30, 0.3f);
    CpuModel target(tc, tw);
    ThreadPool pool(2);
    const int B = 2, T = 7;
    WindowBatch w{B, T, some_tokens(B * T, tc.vocab_size, 5), some_tokens(B * T, tc.vocab_size, 6), {0, 0}};
    const FeatureBatch batch = feature_batch(w, hidden_teacher(target, pool, tc.num_hidden_layers, w), tw.embed, 3);
    TrainableFeatureDrafter d(initial_feature_drafter(tc, tw, kind, pad, 31, 0.3f), pool);
    const auto loss = [&](bool with_backward) {
        return d.forward_loss(batch, 0.1, with_backward).total;
    };
    test::check_model_gradient(d.layer(), d.layer().config(), loss);
    // The connector's tensors, the same way.
    d.zero_grad();
    loss(true);
    const ConnectorWeights grads = d.connector_grads();
    test::check_tensor_gradient(d.connector_params(), grads, d.connector_shape(), loss, 0.02, 500);
    std::size_t index = 0;
    for_each_tensor(grads, d.connector_shape(), [&](const std::string&, const std::vector<float>&, std::size_t) { ++index; });
    CHECK(index == (kind == Connector::kFc ? 1u : 3u));
}

TEST_CASE("a training row sees what the drafter sees when it drafts the root", "[eagle][fspad]") {
    const Config tc = target_config();
    const Connector kind = GENERATE(Connector::kFc, Connector::kSampler);
    const bool pad = GENERATE(false, true);
    CAPTURE(static_cast<int>(kind), pad);
    const Weights tw = random_weights(tc, 7, 0.3f);
    const FeatureCheckpoint init = initial_feature_drafter(tc, tw, kind, pad, 8, 0.3f);
    const std::vector<int> text = some_tokens(9, tc.vocab_size, 2);  // x_0..x_8, x_8 the root
    ThreadPool pool(2);
    CpuModel teacher(tc, tw);
    WindowBatch w{1, 9, text, some_tokens(9, tc.vocab_size, 3), {0}};
    const FeatureBatch batch = feature_batch(w, hidden_teacher(teacher, pool, tc.num_hidden_layers, w), tw.embed);
    TrainableFeatureDrafter trainable(init, pool);
    trainable.forward_loss(batch, 0.1, false);

    CpuModel target(tc, tw);
    FeatureDrafter drafter(init);
    FeatureProposer proposer(target, drafter);
    detail::prefill(target, std::span(text).first(8), 8);
    proposer.start(text);
    Tree root;
    root.add_root(text.back());
    const Rows r = proposer.propose(root, std::vector<int>{0});
    const int V = tc.vocab_size, D = tc.hidden_size;
    CHECK(worst_difference(r.row(0), trainable.layer().logits().subspan(7u * V, V)) < 1e-4f);
    CHECK(worst_difference(proposer.node_features().row(0), trainable.layer().hidden(0).subspan(7u * D, D)) < 1e-4f);
    CHECK(proposer.rows_fed() == 7);
}

TEST_CASE("the feature drafter checkpoint is a folder that round-trips and names its target", "[eagle][fspad]") {
    const Config tc = target_config();
    const Weights tw = random_weights(tc, 1, 0.3f);
    const Connector kind = GENERATE(Connector::kFc, Connector::kSampler);
    const bool pad = GENERATE(false, true);
    const FeatureCheckpoint ck = initial_feature_drafter(tc, tw, kind, pad, 2, 0.3f);
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "specdec_test_feature_ckpt";
    std::filesystem::remove_all(dir);
    save_feature_checkpoint(dir, ck, SaveFormat::kF32);
    const FeatureCheckpoint back = load_feature_checkpoint(dir);
    CHECK(back.connector == kind);
    CHECK(back.config.partial_alignment == pad);
    CHECK(back.sampler_size == tc.intermediate_size);
    CHECK(back.target_hash == target_config_hash(tc));
    CHECK(back.weights.layers[0].w_down == ck.weights.layers[0].w_down);
    CHECK(back.connector_weights.fc == ck.connector_weights.fc);
    CHECK(back.connector_weights.down == ck.connector_weights.down);
    const std::string text = detail::read_text_file(dir / "config.json", "test");
    const bool eagle = kind == Connector::kFc && !pad;
    CHECK(text.find(eagle ? "\"model_type\": \"eagle\"" : "\"model_type\": \"fspad\"") != std::string::npos);
    CHECK_THROWS_WITH(load_checkpoint(dir), Catch::Contains("a feature drafter (model_type") &&
                                                Catch::Contains("load it with load_feature_checkpoint"));
    save_checkpoint(dir, tc, tw, SaveFormat::kF32);
    CHECK_THROWS_WITH(load_feature_checkpoint(dir), Catch::Contains("[specdec.eagle]") &&
                                                        Catch::Contains("model_type is not \"eagle\" or \"fspad\""));
    std::filesystem::remove_all(dir);
}

TEST_CASE("bad input to the feature drafter is refused, naming the values", "[eagle][fspad][errors]") {
    const Config tc = target_config();
    const Weights tw = random_weights(tc, 1, 0.3f);
    const FeatureCheckpoint ck = initial_feature_drafter(tc, tw, Connector::kFc, false, 2, 0.3f);
    SECTION("a target of another feature size") {
        Config wide = tc;
        wide.hidden_size = 64;
        CHECK_THROWS_WITH(check_feature_pair(ck, wide),
                          Catch::Contains("[specdec.eagle] the drafter's feature size (hidden_size) 32 differs from the target's 64"));
        CpuModel target(wide, random_weights(wide, 1));
        FeatureDrafter d(ck);
        CHECK_THROWS_WITH(FeatureProposer(target, d), Catch::Contains("feature size (hidden_size) 32 differs from the target's 64"));
    }
    SECTION("a target of another vocabulary") {
        Config other = tc;
        other.vocab_size = 17;
        CHECK_THROWS_WITH(check_feature_pair(ck, other), Catch::Contains("the drafter's vocab_size 16 differs from the target's 17"));
        CpuModel target(other, random_weights(other, 1));
        FeatureDrafter d(ck);
        CHECK_THROWS_WITH(FeatureProposer(target, d), Catch::Contains("vocab_size 16 differs from the target's 17"));
    }
    SECTION("a drafter trained for another target of the same width and vocabulary") {
        Config deeper = tc;
        deeper.num_hidden_layers = 4;
        CHECK_THROWS_WITH(check_feature_pair(ck, deeper), Catch::Contains("trained for a target with config hash " + ck.target_hash +
                                                                          ", this target's is " + target_config_hash(deeper)));
        CpuModel target(deeper, random_weights(deeper, 1));
        FeatureDrafter d(ck);
        CHECK_THROWS_WITH(FeatureProposer(target, d), Catch::Contains("config hash"));
    }
    SECTION("a drafter trained for the same shape under another RoPE scaling") {
        Config scaled = tc;
        scaled.rope_scaling = {.type = RopeScalingType::kLinear, .factor = 2.0f};
        CHECK_THROWS_WITH(check_feature_pair(ck, scaled), Catch::Contains("config hash"));
        Config yarn = tc;
        yarn.rope_scaling = {.type = RopeScalingType::kYarn, .factor = 2.0f, .original_max_position_embeddings = 64};
        Config yarn_other = yarn;
        yarn_other.rope_scaling.beta_fast = 16.0f;
        Config table = tc;
        table.rope_scaling = {.type = RopeScalingType::kFactors, .factors = std::vector<float>(tc.head_dim() / 2, 1.0f)};
        Config table_other = table;
        table_other.rope_scaling.factors.back() = 2.0f;
        const std::vector<std::string> hashes{target_config_hash(tc), target_config_hash(scaled), target_config_hash(yarn),
                                              target_config_hash(yarn_other), target_config_hash(table),
                                              target_config_hash(table_other)};
        CHECK(std::set<std::string>(hashes.begin(), hashes.end()).size() == hashes.size());
        Config unscaled = tc;  // the scaling's fields are read only where a scaling is set
        unscaled.rope_scaling.factor = 3.0f;
        unscaled.attention_head_dim = tc.hidden_size / tc.num_attention_heads;  // explicit, the default's value
        CHECK(target_config_hash(unscaled) == ck.target_hash);
    }
    SECTION("EAGLE-2's tree: top-k above the vocabulary, fewer than one token") {
        CpuModel target(tc, tw);
        FeatureDrafter d(ck);
        FeatureProposer proposer(target, d);
        const std::vector<int> prompt{1, 2, 3};
        TreeVerifier verifier;
        GreedyMatch greedy;
        Eagle2Tree wide{.top_k = 17}, empty{.total_tokens = 0};
        CHECK_THROWS_WITH(speculative_generate(target, proposer, wide, verifier, greedy, prompt, GenerateOptions{.max_new_tokens = 4}),
                          Catch::Contains("top_k = 17 exceeds the drafter's vocabulary of 16"));
        CHECK_THROWS_WITH(speculative_generate(target, proposer, empty, verifier, greedy, prompt, GenerateOptions{.max_new_tokens = 4}),
                          Catch::Contains("total_tokens = 0"));
        CHECK_THROWS_WITH(proposer.start(std::vector<int>{}), Catch::Contains("[specdec.eagle] start: the prompt is empty"));
    }
    SECTION("a node scored in the same call as its parent (its input is the parent's predicted feature)") {
        CpuModel target(tc, tw);
        FeatureDrafter d(ck);
        FeatureProposer proposer(target, d);
        const std::vector<int> prompt{1, 2, 3};
        proposer.start(prompt);
        detail::prefill(target, std::span<const int>(prompt).first(2));
        Tree tree;
        tree.add_root(3);
        tree.add(4, 0);
        const std::vector<int> nodes{0, 1};
        CHECK_THROWS_WITH(proposer.propose(tree, nodes),
                          Catch::Contains("[specdec.eagle] propose: node 1 and its parent 0 are both new in one call"));
    }
}

TEST_CASE("greedy EAGLE-2 and FSPAD equal plain greedy decoding, and the drafter follows the committed text",
          "[eagle][fspad][lossless]") {
    const Connector kind = GENERATE(Connector::kFc, Connector::kSampler);
    const bool pad = kind == Connector::kSampler;  // EAGLE-2 (FC) and FSPAD (sampler + PAD)
    const std::uint64_t seed = GENERATE(range(1, 6));
    const bool half = seed % 2 == 0;
    CAPTURE(static_cast<int>(kind), seed);
    const Config tc = target_config();
    const Weights tw = random_weights(tc, seed, 0.4f);
    FeatureCheckpoint ck = initial_feature_drafter(tc, tw, kind, pad, seed + 50, 0.4f);
    CpuModel target(tc, tw);
    std::vector<int> prompt = some_tokens(seed == 5 ? 1 : 6, tc.vocab_size, static_cast<int>(seed));
    const GenerateOptions gen{.max_new_tokens = 40, .seed = seed};
    const Generation plain = autoregressive_generate(target, prompt, gen);
    FeatureDrafter drafter(ck);
    FeatureProposer proposer(target, drafter);
    TreeVerifier verifier;
    Eagle2Tree tree = half ? Eagle2Tree::half_budget() : Eagle2Tree{};
    GreedyMatch greedy;
    const Generation spec = speculative_generate(target, proposer, tree, verifier, greedy, prompt, gen);
    CHECK(spec.tokens == plain.tokens);
    int rejected = 0;
    for (const StepRecord& s : spec.steps) rejected += s.n_accepted < s.depth;
    CHECK(rejected > 0);

    // After the last step (with rejections), the drafter's committed rows and its root prediction
    // equal those of a fresh drafter started on the committed text.
    std::vector<int> text = prompt;
    text.insert(text.end(), spec.tokens.begin(), spec.tokens.end());
    text.resize(static_cast<std::size_t>(target.cache_len()) + 1);  // the text the target holds, then the root
    Tree root;
    root.add_root(text.back());
    const Rows live = proposer.propose(root, std::vector<int>{0});
    const std::vector<float> live_logits(live.data.begin(), live.data.end());
    const std::vector<float> live_feature(proposer.node_features().data.begin(), proposer.node_features().data.end());
    CpuModel fresh_target(tc, tw);
    FeatureDrafter fresh(ck);
    FeatureProposer fresh_proposer(fresh_target, fresh);
    detail::prefill(fresh_target, std::span(text).first(text.size() - 1), static_cast<int>(text.size()) - 1);
    fresh_proposer.start(text);
    const Rows again = fresh_proposer.propose(root, std::vector<int>{0});
    REQUIRE(proposer.rows_fed() == fresh_proposer.rows_fed());
    REQUIRE(drafter.model.cache_len() == fresh.model.cache_len());
    CHECK(worst_difference(drafter.model.kv(0).k, fresh.model.kv(0).k) < 1e-4f);
    CHECK(worst_difference(drafter.model.kv(0).v, fresh.model.kv(0).v) < 1e-4f);
    CHECK(worst_difference(live_logits, again.data) < 1e-4f);
    CHECK(worst_difference(live_feature, fresh_proposer.node_features().data) < 1e-4f);
    CHECK(worst_difference(features_of(tc, tw, std::span(text).first(text.size() - 1)), target.committed_hidden(0).data) < 1e-4f);
}

TEST_CASE("T = 1 with SampleAndMatch over an EAGLE-2 tree of feature drafts follows the target's law",
          "[eagle][fspad][lossless][sampling][slow]") {
    // SampleAndMatch draws each token from the target and descends where a child holds it: exact for
    // any tree that does not depend on the target's draws, which EAGLE-2's top-k tree does not.
    constexpr int kVocab = 6, kRuns = 2000;
    const Connector kind = GENERATE(Connector::kFc, Connector::kSampler);
    CAPTURE(static_cast<int>(kind));
    const Config tc = test::tiny_config(true, kVocab);
    const Weights tw = random_weights(tc, 2024, 0.3f);
    CpuModel target(tc, tw);
    FeatureDrafter drafter(initial_feature_drafter(tc, tw, kind, kind == Connector::kSampler, 9, 0.3f));
    FeatureProposer proposer(target, drafter);
    const Sampling s{.temperature = 1.0f};
    const std::vector<int> prompt{1, 4, 2};
    const auto expected = test::exact_two_tokens(target, prompt, s);
    const auto observed = test::sampled_two_tokens(target, proposer, Eagle2Tree{.total_tokens = 8, .depth = 3, .top_k = 3},
                                                   SampleAndMatch{}, prompt, s, kRuns);
    const test::ChiSquare r = test::chi_square(observed, expected, kRuns);
    REQUIRE(r.dof >= 8);
    CAPTURE(r.statistic, r.dof);
    CHECK(r.statistic < test::chi_square_critical(r.dof));
}

}  // namespace test_feature_drafter
