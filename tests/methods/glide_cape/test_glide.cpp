// GLIDE's drafter (glide-cape.txt §4.1): the cross-attention reads exactly the committed target rows the
// KV delay allows; inference equals the training forward under the inference mask; the block-wise
// training mask; float64 gradients of the whole drafter; greedy losslessness end to end; checkpoints.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_glide {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::train;
namespace fs = std::filesystem;

namespace {

/// A drafter of N_D layers with its own small shape, paired with `target`.
GlideConfig small_glide(const Config& target, bool cross, int layers = 1, bool tied = true) {
    const Config draft{.hidden_size = 16,
                       .intermediate_size = 24,
                       .num_hidden_layers = layers,
                       .num_attention_heads = 2,
                       .num_key_value_heads = 1,
                       .vocab_size = target.vocab_size,
                       .max_position_embeddings = 128,
                       .tie_word_embeddings = tied};
    return glide_config_for(draft, target, cross);
}

/// A stand-in target whose committed KV rows are set by hand (ExposesKV and nothing more).
struct HandTarget {
    int layers = 3, kv_heads = 2, head_dim = 8, vocab = 64, len = 0;
    std::vector<std::vector<float>> k, v;  // per layer: (len, kv_heads * head_dim)

    int vocab_size() const { return vocab; }
    int cache_len() const { return len; }
    int context_size() const { return 128; }
    Rows forward(const Tree&, int) { return Rows{{}, vocab}; }
    void commit(std::span<const int>) {}
    void truncate(int n) { len = n; }
    void reset() { len = 0; }
    int num_layers() const { return layers; }
    KvView kv(int l) const {
        const std::size_t n = static_cast<std::size_t>(len) * kv_heads * head_dim;
        return {std::span<const float>(k[l]).first(n), std::span<const float>(v[l]).first(n), len, kv_heads, head_dim};
    }
};
static_assert(ExposesKV<HandTarget>);

Config hand_target_config(const HandTarget& t) {
    return Config{.hidden_size = 4 * t.head_dim,
                  .intermediate_size = 8,
                  .num_hidden_layers = t.layers,
                  .num_attention_heads = 4,
                  .num_key_value_heads = t.kv_heads,
                  .vocab_size = t.vocab,
                  .max_position_embeddings = 128};
}

std::vector<float> copy_rows(const Rows& r) { return {r.data.begin(), r.data.end()}; }

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
    float d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
    return d;
}

/// Logits of a chain of tokens decoded from an empty drafter cache (positions 0..n-1).
template <class M>
std::vector<float> chain_logits(M& model, const std::vector<int>& tokens) {
    model.reset();
    return copy_rows(model.forward(Tree::chain(tokens), 0));
}

std::vector<int> tokens_of(int n, int vocab, std::uint64_t seed) {
    std::vector<int> t(n);
    StepRng rng{seed, 0, RngStream::kUser};
    for (int i = 0; i < n; ++i) t[i] = static_cast<int>(rng.uniform(static_cast<std::uint32_t>(i)) * vocab);
    return t;
}

/// The target's KV of the layers the drafter reads, as the training forward takes it (B = 1).
TargetKv<float> kv_of(const CpuModel& target, const GlideConfig& cfg) {
    TargetKv<float> kv{1, target.cache_len(), {}, {}};
    for (int m = 0; m < cfg.draft.num_hidden_layers; ++m) {
        const KvView view = target.kv(cfg.target_layer(m));
        kv.k.emplace_back(view.k.begin(), view.k.end());
        kv.v.emplace_back(view.v.begin(), view.v.end());
    }
    return kv;
}

/// A GLIDE drafter whose Llama part is the target plus noise (so it often agrees with the target)
/// and whose cross-attention is small and random: acceptance strictly between 0 and 1.
GlideWeights near_target(const GlideConfig& cfg, const Weights& target_w, std::uint64_t seed) {
    std::map<std::string, const std::vector<float>*> llama;
    const Weights noisy = perturbed(cfg.draft, target_w, 0.05f, seed);
    for_each_tensor(noisy, cfg.draft,
                    [&](const std::string& name, const std::vector<float>& t, std::size_t) { llama[name] = &t; });
    GlideWeights w = random_glide_weights(cfg, seed, 0.1f);
    for_each_tensor(w, cfg, [&](const std::string& name, std::vector<float>& t, const auto&) {
        if (llama.count(name)) t = *llama[name];
    });
    return w;
}

