// EDD's drafter (edd-pct.txt §3.1): which target layer it reads, the dual-block mask of Eq. 3 on a
// worked example, training and inference seeing the same rows at the same positions, the gradients of
// the whole trainable drafter, the checkpoint folder and its errors, greedy losslessness with PCT, and
// the drafter's states after rejections equal to a fresh drafter's fed the committed text.
#include <cmath>
#include <filesystem>
#include <fstream>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "helpers.hpp"

namespace test_edd {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::train;

namespace {

/// A four-layer target (EDD reads its state 1) and a one-layer drafter of the same width.
Config target_config(int vocab = 16) {
    Config c = test::tiny_config(true, vocab);
    c.num_hidden_layers = 4;
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

}  // namespace

TEST_CASE("EDD reads HF hidden_states[-4]: the output of the fourth-to-last decoder layer", "[edd]") {
    // CpuModel numbers states as HF: 0 embeddings, l the output of layer l, L the final normed state.
    // LLaMA2-7B (32 layers): state 29 = the output of 0-based block 28, the paper's "28th (fourth-to-last)".
    CHECK(edd_hidden_layer(Config{.num_hidden_layers = 32}) == 29);
    CHECK(edd_hidden_layer(Config{.num_hidden_layers = 8}) == 5);  // the demo target
    CHECK(edd_hidden_layer(target_config()) == 1);
    CHECK(edd_drafter_config(target_config()).num_hidden_layers == 1);
}

TEST_CASE("the dual-block mask of Eq. 3 on a worked example", "[edd]") {
    // n = 4 tokens, L = 2. Rows 0-3 are the states h0..h3 (causal), rows 4-7 the tokens t0..t3.
    // t0, t1 (block 0) see no state; t2, t3 (block 1) see h0, h1 and their block's tokens up to themselves.
    const std::vector<std::uint8_t> want{
        1, 0, 0, 0, 0, 0, 0, 0,  //
        1, 1, 0, 0, 0, 0, 0, 0,  //
        1, 1, 1, 0, 0, 0, 0, 0,  //
        1, 1, 1, 1, 0, 0, 0, 0,  //
        0, 0, 0, 0, 1, 0, 0, 0,  // t0
        0, 0, 0, 0, 1, 1, 0, 0,  // t1
        1, 1, 0, 0, 0, 0, 1, 0,  // t2: h0 h1 | t2
        1, 1, 0, 0, 0, 0, 1, 1,  // t3: h0 h1 | t2 t3
    };
    CHECK(dual_block_mask(4, 2) == want);
    // A last block cut short (n = 5, L = 2): t4 opens block 2 and sees h0..h3 and itself.
    const std::vector<std::uint8_t> m = dual_block_mask(5, 2);
    const std::vector<std::uint8_t> t4(m.begin() + 9 * 10, m.begin() + 10 * 10);
    CHECK(t4 == std::vector<std::uint8_t>{1, 1, 1, 1, 0, 0, 0, 0, 0, 1});
    CHECK_THROWS_WITH(dual_block_mask(4, 0), Catch::Contains("[specdec.edd] dual_block_mask: n = 4 and block_length = 0"));
    CHECK_THROWS_WITH((EddTrainOptions{.min_block = 6, .max_block = 5}.validate()),
                      Catch::Contains("block lengths 6..5: need 1 <= min_block <= max_block"));
}

TEST_CASE("block lengths are uniform over 5..10, a pure function of seed and step", "[edd]") {
    const EddTrainOptions o;
    std::map<int, int> count;
    for (int step = 0; step < 6000; ++step) ++count[o.block_length(1, step)];
    REQUIRE(count.size() == 6u);
    for (const auto& [L, c] : count) {
        CHECK(L >= 5);
        CHECK(L <= 10);
        CHECK(std::abs(c - 1000) < 130);  // 4 standard deviations of a binomial(6000, 1/6)
    }
    CHECK(o.block_length(1, 17) == o.block_length(1, 17));
    CHECK(EddTrainOptions{.min_block = 5, .max_block = 5}.block_length(3, 99) == 5);  // Table 3: fixed L
}

TEST_CASE("a token row in training sees what the drafter sees when it drafts at inference", "[edd]") {
    // Training: the [H ; T] rows under the dual-block mask. Inference: the states of the committed
    // tokens as committed rows, then the round's tokens as a chain. Token row i of block j must get the
    // same logits as the last node of a round rooted at t_{jL} holding t_{jL..i}.
    const Config tc = target_config(), dc = edd_drafter_config(tc);
    const int n = 11, L = 4, layer = edd_hidden_layer(tc);
    const Weights dw = random_weights(dc, 21, 0.3f);
    CpuModel target(tc, random_weights(tc, 20, 0.3f)), drafter(dc, dw);
    ThreadPool pool(2);
    WindowBatch w{1, n, some_tokens(n, tc.vocab_size, 3), some_tokens(n, tc.vocab_size, 4), {0}};
    const EddTeacher teacher = edd_teacher(target, pool, layer, w);
    const EddBatch batch = edd_batch(w, teacher, L, EddTrainOptions{});
    TrainableLlama model(dc, dw, pool);
    edd_forward_loss(model, batch, /*kl=*/true);
    for (int i : {0, 2, 4, 5, 7, 8, 10}) {
        CAPTURE(i);
        const int first = i / L * L;
        drafter.reset();
        if (first > 0) {
            drafter.forward_embeddings(Tree::chain(std::vector<int>(first, 0)), 0,
                                       Rows{std::span(teacher.states).first(static_cast<std::size_t>(first) * dc.hidden_size),
                                            dc.hidden_size});
            std::vector<int> path(first);
            for (int k = 0; k < first; ++k) path[k] = k;
            drafter.commit(path);
        }
        const Rows r = drafter.forward(Tree::chain(std::span(w.inputs).subspan(first, i - first + 1)), 0);
        const auto row = model.logits().subspan(static_cast<std::size_t>(n + i) * dc.vocab_size, dc.vocab_size);
        CHECK(worst_difference(r.row(i - first), row) < 1e-4f);
    }
}

TEST_CASE("the trainable EDD drafter's gradients match finite differences, KL and cross-entropy", "[edd]") {
    Config tc = target_config(24);
    tc.hidden_size = 16;  // head size 4: the fast attention kernels' masked-vector case
    const Config dc = edd_drafter_config(tc);
    const bool soft_prompt = GENERATE(true, false);
    const bool kl = GENERATE(true, false);
    CAPTURE(soft_prompt, kl);
    CpuModel target(tc, random_weights(tc, 30, 0.3f));
    ThreadPool pool(2);
    const int B = 2, n = 7;
    WindowBatch w{B, n, some_tokens(B * n, tc.vocab_size, 5), some_tokens(B * n, tc.vocab_size, 6), {0, 0}};
    const EddBatch batch = edd_batch(w, edd_teacher(target, pool, edd_hidden_layer(tc), w), 3,
                                     EddTrainOptions{.soft_prompt = soft_prompt, .kl = kl});
    TrainableLlama model(dc, edd_initial_weights(dc, random_weights(tc, 30, 0.3f), 31, 0.3f), pool);
    test::check_model_gradient(model, dc, [&](bool with_backward) {
        const double loss = edd_forward_loss(model, batch, kl);
        if (with_backward) model.backward();
        return loss;
    });
}

TEST_CASE("the EDD checkpoint is a folder that round-trips and refuses a mismatched target", "[edd]") {
    const Config tc = target_config(), dc = edd_drafter_config(tc);
    const std::filesystem::path dir = std::filesystem::temp_directory_path() / "specdec_test_edd_ckpt";
    std::filesystem::remove_all(dir);
    const Weights w = random_weights(dc, 40, 0.3f);
    save_edd_checkpoint(dir, EddCheckpoint{dc, w, 1}, SaveFormat::kF32);
    const EddCheckpoint back = load_edd_checkpoint(dir);
    CHECK(back.target_layer == 1);
    CHECK(back.config.num_hidden_layers == 1);
    CHECK(back.config.hidden_size == dc.hidden_size);
    CHECK(back.weights.layers[0].wq == w.layers[0].wq);
    CHECK(back.weights.embed == w.embed);
    const std::string cfg_text = detail::read_text_file(dir / "config.json", "test");
    CHECK(cfg_text.find("\"model_type\": \"edd\"") != std::string::npos);
    CHECK(cfg_text.find("\"EddDrafter\"") != std::string::npos);
    // Read as a plain Llama it would lose its soft prompt: refused, naming the loader to use.
    CHECK_THROWS_WITH(load_checkpoint(dir), Catch::Contains("an EDD drafter (model_type edd); load it with load_edd_checkpoint"));

    SECTION("a drafter of another width, vocabulary or layer is refused, naming both values") {
        Config wide = tc;
        wide.hidden_size = 64;
        CHECK_THROWS_WITH(check_edd_pair(dc, 1, wide),
                          Catch::Contains("[specdec.edd] the drafter's hidden_size 32 differs from the target's 64"));
        Config other_vocab = tc;
        other_vocab.vocab_size = 17;
        CHECK_THROWS_WITH(check_edd_pair(dc, 1, other_vocab),
                          Catch::Contains("the drafter's vocab_size 16 differs from the target's 17"));
        CHECK_THROWS_WITH(check_edd_pair(dc, 9, tc),
                          Catch::Contains("edd_target_layer 9 is not a hidden state of the target, which has 4 layers"));
        CpuModel target(wide, random_weights(wide, 1)), drafter(dc, w);
        CHECK_THROWS_WITH(EddProposer(target, drafter, 1), Catch::Contains("hidden_size 32 differs from the target's 64"));
    }
    SECTION("a folder that is not an EDD drafter, or names an impossible layer") {
        save_checkpoint(dir, dc, w, SaveFormat::kF32);
        CHECK_THROWS_WITH(load_edd_checkpoint(dir), Catch::Contains("model_type is not \"edd\""));
        save_edd_checkpoint(dir, EddCheckpoint{dc, w, 1}, SaveFormat::kF32);
        std::string text = detail::read_text_file(dir / "config.json", "test");
        text.replace(text.find("\"edd_target_layer\": 1"), 21, "\"edd_target_layer\": -3");
        std::ofstream(dir / "config.json") << text;
        CHECK_THROWS_WITH(load_edd_checkpoint(dir), Catch::Contains("edd_target_layer -3 is out of range"));
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("greedy EDD + PCT equals plain greedy decoding, and the drafter's states follow the committed text",
          "[edd][lossless]") {
    const WeightFormat format = GENERATE(WeightFormat::kF32, WeightFormat::kBF16);
    const std::uint64_t seed = GENERATE(range(1, 9));
    const bool near_end = seed == 8;  // the last prompt runs to the context's end
    CAPTURE(static_cast<int>(format), seed);
    const Config tc = target_config(), dc = edd_drafter_config(tc);
    const int layer = edd_hidden_layer(tc);
    const ModelOptions opts{.weight_format = format};
    const Weights tw = random_weights(tc, seed, 0.4f);
    CpuModel target(tc, tw, opts), drafter(dc, edd_initial_weights(dc, tw, seed + 50, 0.4f), opts);
    std::vector<int> prompt = some_tokens(near_end ? 90 : 5, tc.vocab_size, static_cast<int>(seed));
    const GenerateOptions gen{
        .max_new_tokens = near_end ? tc.max_position_embeddings - static_cast<int>(prompt.size()) : 40, .seed = seed};
    const Generation plain = autoregressive_generate(target, prompt, gen);

    EddProposer proposer(target, drafter, layer);
    PrunedCandidateTree pct{.expand_threshold = 0.05f};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const Generation spec = speculative_generate(target, proposer, pct, verifier, acceptor, prompt, gen);
    CHECK(spec.tokens == plain.tokens);
    int accepted = 0, rejected = 0;
    for (const StepRecord& s : spec.steps) accepted += s.n_accepted, rejected += s.n_accepted < s.depth;
    CHECK(rejected > 0);
    INFO("accepted drafts: " << accepted);

    // The drafter's committed rows are the target's states of the text so far (minus the steps since
    // the last draft): a fresh target prefilled with that text, feeding a fresh drafter, gives the
    // same keys and values.
    const int fed = proposer.states_fed();
    REQUIRE(fed > static_cast<int>(prompt.size()));
    REQUIRE(drafter.cache_len() == fed);
    std::vector<int> text = prompt;
    text.insert(text.end(), spec.tokens.begin(), spec.tokens.end());
    CpuModel fresh_target(tc, tw, opts), fresh_drafter(dc, edd_initial_weights(dc, tw, seed + 50, 0.4f), opts);
    fresh_target.capture_hidden({layer});
    detail::prefill(fresh_target, std::span(text).first(static_cast<std::size_t>(fed)), fed);
    const Rows states = fresh_target.committed_hidden(0);
    fresh_drafter.forward_embeddings(Tree::chain(std::vector<int>(fed, 0)), 0, states);
    std::vector<int> path(fed);
    for (int k = 0; k < fed; ++k) path[k] = k;
    fresh_drafter.commit(path);
    const float tol = format == WeightFormat::kF32 ? 1e-4f : 3e-2f;
    CHECK(worst_difference(drafter.kv(0).k, fresh_drafter.kv(0).k) < tol);
    CHECK(worst_difference(drafter.kv(0).v, fresh_drafter.kv(0).v) < tol);
}

TEST_CASE("the EDD proposer needs a prompt and names its drafter's context", "[edd][errors]") {
    const Config tc = target_config(), dc = edd_drafter_config(tc);
    CpuModel target(tc, random_weights(tc, 1)), drafter(dc, random_weights(dc, 2));
    EddProposer proposer(target, drafter, 1);
    CHECK_THROWS_WITH(proposer.start(std::vector<int>{}), Catch::Contains("[specdec.edd] start: the prompt is empty"));
    CHECK(proposer.drafter_contexts()[0].drafter == "the EDD drafter");
    CHECK(proposer.drafter_contexts()[0].context == dc.max_position_embeddings);
}

TEST_CASE("an EDD drafter and a feature drafter on one target each read their own layer", "[edd][eagle]") {
    // EDD reads state L - 3, EAGLE state L; each adds its layer to the target's captured set, so the
    // one built first keeps reading its own (a replaced set made EDD read L). Each run on the shared
    // target must step exactly as the same drafter alone on a target of its own.
    const Config tc = target_config(), dc = edd_drafter_config(tc);
    const Weights tw = random_weights(tc, 3, 0.4f), dw = edd_initial_weights(dc, tw, 53, 0.4f);
    const FeatureCheckpoint fck = initial_feature_drafter(tc, tw, Connector::kFc, false, 57, 0.4f);
    const std::vector<int> prompt = some_tokens(6, tc.vocab_size, 3);
    const GenerateOptions gen{.max_new_tokens = 30};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const auto run = [&](CpuModel& target, auto& proposer) {
        PrunedCandidateTree pct{.expand_threshold = 0.05f};
        const Generation g = speculative_generate(target, proposer, pct, verifier, acceptor, prompt, gen);
        std::vector<int> accepted;
        for (const StepRecord& s : g.steps) accepted.push_back(s.n_accepted * 100 + s.n_drafted);
        return accepted;
    };
    CpuModel shared(tc, tw), edd_target(tc, tw), feature_target(tc, tw);
    CpuModel edd_drafter(dc, dw), edd_alone_drafter(dc, dw);
    FeatureDrafter feature_drafter(fck), feature_alone_drafter(fck);
    EddProposer edd(shared, edd_drafter, edd_hidden_layer(tc));  // built first
    FeatureProposer feature(shared, feature_drafter);
    EddProposer edd_alone(edd_target, edd_alone_drafter, edd_hidden_layer(tc));
    FeatureProposer feature_alone(feature_target, feature_alone_drafter);
    REQUIRE(shared.hidden_index(edd_hidden_layer(tc)) != shared.hidden_index(tc.num_hidden_layers));

    const std::vector<int> edd_steps = run(shared, edd);
    CHECK(edd_steps == run(edd_target, edd_alone));
    CHECK(worst_difference(edd_drafter.kv(0).k, edd_alone_drafter.kv(0).k) < 1e-5f);
    const std::vector<int> feature_steps = run(shared, feature);
    CHECK(feature_steps == run(feature_target, feature_alone));
    CHECK(worst_difference(feature_drafter.model.kv(0).k, feature_alone_drafter.model.kv(0).k) < 1e-5f);

    // Replacing the set behind a reader's back is refused by name, never read as another layer.
    shared.capture_hidden({0});
    CHECK_THROWS_WITH(run(shared, edd), Catch::Contains("[specdec.model] hidden_index: layer 1 is not captured") &&
                                            Catch::Contains("captured: {0}"));
}

TEST_CASE("EDD counts every drafter forward, the catch-up of the target's states included", "[edd]") {
    // The states committed since the last step ride in the step's first forward (as ModelProposer's
    // catch-up chain does), so the proposer's count is the drafter model's own count of forwards, and a
    // chain of gamma costs gamma forwards per step.
    const Config tc = target_config(), dc = edd_drafter_config(tc);
    const Weights tw = random_weights(tc, 4, 0.4f);
    CpuModel target(tc, tw), drafter(dc, edd_initial_weights(dc, tw, 54, 0.4f));
    EddProposer proposer(target, drafter, edd_hidden_layer(tc));
    Chain chain{.gamma = 3};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const std::vector<int> prompt = some_tokens(7, tc.vocab_size, 4);
    const GenerateOptions gen{.max_new_tokens = 25};
    const Generation g = speculative_generate(target, proposer, chain, verifier, acceptor, prompt, gen);
    CHECK(g.tokens == autoregressive_generate(target, prompt, gen).tokens);
    long per_step = 0;
    for (const StepRecord& s : g.steps) {
        CHECK(s.n_draft_calls == s.depth);
        per_step += s.n_draft_calls;
    }
    CHECK(proposer.n_calls() == per_step);
    CHECK(drafter.n_forwards() == proposer.n_calls());
    CHECK(proposer.usage()[0].calls == drafter.n_forwards());
}

}  // namespace test_edd