fs::path fresh_dir(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / ("specdec_test_" + name);
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// What the cross-attention sees

TEST_CASE("the cross-attention reads the committed target rows, never a pending tree", "[glide]") {
    const Config tcfg = test::tiny_config(true);
    const Weights tw = random_weights(tcfg, 1, 0.3f);
    CpuModel target(tcfg, tw), other(tcfg, tw);
    const GlideConfig cfg = small_glide(tcfg, true, 2);
    GlideModel glide(cfg, random_glide_weights(cfg, 2, 0.3f), target);
    const std::vector<int> prompt = tokens_of(6, tcfg.vocab_size, 3), chain = tokens_of(9, tcfg.vocab_size, 4);
    detail::prefill(target, prompt);
    const std::vector<float> committed = chain_logits(glide, chain);

    target.forward(Tree::chain(tokens_of(5, tcfg.vocab_size, 5)), 0);  // pending rows after the committed ones
    CHECK(chain_logits(glide, chain) == committed);

    // A target that committed more and was truncated back holds the same committed rows.
    detail::prefill(other, prompt);
    detail::prefill(other, tokens_of(4, tcfg.vocab_size, 6));
    other.truncate(6);
    GlideModel beside_other(cfg, glide.weights(), other);
    CHECK(chain_logits(beside_other, chain) == committed);
    other.reset();  // and the committed rows do matter
    CHECK(chain_logits(beside_other, chain) != committed);
}

TEST_CASE("a query at position j sees target rows below min(j, target length) and nothing else", "[glide]") {
    HandTarget target;
    target.len = 5;
    const int kvd = target.kv_heads * target.head_dim;
    for (int l = 0; l < target.layers; ++l) {
        detail::NormalStream normal{static_cast<std::uint64_t>(10 + l)};
        target.k.emplace_back(8 * kvd), target.v.emplace_back(8 * kvd);
        for (float& x : target.k[l]) x = normal.next();
        for (float& x : target.v[l]) x = normal.next();
    }
    const GlideConfig cfg = small_glide(hand_target_config(target), true, 2);  // reads target layers 1 and 2
    GlideModel glide(cfg, random_glide_weights(cfg, 7, 0.3f), target);
    const int n = 9, V = cfg.draft.vocab_size;
    const std::vector<int> chain = tokens_of(n, V, 8);
    const std::vector<float> base = chain_logits(glide, chain);
    const auto changed = [&](int layer, int row) {
        const std::vector<float> saved_k = target.k[layer], saved_v = target.v[layer];
        for (int i = 0; i < kvd; ++i) target.k[layer][row * kvd + i] += 1.0f, target.v[layer][row * kvd + i] += 1.0f;
        const std::vector<float> now = chain_logits(glide, chain);
        target.k[layer] = saved_k, target.v[layer] = saved_v;
        std::vector<bool> out(n);
        for (int j = 0; j < n; ++j)
            out[j] = max_abs_diff(std::span(now).subspan(j * V, V), std::span(base).subspan(j * V, V)) > 0.0f;
        return out;
    };
    for (int layer : {1, 2})
        for (int row = 0; row < target.len; ++row) {
            const std::vector<bool> c = changed(layer, row);
            for (int j = 0; j < n; ++j) {
                INFO("target layer " << layer << ", row " << row << ", query at position " << j);
                CHECK(c[j] == (row < std::min(j, target.len)));
            }
        }
    // Rows past the committed length and layers the drafter does not read change nothing.
    for (int j = 0; j < n; ++j) CHECK_FALSE(changed(2, 6)[j]);
    for (int j = 0; j < n; ++j) CHECK_FALSE(changed(0, 1)[j]);

    SECTION("without any target row, the cross-attention output is zero") {
        target.len = 0;
        GlideConfig no_cross = cfg;
        no_cross.glide_cross_attention = false;
        GlideWeights w = glide.weights();
        GlideModel vanilla(no_cross, w, target);
        CHECK(max_abs_diff(chain_logits(glide, chain), chain_logits(vanilla, chain)) == 0.0f);
    }
}

TEST_CASE("a GLIDE tree forward gives every node the logits of its branch decoded alone", "[glide]") {
    const Config tcfg = test::tiny_config(true);
    CpuModel target(tcfg, random_weights(tcfg, 11, 0.3f));
    detail::prefill(target, tokens_of(5, tcfg.vocab_size, 12));
    const GlideConfig cfg = small_glide(tcfg, true, 2);
    const GlideWeights w = random_glide_weights(cfg, 13, 0.3f);
    GlideModel glide(cfg, w, target), alone(cfg, w, target);
    const std::vector<int> prefix = tokens_of(5, tcfg.vocab_size, 14);
    Tree tree;
    tree.add_root(3);
    for (int i = 1; i < 10; ++i) tree.add((7 * i) % tcfg.vocab_size, (i - 1) / 2);
    detail::prefill(glide, prefix);
    const std::vector<float> logits = copy_rows(glide.forward(tree, 0));
    for (int i = 0; i < tree.size(); ++i) {
        std::vector<int> branch = prefix;
        for (int node : tree.path_to(i)) branch.push_back(tree[node].token);
        alone.reset();
        detail::prefill(alone, std::span(branch).first(branch.size() - 1));
        const std::vector<float> last = copy_rows(alone.forward(Tree::chain(std::vector<int>{branch.back()}), 0));
        INFO("node " << i);
        CHECK(max_abs_diff(std::span(logits).subspan(i * tcfg.vocab_size, tcfg.vocab_size), last) < 1e-4f);
    }
}

// ---------------------------------------------------------------------------------------------------
// Training

TEST_CASE("the drafter's logits equal the training forward's under the inference mask", "[glide][train]") {
    const bool cross = GENERATE(true, false);
    const bool gqa = GENERATE(true, false);
    const Config tcfg = test::tiny_config(gqa);
    CpuModel target(tcfg, random_weights(tcfg, 21, 0.3f));
    const int t = 7, n = 10;
    detail::prefill(target, tokens_of(t, tcfg.vocab_size, 22));
    const GlideConfig cfg = small_glide(tcfg, cross, 2, /*tied=*/false);
    const GlideWeights w = random_glide_weights(cfg, 23, 0.3f);
    GlideModel glide(cfg, w, target);
    const std::vector<int> chain = tokens_of(n, tcfg.vocab_size, 24);
    const std::vector<float> inference = chain_logits(glide, chain);

    ThreadPool pool(2);
    TrainableGlide<float> model(cfg, w, pool);
    const TargetKv<float> kv = kv_of(target, cfg);
    const std::vector<std::uint8_t> mask = glide_inference_mask(n, t, t);
    model.forward(GlideBatch<float>{.B = 1, .T = n, .tokens = chain, .target = &kv, .cross_mask = mask});
    CHECK(max_abs_diff(model.logits(), inference) < 1e-4f);
}

/// A RoPE scaling of each kind, for the tiny target's head_dim 8 (4 rotary pairs).
std::vector<RopeScaling> rope_scalings() {
    return {{.type = RopeScalingType::kLinear, .factor = 2.0f},
            {.type = RopeScalingType::kLlama3, .factor = 8.0f, .original_max_position_embeddings = 16},
            {.type = RopeScalingType::kYarn, .factor = 4.0f, .original_max_position_embeddings = 32, .attention_factor = 1.25f},
            {.type = RopeScalingType::kFactors, .factors = {1.0f, 2.0f, 4.0f, 8.0f}}};
}

TEST_CASE("beside a target with RoPE scaling the cross queries turn as the target's keys", "[glide][train]") {
    const RopeScaling scaling = rope_scalings()[static_cast<std::size_t>(GENERATE(0, 1, 2, 3))];
    INFO(detail::rope_scaling_string(scaling));
    Config tcfg = test::tiny_config(true);
    tcfg.rope_scaling = scaling;
    const GlideConfig cfg = small_glide(tcfg, true, 2, /*tied=*/false);
    REQUIRE(detail::same_rope_scaling(cfg.glide_target_rope_scaling, scaling));
    // The cross queries' frequencies and cos/sin factor are the target's own (its keys were rotated by them).
    CHECK(rope_inverse_frequencies(cfg.cross_rope()) == rope_inverse_frequencies(tcfg));
    CHECK(rope_attention_factor(cfg.cross_rope()) == rope_attention_factor(tcfg));

    CpuModel target(tcfg, random_weights(tcfg, 25, 0.3f));
    const int t = 7, n = 10;
    detail::prefill(target, tokens_of(t, tcfg.vocab_size, 26));
    const GlideWeights w = random_glide_weights(cfg, 27, 0.3f);
    GlideModel glide(cfg, w, target);
    const std::vector<int> chain = tokens_of(n, tcfg.vocab_size, 28);
    const std::vector<float> inference = chain_logits(glide, chain);

    // Inference and training agree under the scaling...
    ThreadPool pool(2);
    const TargetKv<float> kv = kv_of(target, cfg);
    const std::vector<std::uint8_t> mask = glide_inference_mask(n, t, t);
    const GlideBatch<float> batch{.B = 1, .T = n, .tokens = chain, .target = &kv, .cross_mask = mask};
    TrainableGlide<float> model(cfg, w, pool);
    model.forward(batch);
    CHECK(max_abs_diff(model.logits(), inference) < 1e-4f);
    // ...and the scaling reaches them: the same drafter with unscaled cross queries reads other angles.
    GlideConfig unscaled = cfg;
    unscaled.glide_target_rope_scaling = {};
    TrainableGlide<float> unscaled_model(unscaled, w, pool);
    unscaled_model.forward(batch);
    CHECK(max_abs_diff(unscaled_model.logits(), inference) > 1e-3f);
    // Such a drafter is refused beside the scaled target, naming both scalings.
    CHECK_THROWS_WITH(GlideModel(unscaled, w, target), Catch::Contains("glide_target_rope_scaling is no scaling") &&
                                                           Catch::Contains("the target has rope_scaling " +
                                                                           detail::rope_scaling_string(scaling)));
    // The scaling round-trips through config.json.
    const fs::path dir = fresh_dir("glide_scaled");
    save_glide_checkpoint(dir, cfg, w, SaveFormat::kF32);
    const GlideCheckpoint back = load_glide_checkpoint(dir);
    CHECK(detail::same_rope_scaling(back.config.glide_target_rope_scaling, scaling));
    GlideModel reloaded(back.config, back.weights, target);
    CHECK(chain_logits(reloaded, chain) == inference);
}

TEST_CASE("the block-wise mask is GLIDE's: block b sees the target rows of blocks before b only", "[glide][train]") {
    const std::vector<std::uint8_t> m = glide_block_mask(12, 12, 5);
    for (int j = 0; j < 12; ++j)
        for (int k = 0; k < 12; ++k) CHECK(m[j * 12 + k] == (k / 5 < j / 5 ? 1 : 0));
    CHECK(std::count(m.begin(), m.begin() + 5 * 12, 1) == 0);  // the first block sees nothing
    CHECK(std::count(m.begin() + 9 * 12, m.begin() + 10 * 12, 1) == 5);  // position 9: rows 0..4
    CHECK(std::count(m.begin() + 10 * 12, m.begin() + 11 * 12, 1) == 10);  // position 10: rows 0..9
    CHECK_THROWS_WITH(glide_block_mask(4, 4, 0), Catch::Contains("block_length must be > 0, got 0"));

    SECTION("a query in block b is unaffected by target rows of blocks b and later") {
        const Config tcfg = test::tiny_config(true);
        const GlideConfig cfg = small_glide(tcfg, true, 2);
        ThreadPool pool(1);
        TrainableGlide<float> model(cfg, random_glide_weights(cfg, 31, 0.3f), pool);
        const int T = 12, kvd = tcfg.kv_dim(), V = tcfg.vocab_size;
        TargetKv<float> kv{1, T, {}, {}};
        detail::NormalStream normal{32};
        for (int m2 = 0; m2 < 2; ++m2) {
            kv.k.emplace_back(T * kvd), kv.v.emplace_back(T * kvd);
            for (float& x : kv.k[m2]) x = normal.next();
            for (float& x : kv.v[m2]) x = normal.next();
        }
        const std::vector<int> tokens = tokens_of(T, V, 33);
        const auto logits = [&] {
            model.forward(GlideBatch<float>{.B = 1, .T = T, .tokens = tokens, .target = &kv, .cross_mask = m});
            return std::vector<float>(model.logits().begin(), model.logits().end());
        };
        const std::vector<float> base = logits();
        for (int row : {0, 4, 5, 9, 10, 11}) {
            const TargetKv<float> saved = kv;
            for (auto* t : {&kv.k[1], &kv.v[1]})
                for (int i = 0; i < kvd; ++i) (*t)[row * kvd + i] += 1.0f;
            const std::vector<float> now = logits();
            kv = saved;
            for (int j = 0; j < T; ++j) {
                INFO("target row " << row << " (block " << row / 5 << "), query " << j << " (block " << j / 5 << ")");
                const bool moved = max_abs_diff(std::span(now).subspan(j * V, V), std::span(base).subspan(j * V, V)) > 0;
                CHECK(moved == (row / 5 < j / 5));
            }
        }
    }
}

TEST_CASE("the whole drafter's gradients match finite differences in float64", "[glide][train]") {
    const bool cross = GENERATE(true, false);
    CAPTURE(cross);
    Config tcfg = test::tiny_config(true, 11);
    tcfg.hidden_size = 16;  // head_dim 4
    Config draft{.hidden_size = 8, .intermediate_size = 12, .num_hidden_layers = 2, .num_attention_heads = 2,
                 .num_key_value_heads = 1, .vocab_size = 11, .max_position_embeddings = 16,
                 .tie_word_embeddings = !cross};
    const GlideConfig cfg = glide_config_for(draft, tcfg, cross);
    ThreadPool pool(1);
    TrainableGlide<double> model(cfg, params_cast<double>(random_glide_weights(cfg, 41, 0.4f), cfg), pool);
    const int B = 2, T = 6, kvd = tcfg.kv_dim();
    TargetKv<double> kv{B, T, {}, {}};
    detail::NormalStream normal{42};
    for (int m = 0; m < 2; ++m) {
        kv.k.emplace_back(B * T * kvd), kv.v.emplace_back(B * T * kvd);
        for (double& x : kv.k[m]) x = normal.next();
        for (double& x : kv.v[m]) x = normal.next();
    }
    const std::vector<int> tokens = tokens_of(B * T, 11, 43);
    std::vector<int> targets = tokens_of(B * T, 11, 44);
    targets[4] = kIgnoreIndex;
    const std::vector<std::uint8_t> mask = glide_block_mask(T, T, 2);
    const auto loss = [&] {
        model.forward(GlideBatch<double>{.B = B, .T = T, .tokens = tokens, .target = &kv, .cross_mask = mask});
        return model.cross_entropy(targets);
    };
    model.zero_grad();
    loss();
    model.backward();
    const GlideParams<double> analytic = model.grads();
    std::vector<const std::vector<double>*> grads;
    for_each_tensor(analytic, cfg, [&](const std::string&, const std::vector<double>& g, const auto&) { grads.push_back(&g); });
    std::size_t index = 0;
    for_each_tensor(model.params(), cfg, [&](const std::string& name, std::vector<double>& p, const auto&) {
        const std::vector<double>& g = *grads[index++];
        const double h = 1e-5;
        double worst = 0;
        for (std::size_t i = 0; i < p.size(); ++i) {
            const double saved = p[i];
            p[i] = saved + h;
            const double plus = loss();
            p[i] = saved - h;
            const double minus = loss();
            p[i] = saved;
            const double fd = (plus - minus) / (2 * h);
            worst = std::max(worst, std::abs(fd - g[i]) / std::max(1.0, std::abs(fd)));
        }
        INFO(name << ": worst relative error " << worst);
        CHECK(worst < 1e-6);
    });
}

// ---------------------------------------------------------------------------------------------------
// End to end

TEST_CASE("greedy speculative decoding with a GLIDE drafter equals plain greedy decoding", "[glide][lossless]") {
    const bool cross = GENERATE(true, false);
    CAPTURE(cross);
    const Config tcfg = test::tiny_config(true);
    int accepted = 0, rejected = 0, all_accepted = 0;
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
        const Weights tw = random_weights(tcfg, seed, 0.4f);
        CpuModel target(tcfg, tw);
        // A drafter of the target's own shape reading both target layers, near the target.
        GlideConfig cfg = glide_config_for(tcfg, tcfg, cross);
        GlideModel glide(cfg, near_target(cfg, tw, seed + 50), target);
        ModelProposer proposer(glide);
        Chain builder{.gamma = 4};
        TreeVerifier verifier;
        GreedyMatch acceptor;
        const std::vector<int> prompt{static_cast<int>(seed % 60), 3, 17, 42};
        const GenerateOptions opts{.max_new_tokens = 40, .seed = seed};
        const Generation plain = autoregressive_generate(target, prompt, opts);
        const Generation spec = speculative_generate(target, proposer, builder, verifier, acceptor, prompt, opts);
        REQUIRE(plain.tokens.size() == 40);
        CHECK(spec.tokens == plain.tokens);
        for (const StepRecord& s : spec.steps) {
            accepted += s.n_accepted;
            rejected += s.n_accepted < s.depth;
            all_accepted += s.n_accepted == s.depth;
        }
    }
    CHECK(accepted > 0);  // some drafts were accepted ...
    CHECK(rejected > 0);  // ... and some were not: the check is not vacuous
    CHECK(all_accepted > 0);  // whole chains too: the drafter then catches up on its unscored last draft
}

// ---------------------------------------------------------------------------------------------------
// Checkpoints and bad input

TEST_CASE("a GLIDE checkpoint round-trips, and the vanilla drafter is a Llama checkpoint", "[glide][checkpoint]") {
    const Config tcfg = test::tiny_config(true);
    CpuModel target(tcfg, random_weights(tcfg, 51, 0.3f));
    detail::prefill(target, tokens_of(6, tcfg.vocab_size, 52));
    const std::vector<int> chain = tokens_of(8, tcfg.vocab_size, 53);
    SECTION("with cross-attention") {
        const GlideConfig cfg = small_glide(tcfg, true, 2, false);
        const GlideWeights w = random_glide_weights(cfg, 54, 0.3f);
        const fs::path dir = fresh_dir("glide");
        save_glide_checkpoint(dir, cfg, w, SaveFormat::kF32);
        const GlideCheckpoint back = load_glide_checkpoint(dir);
        CHECK(back.config.glide_cross_heads == cfg.glide_cross_heads);
        CHECK(back.config.glide_target_kv_heads == cfg.glide_target_kv_heads);
        CHECK(back.config.glide_target_layers == cfg.glide_target_layers);
        GlideModel a(cfg, w, target), b(back.config, back.weights, target);
        CHECK(chain_logits(a, chain) == chain_logits(b, chain));
        // read as a plain Llama it would lose its cross-attention: refused, pointing to the right loader
        CHECK_THROWS_WITH(load_checkpoint(dir), Catch::Contains("load_glide_checkpoint"));
    }
    SECTION("without: load_checkpoint and CpuModel read it as a Llama") {
        const GlideConfig cfg = small_glide(tcfg, false, 2);
        const GlideWeights w = random_glide_weights(cfg, 55, 0.3f);
        const fs::path dir = fresh_dir("glide_vanilla");
        save_glide_checkpoint(dir, cfg, w, SaveFormat::kBF16);
        const Checkpoint llama = load_checkpoint(dir);
        CpuModel as_llama(llama.config, llama.weights);
        const GlideCheckpoint back = load_glide_checkpoint(dir);
        CHECK_FALSE(back.config.glide_cross_attention);
        GlideModel as_glide(back.config, back.weights, target);
        CHECK(max_abs_diff(chain_logits(as_llama, chain), chain_logits(as_glide, chain)) < 1e-4f);
    }
}

TEST_CASE("a drafter that does not fit its target, or a broken checkpoint, is an error naming the value",
          "[glide][errors]") {
    const Config tcfg = test::tiny_config(true);  // 2 layers, 4 heads of 8, 2 kv heads
    CpuModel target(tcfg, random_weights(tcfg, 61, 0.3f));
    const GlideConfig good = small_glide(tcfg, true);
    const auto build = [&](const GlideConfig& cfg) {
        [[maybe_unused]] const GlideModel model(cfg, random_glide_weights(cfg, 62), target);
    };
    GlideConfig bad = good;
    bad.glide_cross_heads = 8;
    CHECK_THROWS_WITH(build(bad), Catch::Contains("glide_cross_heads is 8") && Catch::Contains("num_attention_heads 4"));
    bad = good;
    bad.glide_cross_head_dim = 4;
    CHECK_THROWS_WITH(build(bad), Catch::Contains("glide_cross_head_dim is 4") && Catch::Contains("head_dim 8"));
    bad = good;
    bad.glide_target_kv_heads = 4;
    CHECK_THROWS_WITH(build(bad), Catch::Contains("glide_target_kv_heads is 4") && Catch::Contains("num_key_value_heads 2"));
    bad = good;
    bad.glide_target_layers = 3;
    CHECK_THROWS_WITH(build(bad), Catch::Contains("glide_target_layers is 3") && Catch::Contains("num_hidden_layers 2"));
    bad = good;
    bad.glide_target_layers = 0;
    CHECK_THROWS_WITH(build(bad), Catch::Contains("glide_target_layers (N_T) 0"));
    GlideWeights short_weights = random_glide_weights(good, 63);
    short_weights.layers[0].cross_wo.pop_back();
    CHECK_THROWS_WITH(GlideModel(good, short_weights, target), Catch::Contains("model.layers.0.cross_attn.o_proj.weight"));

    SECTION("a checkpoint without its cross-attention tensors") {
        const fs::path dir = fresh_dir("glide_missing");
        GlideConfig vanilla = good;
        vanilla.glide_cross_attention = false;
        save_glide_checkpoint(dir, vanilla, random_glide_weights(vanilla, 64));
        save_glide_config(good, dir / "config.json");
        CHECK_THROWS_WITH(load_glide_checkpoint(dir),
                          Catch::Contains("'model.layers.0.cross_attn_layernorm.weight' is missing"));
    }
    SECTION("a checkpoint whose cross-attention has another shape") {
        const fs::path dir = fresh_dir("glide_shape");
        save_glide_checkpoint(dir, good, random_glide_weights(good, 65));
        GlideConfig wider = good;
        wider.glide_cross_heads = 8;
        save_glide_config(wider, dir / "config.json");
        CHECK_THROWS_WITH(load_glide_checkpoint(dir), Catch::Contains("'model.layers.0.cross_attn.q_proj.weight' has shape"));
    }
    SECTION("a cross-attention width that overflows an int, named with the bytes it would need") {
        // 16777217 x 256 wraps to exactly 256 as an int: the width of a 32-head, 8-dim target's tensors.
        const fs::path dir = fresh_dir("glide_overflow");
        save_glide_checkpoint(dir, good, random_glide_weights(good, 67));
        GlideConfig wrapped = good;
        wrapped.glide_cross_heads = 16777217;
        wrapped.glide_cross_head_dim = 256;
        wrapped.glide_target_kv_heads = 1;
        save_glide_config(wrapped, dir / "config.json");
        // q_proj and o_proj of the 1-layer, 16-wide drafter: 2 x 4294967552 x 16 x 4 bytes
        CHECK_THROWS_WITH(load_glide_checkpoint(dir),
                          Catch::StartsWith("[specdec.glide] ") &&
                              Catch::Contains("glide_cross_heads 16777217 x glide_cross_head_dim 256 = 4294967552 "
                                              "cross-attention dimensions: more than an int holds") &&
                              Catch::Contains("need 549755846656 bytes as float32"));
    }
    SECTION("a drafter trained beside another RoPE scaling, or a broken glide_target_rope_scaling") {
        Config llama3 = tcfg;
        llama3.rope_scaling = {.type = RopeScalingType::kLlama3, .factor = 8.0f, .original_max_position_embeddings = 16};
        CpuModel scaled(llama3, random_weights(llama3, 68, 0.3f));
        GlideConfig other = small_glide(llama3, true);
        other.glide_target_rope_scaling.factor = 4.0f;
        CHECK_THROWS_WITH(GlideModel(other, random_glide_weights(other, 69), scaled),
                          Catch::Contains("glide_target_rope_scaling is llama3, factor 4.0") &&
                              Catch::Contains("the target has rope_scaling llama3, factor 8.0"));
        CHECK_THROWS_WITH(GlideModel(small_glide(llama3, true), random_glide_weights(other, 69), target),
                          Catch::Contains("but the target has rope_scaling no scaling"));
        GlideConfig table = good;
        table.glide_target_rope_scaling = {.type = RopeScalingType::kFactors, .factors = {1.0f, 2.0f}};
        CHECK_THROWS_WITH(table.validate(), Catch::Contains("glide_target_rope_scaling holds 2 factors; "
                                                            "glide_cross_head_dim 8 needs 4"));
        table.glide_target_rope_scaling.factors = {1.0f, 2.0f, -1.0f, 1.0f};
        CHECK_THROWS_WITH(table.validate(), Catch::Contains("glide_target_rope_scaling: ") &&
                                                Catch::Contains("factors[2] must be > 0"));

        const fs::path dir = fresh_dir("glide_bad_rope");
        save_glide_checkpoint(dir, good, random_glide_weights(good, 70));
        const auto with_rope = [&](const std::string& object) {
            std::string text = detail::read_text_file(dir / "config.json", "test");
            const std::size_t at = text.find("\"glide_target_rope_theta\"");
            REQUIRE(at != std::string::npos);
            text.insert(at, "\"glide_target_rope_scaling\": " + object + ",\n  ");
            std::ofstream(dir / "config.json", std::ios::binary) << text;
        };
        const std::string saved = detail::read_text_file(dir / "config.json", "test");
        CHECK(saved.find("glide_target_rope_scaling") == std::string::npos);  // unscaled: the key is not written
        with_rope(R"({"rope_type": "llama3", "factor": 8.0})");
        CHECK_THROWS_WITH(load_glide_checkpoint(dir), Catch::Contains("glide_target_rope_scaling") &&
                                                          Catch::Contains("low_freq_factor"));
        std::ofstream(dir / "config.json", std::ios::binary) << saved;
        with_rope(R"({"rope_type": "linear", "factor": 2.0, "low_freq_factor": 1.0})");
        CHECK_THROWS_WITH(load_glide_checkpoint(dir), Catch::Contains("'glide_target_rope_scaling.low_freq_factor'"));
        std::ofstream(dir / "config.json", std::ios::binary) << saved;
        with_rope(R"({"rope_type": "factors", "factors": [1, 2, "4", 8]})");
        CHECK_THROWS_WITH(load_glide_checkpoint(dir), Catch::Contains("'glide_target_rope_scaling.factors' holds \"4\""));
        std::ofstream(dir / "config.json", std::ios::binary) << saved;
        with_rope(R"({"rope_type": "factors", "factors": [1, 2, 4, 8], "factor": 2})");
        CHECK_THROWS_WITH(load_glide_checkpoint(dir), Catch::Contains("'glide_target_rope_scaling.factor' is not read"));
        std::ofstream(dir / "config.json", std::ios::binary) << saved;
        with_rope(R"({"rope_type": "factors", "factors": [1, 2, 4, 8]})");
        CHECK(load_glide_checkpoint(dir).config.glide_target_rope_scaling.factors == std::vector<float>{1, 2, 4, 8});
    }
    SECTION("a config.json without the glide fields") {
        const fs::path dir = fresh_dir("glide_plain");
        save_checkpoint(dir, tcfg, random_weights(tcfg, 66));
        CHECK_THROWS_WITH(load_glide_checkpoint(dir), Catch::Contains("missing field 'glide_cross_attention'"));
    }
}

}  // namespace test_glide
