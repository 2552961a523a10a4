// HF configs as users have them: head_dim apart from hidden_size / heads, rope_scaling (linear,
// llama3, yarn), and the fields this Llama cannot honour refused by name.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_hf_config {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / ("specdec_test_" + name);
    fs::remove_all(d);
    fs::create_directories(d);
    return d;
}

void write_text(const fs::path& p, const std::string& s) { std::ofstream(p) << s; }

/// A config.json of the tiny shape with `extra` members appended (",\"k\": v" each).
std::string config_json(const std::string& extra) {
    return "{\"hidden_size\":32,\"intermediate_size\":48,\"num_hidden_layers\":2,\"num_attention_heads\":4,"
           "\"num_key_value_heads\":2,\"vocab_size\":64,\"max_position_embeddings\":128" +
           extra + "}";
}

Config load_text(const std::string& name, const std::string& text) {
    const fs::path dir = fresh_dir(name);
    write_text(dir / "config.json", text);
    return load_config(dir / "config.json");
}

/// The plain Llama forward over `tokens` (positions 0..T-1, causal), written from HF's
/// LlamaForCausalLM in double: rotate-half RoPE at the frequencies `inv_freq` with cos and sin times
/// `attention` (HF's attention_scaling), GQA by head // group. Independent of CpuModel except for the
/// weights it reads; returns (T, V) logits.
std::vector<double> plain_forward(const Config& c, const Weights& w, const std::vector<int>& tokens,
                                  const std::vector<double>& inv_freq, double attention) {
    const int T = static_cast<int>(tokens.size()), D = c.hidden_size, H = c.num_attention_heads;
    const int Hkv = c.num_key_value_heads, hd = c.head_dim(), F = c.intermediate_size, V = c.vocab_size;
    const int group = H / Hkv;
    const auto linear = [](const std::vector<float>& W, const std::vector<double>& x, int out) {
        const int in = static_cast<int>(x.size());
        std::vector<double> y(out, 0.0);
        for (int o = 0; o < out; ++o)
            for (int i = 0; i < in; ++i) y[o] += double(W[static_cast<std::size_t>(o) * in + i]) * x[i];
        return y;
    };
    const auto rmsnorm = [&](const std::vector<double>& x, const std::vector<float>& g) {
        double ss = 0.0;
        for (double v : x) ss += v * v;
        const double r = 1.0 / std::sqrt(ss / x.size() + c.rms_norm_eps);
        std::vector<double> y(x.size());
        for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * g[i];
        return y;
    };
    const auto rope = [&](std::vector<double>& v, int heads, int pos) {
        for (int h = 0; h < heads; ++h)
            for (int j = 0; j < hd / 2; ++j) {
                const double a = pos * inv_freq[j], cs = attention * std::cos(a), sn = attention * std::sin(a);
                double& x1 = v[h * hd + j];
                double& x2 = v[h * hd + j + hd / 2];
                const double r1 = x1 * cs - x2 * sn, r2 = x2 * cs + x1 * sn;
                x1 = r1;
                x2 = r2;
            }
    };
    std::vector<std::vector<double>> x(T);
    for (int t = 0; t < T; ++t) x[t].assign(w.embed.begin() + tokens[t] * D, w.embed.begin() + (tokens[t] + 1) * D);
    for (int l = 0; l < c.num_hidden_layers; ++l) {
        const LayerWeights& lw = w.layers[l];
        std::vector<std::vector<double>> q(T), k(T), v(T);
        for (int t = 0; t < T; ++t) {
            const std::vector<double> h = rmsnorm(x[t], lw.attn_norm);
            q[t] = linear(lw.wq, h, H * hd);
            k[t] = linear(lw.wk, h, Hkv * hd);
            v[t] = linear(lw.wv, h, Hkv * hd);
            rope(q[t], H, t);
            rope(k[t], Hkv, t);
        }
        for (int t = 0; t < T; ++t) {
            std::vector<double> att(H * hd, 0.0);
            for (int h = 0; h < H; ++h) {
                const int kh = h / group;
                std::vector<double> s(t + 1);
                double mx = -1e300, sum = 0.0;
                for (int u = 0; u <= t; ++u) {
                    s[u] = 0.0;
                    for (int d = 0; d < hd; ++d) s[u] += q[t][h * hd + d] * k[u][kh * hd + d];
                    s[u] /= std::sqrt(double(hd));
                    mx = std::max(mx, s[u]);
                }
                for (double& e : s) sum += (e = std::exp(e - mx));
                for (int u = 0; u <= t; ++u)
                    for (int d = 0; d < hd; ++d) att[h * hd + d] += s[u] / sum * v[u][kh * hd + d];
            }
            const std::vector<double> o = linear(lw.wo, att, D);
            for (int i = 0; i < D; ++i) x[t][i] += o[i];
            const std::vector<double> h = rmsnorm(x[t], lw.mlp_norm);
            const std::vector<double> g = linear(lw.w_gate, h, F), up = linear(lw.w_up, h, F);
            std::vector<double> act(F);
            for (int i = 0; i < F; ++i) act[i] = g[i] / (1.0 + std::exp(-g[i])) * up[i];
            const std::vector<double> down = linear(lw.w_down, act, D);
            for (int i = 0; i < D; ++i) x[t][i] += down[i];
        }
    }
    std::vector<double> logits;
    for (int t = 0; t < T; ++t) {
        const std::vector<double> y = linear(w.output_matrix(), rmsnorm(x[t], w.norm), V);
        logits.insert(logits.end(), y.begin(), y.end());
    }
    return logits;
}

/// The same at theta^(-2j/hd) / `scale`, unscaled cos and sin.
std::vector<double> plain_forward(const Config& c, const Weights& w, const std::vector<int>& tokens, double scale) {
    std::vector<double> inv_freq(static_cast<std::size_t>(c.head_dim() / 2));
    for (std::size_t j = 0; j < inv_freq.size(); ++j) inv_freq[j] = std::pow(double(c.rope_theta), -2.0 * j / c.head_dim()) / scale;
    return plain_forward(c, w, tokens, inv_freq, 1.0);
}

/// YaRN's inverse frequencies as transformers' _compute_yarn_parameters (modeling_rope_utils.py) computes
/// them, in double: the dimension of r turns in the pretraining context, floor / ceil (truncate), the
/// clamped linear ramp, interpolation (/ factor) mixed with extrapolation.
std::vector<double> hf_yarn_frequencies(int dim, double base, double factor, double original, double beta_fast,
                                        double beta_slow, bool truncate) {
    const auto correction_dim = [&](double rotations) {
        return (dim * std::log(original / (rotations * 2 * std::numbers::pi))) / (2 * std::log(base));
    };
    double low = correction_dim(beta_fast), high = correction_dim(beta_slow);
    if (truncate) low = std::floor(low), high = std::ceil(high);
    low = std::max(low, 0.0), high = std::min(high, dim - 1.0);
    if (low == high) high += 0.001;
    std::vector<double> inv_freq(static_cast<std::size_t>(dim / 2));
    for (int j = 0; j < dim / 2; ++j) {
        const double pos_freq = std::pow(base, 2.0 * j / dim);
        const double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (factor * pos_freq);
        const double extrapolation_factor = 1.0 - std::clamp((j - low) / (high - low), 0.0, 1.0);
        inv_freq[static_cast<std::size_t>(j)] = interpolation * (1 - extrapolation_factor) + extrapolation * extrapolation_factor;
    }
    return inv_freq;
}

/// Largest |a - b| over the (T, V) logits.
double max_diff(const std::vector<double>& want, Rows got) {
    double worst = 0.0;
    for (std::size_t i = 0; i < want.size(); ++i) worst = std::max(worst, std::abs(want[i] - double(got.data[i])));
    return worst;
}

}  // namespace

TEST_CASE("a model whose head_dim is not hidden_size / heads matches a plain forward written from HF's Llama",
          "[checkpoint][head_dim]") {
    // D = 32 with 4 heads of 16 (not 8): q_proj is (64, 32), o_proj (32, 64), as in Gemma-like or
    // Mistral-Nemo-like configs; GQA 4 -> 2 and an untied head.
    Config cfg = test::tiny_config();
    cfg.attention_head_dim = 16;
    REQUIRE(cfg.head_dim() == 16);
    REQUIRE(cfg.q_dim() == 64);
    const Weights w = random_weights(cfg, 11, 0.3f);
    CHECK(w.layers[0].wq.size() == 64u * 32u);
    CHECK(w.layers[0].wo.size() == 32u * 64u);
    const std::vector<int> tokens{3, 17, 42, 5, 9, 60, 1, 33};
    const std::vector<double> want = plain_forward(cfg, w, tokens, 1.0);

    SECTION("the reference and the fast model, the whole text in one forward (float32 tolerance 2e-4)") {
        const bool reference = GENERATE(true, false);
        CpuModel model(cfg, w, ModelOptions{.reference = reference});
        CHECK(max_diff(want, model.forward(Tree::chain(tokens))) < 2e-4);
    }
    SECTION("through a checkpoint folder: config.json carries head_dim, and the logits are the same") {
        const fs::path dir = fresh_dir("ck_head_dim");
        save_checkpoint(dir, cfg, w, SaveFormat::kF32);
        Checkpoint ck = load_checkpoint(dir);
        CHECK(ck.config.head_dim() == 16);
        CpuModel model(ck.config, std::move(ck.weights), ModelOptions{.reference = true});
        CHECK(max_diff(want, model.forward(Tree::chain(tokens))) < 2e-4);
    }
    SECTION("the trainable model (what trains drafters) gives the same logits") {
        ThreadPool pool(1);
        train::TrainableLlama trainable(cfg, w, pool);
        trainable.forward(train::ModelInput{.B = 1, .T = static_cast<int>(tokens.size()), .tokens = tokens});
        const std::vector<float> got(trainable.logits().begin(), trainable.logits().end());
        CHECK(max_diff(want, Rows{got, cfg.vocab_size}) < 2e-4);
    }
    SECTION("decoded one token at a time, each step's logits are the whole text's rows") {
        CpuModel model(cfg, w);
        for (std::size_t t = 0; t < tokens.size(); ++t) {
            const Rows r = model.forward(Tree::chain(std::vector<int>{tokens[t]}));
            const std::vector<double> row(want.begin() + t * cfg.vocab_size, want.begin() + (t + 1) * cfg.vocab_size);
            CHECK(max_diff(row, r) < 2e-4);
            model.commit(std::vector<int>{0});
        }
    }
}

TEST_CASE("linear rope_scaling divides every frequency: the logits are those of positions / factor",
          "[checkpoint][rope]") {
    Config cfg = test::tiny_config();
    cfg.rope_scaling = RopeScaling{.type = RopeScalingType::kLinear, .factor = 4.0f};
    const Weights w = random_weights(cfg, 12, 0.3f);
    const std::vector<int> tokens{3, 17, 42, 5, 9, 60};
    CpuModel model(cfg, w, ModelOptions{.reference = true});
    const std::vector<double> want = plain_forward(cfg, w, tokens, 4.0);
    CHECK(max_diff(want, model.forward(Tree::chain(tokens))) < 2e-4);
    ThreadPool pool(1);
    train::TrainableLlama trainable(cfg, w, pool);
    trainable.forward(train::ModelInput{.B = 1, .T = static_cast<int>(tokens.size()), .tokens = tokens});
    const std::vector<float> got(trainable.logits().begin(), trainable.logits().end());
    CHECK(max_diff(want, Rows{got, cfg.vocab_size}) < 2e-4);  // the trainable model scales alike
}

TEST_CASE("rope_scaling llama3 gives HF's inverse frequencies", "[checkpoint][rope]") {
    // Llama-3.1-8B's config.json: hd 128, theta 500000, factor 8, low 1, high 4, original context 8192.
    const Config cfg = load_text("rope_llama3",
                                 "{\"hidden_size\":4096,\"intermediate_size\":14336,\"num_hidden_layers\":1,"
                                 "\"num_attention_heads\":32,\"num_key_value_heads\":8,\"vocab_size\":128256,"
                                 "\"max_position_embeddings\":131072,\"rope_theta\":500000.0,\"model_type\":\"llama\","
                                 "\"rope_scaling\":{\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                                 "\"original_max_position_embeddings\":8192,\"rope_type\":\"llama3\"}}");
    REQUIRE(cfg.rope_scaling.type == RopeScalingType::kLlama3);
    CHECK(cfg.max_position_embeddings == 131072);
    const std::vector<double> got = rope_inverse_frequencies(cfg);
    REQUIRE(got.size() == 64);
    // transformers, src/transformers/modeling_rope_utils.py, _compute_llama3_parameters:
    //   low_freq_wavelen = old_context_len / low_freq_factor; high_freq_wavelen = old_context_len / high_freq_factor
    //   wavelen = 2 * pi / inv_freq
    //   inv_freq_llama = where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    //   smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    //   smoothed = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    //   is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    //   inv_freq_llama = where(is_medium, smoothed, inv_freq_llama)
    int low = 0, medium = 0, high = 0;
    for (int j = 0; j < 64; ++j) {
        const double inv = 1.0 / std::pow(500000.0, 2.0 * j / 128.0), wavelen = 2.0 * std::numbers::pi / inv;
        double want = wavelen > 8192.0 / 1.0 ? inv / 8.0 : inv;
        if (!(wavelen < 8192.0 / 4.0) && !(wavelen > 8192.0 / 1.0)) {
            const double smooth = (8192.0 / wavelen - 1.0) / (4.0 - 1.0);
            want = (1.0 - smooth) * want / 8.0 + smooth * want;
            ++medium;
        } else {
            (wavelen > 8192.0 ? low : high)++;
        }
        CHECK_THAT(got[j], Catch::WithinRel(want, 1e-12));
    }
    // The three bands are all exercised: high frequencies kept, low ones / 8, a ramp between.
    CHECK(low > 0);
    CHECK(medium > 0);
    CHECK(high > 0);
    CHECK(got[0] == 1.0);
    CHECK_THAT(got[63], Catch::WithinRel(std::pow(500000.0, -126.0 / 128.0) / 8.0, 1e-12));
}

TEST_CASE("rope_scaling round-trips through config.json, and the older 'type' key reads", "[checkpoint][rope]") {
    Config cfg = test::tiny_config();
    cfg.rope_scaling = RopeScaling{.type = RopeScalingType::kLlama3, .factor = 32.0f, .low_freq_factor = 1.0f,
                                   .high_freq_factor = 4.0f, .original_max_position_embeddings = 64};
    cfg.attention_head_dim = 16;
    const fs::path dir = fresh_dir("rope_roundtrip");
    save_config(cfg, dir / "config.json");
    const Config back = load_config(dir / "config.json");
    CHECK(back.rope_scaling.type == RopeScalingType::kLlama3);
    CHECK(back.rope_scaling.factor == 32.0f);
    CHECK(back.rope_scaling.original_max_position_embeddings == 64);
    CHECK(back.attention_head_dim == 16);
    CHECK(rope_inverse_frequencies(back) == rope_inverse_frequencies(cfg));

    const Config linear = load_text("rope_type", config_json(",\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.0}"));
    CHECK(linear.rope_scaling.type == RopeScalingType::kLinear);
    CHECK(linear.rope_scaling.factor == 2.0f);
    const Config plain = load_text("rope_default", config_json(",\"rope_scaling\":{\"rope_type\":\"default\"}"));
    CHECK(plain.rope_scaling.type == RopeScalingType::kNone);
    // A head_dim equal to hidden_size / heads is the default, not an override.
    CHECK(load_text("head_dim_same", config_json(",\"head_dim\":8")).attention_head_dim == 0);
}

TEST_CASE("a 128k-position llama3-scaled config builds and runs a model without allocating per position",
          "[checkpoint][rope]") {
    Config cfg = test::tiny_config();
    cfg.max_position_embeddings = 131072;
    cfg.rope_scaling = RopeScaling{.type = RopeScalingType::kLlama3, .factor = 8.0f, .low_freq_factor = 1.0f,
                                   .high_freq_factor = 4.0f, .original_max_position_embeddings = 64};
    CpuModel model(cfg, random_weights(cfg, 3, 0.3f));
    CHECK(model.context_size() == 131072);
    // KV rows grow by doubling from what is used (kv_cache.hpp), so building it took no 131072-row
    // cache; the RoPE table is per forward's nodes, the frequencies per hd/2.
    const Rows r = model.forward(Tree::chain(std::vector<int>{1, 2, 3}));
    CHECK(r.rows() == 3);
    model.commit(std::vector<int>{0, 1, 2});
    CHECK(model.kv(0).len == 3);
}

TEST_CASE("config fields this Llama cannot honour are refused naming the field and value", "[checkpoint][errors]") {
    const auto refused = [](const std::string& name, const std::string& extra) {
        return [=] { (void)load_text(name, config_json(extra)); };
    };
    CHECK_THROWS_WITH(refused("gemma", ",\"model_type\":\"gemma\"")(),
                      Catch::StartsWith("[specdec.checkpoint] ") && Catch::Contains("config.json") &&
                          Catch::Contains("model_type 'gemma' is not supported") && Catch::Contains("qwen3"));
    CHECK_THROWS_WITH(refused("gpt2", ",\"model_type\":\"gpt2\"")(), Catch::Contains("model_type 'gpt2'"));
    CHECK_THROWS_WITH(refused("bias", ",\"attention_bias\":true")(), Catch::Contains("attention_bias = true"));
    CHECK_THROWS_WITH(refused("llama_window", ",\"sliding_window\":4096")(),
                      Catch::Contains("sliding_window = 4096 is not supported for model_type 'llama'"));
    for (const char* w : {"0", "-4", "4096.5", "\"4096\""}) {
        INFO("sliding_window " << w);
        CHECK_THROWS_WITH(refused("mistral_bad", std::string(",\"model_type\":\"mistral\",\"sliding_window\":") + w)(),
                          Catch::Contains("sliding_window"));
    }
    CHECK_THROWS_WITH(refused("mistral_zero", ",\"model_type\":\"mistral\",\"sliding_window\":0")(),
                      Catch::Contains("field 'sliding_window' = 0 must be a positive integer"));
    CHECK_THROWS_WITH(refused("mixtral", ",\"num_local_experts\":8")(), Catch::Contains("num_local_experts = 8"));
    CHECK_THROWS_WITH(refused("moe", ",\"num_experts\":60")(), Catch::Contains("num_experts = 60"));
    CHECK_THROWS_WITH(refused("gelu", ",\"hidden_act\":\"gelu\"")(), Catch::Contains("hidden_act 'gelu'"));
    CHECK_THROWS_WITH(refused("longrope", ",\"rope_scaling\":{\"rope_type\":\"longrope\",\"factor\":4.0}")(),
                      Catch::Contains("field 'rope_scaling.rope_type' = 'longrope' is not supported"));
    CHECK_THROWS_WITH(refused("dynamic", ",\"rope_scaling\":{\"type\":\"dynamic\",\"factor\":4.0}")(),
                      Catch::Contains("field 'rope_scaling.type' = 'dynamic'"));
    CHECK_THROWS_WITH(refused("rope_array", ",\"rope_scaling\":[1]")(), Catch::Contains("field 'rope_scaling' is"));
    CHECK_THROWS_WITH(refused("rope_nofactor", ",\"rope_scaling\":{\"rope_type\":\"linear\"}")(),
                      Catch::Contains("field 'rope_scaling.factor' is missing"));
    CHECK_THROWS_WITH(refused("rope_zero", ",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":0}")(),
                      Catch::Contains("rope_scaling.factor must be > 0"));
    CHECK_THROWS_WITH(refused("rope_band",
                              ",\"rope_scaling\":{\"rope_type\":\"llama3\",\"factor\":8,\"low_freq_factor\":4,"
                              "\"high_freq_factor\":4,\"original_max_position_embeddings\":8192}")(),
                      Catch::Contains("high_freq_factor 4.000000 must exceed low_freq_factor"));
    CHECK_THROWS_WITH(refused("head_dim_neg", ",\"head_dim\":-8")(), Catch::Contains("field 'head_dim' = -8"));
    CHECK_THROWS_WITH(refused("head_dim_odd", ",\"head_dim\":7")(), Catch::Contains("head_dim 7 must be even"));
    // Accepted: Mistral without a sliding window, a dense model saying num_experts 0, our own drafters' types.
    CHECK(load_text("mistral_ok", config_json(",\"model_type\":\"mistral\",\"sliding_window\":null")).hidden_size == 32);
    CHECK(load_text("dense_ok", config_json(",\"num_experts\":0")).hidden_size == 32);
}

TEST_CASE("Mistral's sliding window caps the context at the window, where full attention is exact", "[checkpoint]") {
    // Mistral 7B v0.1's config.json says max_position_embeddings 32768 and sliding_window 4096.
    const Config mistral = load_text("mistral_window", config_json(",\"model_type\":\"mistral\",\"sliding_window\":16"));
    CHECK(mistral.sliding_window == 16);
    CHECK(mistral.max_position_embeddings == 16);  // was 128
    const Config narrow = load_text("mistral_narrow", config_json(",\"model_type\":\"mistral\",\"sliding_window\":4096"));
    CHECK(narrow.sliding_window == 4096);
    CHECK(narrow.max_position_embeddings == 128);  // the window is wider than the context: nothing to cap

    // save_config writes it back as Mistral's, and it reads the same.
    const fs::path dir = fresh_dir("mistral_saved");
    save_config(mistral, dir / "config.json");
    const std::string text = detail::read_text_file(dir / "config.json", "test");
    CHECK(text.find("\"model_type\": \"mistral\"") != std::string::npos);
    CHECK(text.find("\"sliding_window\": 16") != std::string::npos);
    const Config back = load_config(dir / "config.json");
    CHECK(back.sliding_window == 16);
    CHECK(back.max_position_embeddings == 16);

    // The model holds the window and no more: every position it computes attends to all before it, as
    // transformers' window (k > q - 16) lets it; a request past the window is refused naming the context.
    CpuModel model(mistral, random_weights(mistral, 3, 0.3f));
    CHECK(model.context_size() == 16);
    GenerateOptions opts{.max_new_tokens = 6};
    const std::vector<int> prompt(10, 5);
    CHECK(autoregressive_generate(model, prompt, opts).tokens.size() == 6);
    opts.max_new_tokens = 7;
    CHECK_THROWS_WITH(autoregressive_generate(model, prompt, opts), Catch::Contains("exceeds the target's context of 16 tokens"));

    // A Config built by hand with a context past its window is refused: the windowed part is not implemented.
    Config wide = mistral;
    wide.max_position_embeddings = 17;
    CHECK_THROWS_WITH(wide.validate(), Catch::Contains("max_position_embeddings 17 exceeds sliding_window 16"));
    Config qwen = mistral;
    qwen.qkv_bias = true;
    CHECK_THROWS_WITH(qwen.validate(), Catch::Contains("sliding_window is Mistral's"));
}

TEST_CASE("transformers 5's rope_parameters reads as 4.x's rope_theta and rope_scaling", "[checkpoint][rope]") {
    const std::string scaling = "\"factor\":8.0,\"low_freq_factor\":1.0,\"high_freq_factor\":4.0,"
                                "\"original_max_position_embeddings\":32,\"rope_type\":\"llama3\"";
    const Config old_spelling =
        load_text("rope_4x", config_json(",\"rope_theta\":500000.0,\"rope_scaling\":{" + scaling + "}"));
    const Config new_spelling =
        load_text("rope_5x", config_json(",\"rope_parameters\":{\"rope_theta\":500000.0," + scaling + "}"));
    REQUIRE(old_spelling.rope_scaling.type == RopeScalingType::kLlama3);
    CHECK(new_spelling.rope_theta == 500000.0f);
    CHECK(new_spelling.rope_scaling.type == RopeScalingType::kLlama3);
    CHECK(new_spelling.rope_scaling.original_max_position_embeddings == 32);
    CHECK(rope_inverse_frequencies(new_spelling) == rope_inverse_frequencies(old_spelling));

    SECTION("rope_type default is theta alone, linear divides") {
        const Config plain = load_text("rope_5x_default",
                                       config_json(",\"rope_parameters\":{\"rope_theta\":20000.0,\"rope_type\":\"default\"}"));
        CHECK(plain.rope_theta == 20000.0f);
        CHECK(plain.rope_scaling.type == RopeScalingType::kNone);
        const Config linear = load_text(
            "rope_5x_linear", config_json(",\"rope_parameters\":{\"rope_theta\":10000.0,\"rope_type\":\"linear\",\"factor\":4}"));
        CHECK(linear.rope_scaling.type == RopeScalingType::kLinear);
        CHECK(linear.rope_scaling.factor == 4.0f);
    }
    SECTION("both spellings that agree load; that disagree are refused naming both") {
        const Config both = load_text("rope_both", config_json(",\"rope_theta\":500000.0,\"rope_scaling\":{" + scaling +
                                                               "},\"rope_parameters\":{\"rope_theta\":500000.0," + scaling + "}"));
        CHECK(rope_inverse_frequencies(both) == rope_inverse_frequencies(old_spelling));
        // A null rope_scaling is "not given", as transformers reads it.
        CHECK(load_text("rope_null", config_json(",\"rope_scaling\":null,\"rope_parameters\":{" + scaling + "}"))
                  .rope_scaling.type == RopeScalingType::kLlama3);
        CHECK_THROWS_WITH(load_text("rope_theta_differs", config_json(",\"rope_theta\":10000.0,\"rope_parameters\":"
                                                                      "{\"rope_theta\":500000.0,\"rope_type\":\"default\"}")),
                          Catch::StartsWith("[specdec.checkpoint] ") && Catch::Contains("config.json") &&
                              Catch::Contains("'rope_theta' = 10000.0") &&
                              Catch::Contains("'rope_parameters.rope_theta' = 5e+05") && Catch::Contains("disagree"));
        CHECK_THROWS_WITH(load_text("rope_scaling_differs",
                                    config_json(",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2},"
                                                "\"rope_parameters\":{\"rope_type\":\"linear\",\"factor\":4}")),
                          Catch::Contains("'rope_scaling' (linear, factor 2") &&
                              Catch::Contains("'rope_parameters' (linear, factor 4") && Catch::Contains("disagree"));
    }
    SECTION("an unknown rope_type or member is refused by name") {
        CHECK_THROWS_WITH(load_text("rope_5x_dynamic", config_json(",\"rope_parameters\":{\"rope_type\":\"dynamic\",\"factor\":4}")),
                          Catch::Contains("field 'rope_parameters.rope_type' = 'dynamic' is not supported"));
        CHECK_THROWS_WITH(
            load_text("rope_5x_extra", config_json(",\"rope_parameters\":{\"rope_type\":\"default\",\"factor\":4}")),
            Catch::Contains("field 'rope_parameters.factor' (integer 4) is not read for rope_type 'default'"));
        CHECK_THROWS_WITH(load_text("rope_4x_extra",
                                    config_json(",\"rope_scaling\":{\"rope_type\":\"linear\",\"factor\":2,\"rope_theta\":1}")),
                          Catch::Contains("field 'rope_scaling.rope_theta' (integer 1) is not read"));
    }
}

TEST_CASE("a config.json key the reader does not know is refused by name, a known-inert one accepted",
          "[checkpoint][errors]") {
    SECTION("unknown keys: named with their value and file") {
        CHECK_THROWS_WITH(load_text("unknown_key", config_json(",\"quantization_config\":{\"bits\":4}")),
                          Catch::StartsWith("[specdec.checkpoint] ") && Catch::Contains("config.json") &&
                              Catch::Contains("field 'quantization_config' (object of 1)") &&
                              Catch::Contains("refused rather than ignored"));
        CHECK_THROWS_WITH(load_text("unknown_scalar", config_json(",\"partial_rotary_factor\":0.5")),
                          Catch::Contains("field 'partial_rotary_factor' (number 0.5)"));
        // A drafter's key counts only for its own model_type: an EDD layer in a plain Llama is not read.
        CHECK_THROWS_WITH(load_text("edd_key_in_llama", config_json(",\"edd_target_layer\":1")),
                          Catch::Contains("field 'edd_target_layer'"));
    }
    SECTION("the keys transformers writes that leave the forward unchanged") {
        const Config c = load_text(
            "inert_keys",
            config_json(",\"architectures\":[\"LlamaForCausalLM\"],\"_name_or_path\":\"x\",\"transformers_version\":"
                        "\"5.17.0\",\"dtype\":\"bfloat16\",\"torch_dtype\":\"bfloat16\",\"bos_token_id\":1,\"eos_token_id\":[2,3],"
                        "\"pad_token_id\":null,\"use_cache\":true,\"initializer_range\":0.02,\"attention_dropout\":0.0,"
                        "\"pretraining_tp\":1"));
        CHECK(c.hidden_size == 32);
        CHECK(c.rope_scaling.type == RopeScalingType::kNone);
    }
    SECTION("keys of today's Hub folders: SmolLM2's, Qwen2.5's, transformers 4.48's") {
        const Config smol = load_text("smollm2", config_json(",\"is_llama_config\":true,\"rope_interleaved\":false,"
                                                             "\"transformers.js_config\":{\"dtype\":\"q4\"},"
                                                             "\"_attn_implementation_autoset\":true,\"hidden_act\":\"swish\""));
        CHECK(smol.hidden_size == 32);
        CHECK_THROWS_WITH(load_text("interleaved", config_json(",\"rope_interleaved\":true")),
                          Catch::Contains("rope_interleaved = true is not supported"));
        CHECK_THROWS_WITH(load_text("gelu", config_json(",\"hidden_act\":\"gelu\"")),
                          Catch::Contains("hidden_act 'gelu' is not supported (only silu, alias swish)"));
        const std::string qwen = ",\"model_type\":\"qwen2\",\"use_sliding_window\":false";
        CHECK(load_text("qwen25", config_json(qwen + ",\"use_mrope\":false")).qkv_bias);
        CHECK_THROWS_WITH(load_text("mrope", config_json(qwen + ",\"use_mrope\":true")),
                          Catch::Contains("use_mrope = true is not supported"));
        // use_mrope is Qwen's: a Llama naming it is refused as any unknown key.
        CHECK_THROWS_WITH(load_text("mrope_llama", config_json(",\"use_mrope\":false")), Catch::Contains("field 'use_mrope'"));
    }
    SECTION("a key left out takes its config class's default, as transformers reads the folder") {
        const std::string bare = "{\"hidden_size\":32,\"intermediate_size\":48,\"num_hidden_layers\":2,"
                                 "\"num_attention_heads\":4,\"vocab_size\":64";
        const Config llama = load_text("defaults_llama", bare + ",\"num_key_value_heads\":null}");
        CHECK(llama.num_key_value_heads == 4);  // null: one KV head per query head
        CHECK(llama.max_position_embeddings == 2048);
        CHECK(llama.rms_norm_eps == 1e-6f);
        CHECK(load_text("defaults_llama_kv", bare + "}").num_key_value_heads == 4);  // LlamaConfig: None, the same
        const Config qwen = load_text("defaults_qwen3", bare + ",\"model_type\":\"qwen3\",\"num_key_value_heads\":null}");
        CHECK(qwen.max_position_embeddings == 32768);
        // Mistral's and Qwen's classes default to 8 and 32 KV heads, not one per query head.
        const std::string wide = "{\"hidden_size\":256,\"intermediate_size\":48,\"num_hidden_layers\":2,"
                                 "\"num_attention_heads\":64,\"vocab_size\":64";
        CHECK(load_text("kv_mistral", wide + ",\"model_type\":\"mistral\"}").num_key_value_heads == 8);
        CHECK(load_text("kv_qwen2", wide + ",\"model_type\":\"qwen2\",\"use_sliding_window\":false}").num_key_value_heads == 32);
        CHECK(load_text("kv_qwen3_null", wide + ",\"model_type\":\"qwen3\",\"num_key_value_heads\":null}").num_key_value_heads == 64);
        CHECK_THROWS_WITH(load_text("kv_qwen3", bare + ",\"model_type\":\"qwen3\"}"),
                          Catch::Contains("field 'num_key_value_heads' is missing, and qwen3's default, 32, does not "
                                          "divide num_attention_heads 4"));
        // MistralConfig's window defaults to 4096: the context (131072 by default) is capped there.
        const Config mistral = load_text("defaults_mistral", bare + ",\"model_type\":\"mistral\",\"num_key_value_heads\":2}");
        CHECK(mistral.sliding_window == 4096);
        CHECK(mistral.max_position_embeddings == 4096);
        const Config v03 = load_text("mistral_v03", bare + ",\"model_type\":\"mistral\",\"sliding_window\":null,\"num_key_value_heads\":2}");
        CHECK(v03.sliding_window == 0);
        CHECK(v03.max_position_embeddings == 131072);
    }
    SECTION("every key save_config writes is one load_config knows") {
        Config cfg = test::tiny_config();
        cfg.attention_head_dim = 16;
        cfg.rope_scaling = RopeScaling{.type = RopeScalingType::kLinear, .factor = 2.0f};
        const fs::path dir = fresh_dir("save_keys");
        save_config(cfg, dir / "config.json", "bfloat16");
        const Config back = load_config(dir / "config.json");
        CHECK(back.attention_head_dim == 16);
        CHECK(back.rope_scaling.type == RopeScalingType::kLinear);
    }
}

TEST_CASE("rope_scaling yarn gives transformers' frequencies, and its attention factor scales cos and sin",
          "[checkpoint][rope][yarn]") {
    // Qwen3-8B's documented long-context setting: head_dim 128, theta 1e6, factor 4 over 32768 positions.
    const Config qwen = load_text("rope_yarn_qwen3",
                                  "{\"hidden_size\":4096,\"intermediate_size\":12288,\"num_hidden_layers\":1,"
                                  "\"num_attention_heads\":32,\"num_key_value_heads\":8,\"head_dim\":128,\"vocab_size\":151936,"
                                  "\"max_position_embeddings\":131072,\"rope_theta\":1000000,\"model_type\":\"qwen3\","
                                  "\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0,"
                                  "\"original_max_position_embeddings\":32768}}");
    REQUIRE(qwen.rope_scaling.type == RopeScalingType::kYarn);
    CHECK(qwen.rope_scaling.beta_fast == 32.0f);
    CHECK(qwen.rope_scaling.beta_slow == 1.0f);
    CHECK(qwen.rope_scaling.truncate);
    CHECK_THAT(rope_attention_factor(qwen), Catch::WithinRel(0.1 * std::log(4.0) + 1.0, 1e-6));  // the paper's sqrt(1/t)
    const std::vector<double> got = rope_inverse_frequencies(qwen);
    const std::vector<double> want = hf_yarn_frequencies(128, 1e6, 4.0, 32768, 32, 1, true);
    REQUIRE(got.size() == want.size());
    int kept = 0, ramp = 0, divided = 0;
    for (std::size_t j = 0; j < got.size(); ++j) {
        CHECK_THAT(got[j], Catch::WithinRel(want[j], 1e-12));
        const double plain = std::pow(1e6, -2.0 * static_cast<double>(j) / 128);
        if (std::abs(got[j] - plain) <= 1e-15 * plain) ++kept;
        else if (std::abs(got[j] - plain / 4) <= 1e-15 * plain) ++divided;
        else ++ramp;
    }
    CHECK(kept > 0);  // every band: high frequencies kept, low ones / 4, a ramp between
    CHECK(ramp > 0);
    CHECK(divided > 0);

    SECTION("the model's logits are those of HF's forward at these frequencies and this attention factor") {
        Config cfg = test::tiny_config();
        cfg.attention_head_dim = 32;  // 16 pairs: theta 1e6 over 4096 positions puts 3 kept, 5 on the ramp, 8 divided
        cfg.rope_theta = 1e6f;
        cfg.rope_scaling = RopeScaling{.type = RopeScalingType::kYarn, .factor = 4.0f, .original_max_position_embeddings = 4096};
        cfg.rope_scaling.attention_factor = static_cast<float>(detail::yarn_mscale(4.0));
        const Weights w = random_weights(cfg, 13, 0.3f);
        const std::vector<int> tokens{3, 17, 42, 5, 9, 60, 11, 2, 33, 7};
        const std::vector<double> freq = hf_yarn_frequencies(32, 1e6, 4.0, 4096, 32, 1, true);
        const std::vector<double> want_logits = plain_forward(cfg, w, tokens, freq, 0.1 * std::log(4.0) + 1.0);
        for (const bool reference : {true, false}) {
            CAPTURE(reference);
            CpuModel model(cfg, w, ModelOptions{.reference = reference});
            CHECK(max_diff(want_logits, model.forward(Tree::chain(tokens))) < 2e-4);
        }
        ThreadPool pool(1);
        train::TrainableLlama trainable(cfg, w, pool);  // the trainers rotate alike
        trainable.forward(train::ModelInput{.B = 1, .T = static_cast<int>(tokens.size()), .tokens = tokens});
        const std::vector<float> trained(trainable.logits().begin(), trainable.logits().end());
        CHECK(max_diff(want_logits, Rows{trained, cfg.vocab_size}) < 2e-4);
        // The controls: the attention factor left out, or the frequencies unscaled, are seen.
        CHECK(max_diff(plain_forward(cfg, w, tokens, freq, 1.0), CpuModel(cfg, w).forward(Tree::chain(tokens))) > 1e-3);
        CHECK(max_diff(plain_forward(cfg, w, tokens, 1.0), CpuModel(cfg, w).forward(Tree::chain(tokens))) > 1e-3);
    }
}

TEST_CASE("yarn's optional members read as transformers reads them, and round-trip through config.json",
          "[checkpoint][rope][yarn]") {
    const std::string base = "\"rope_type\":\"yarn\",\"factor\":8.0,\"original_max_position_embeddings\":64";
    const auto yarn = [&](const std::string& name, const std::string& extra) {
        return load_text(name, config_json(",\"rope_scaling\":{" + base + extra + "}")).rope_scaling;
    };
    CHECK(yarn("yarn_explicit", ",\"attention_factor\":1.5").attention_factor == 1.5f);
    // DeepSeek's spelling: mscale over mscale_all_dim, both given and non-zero.
    CHECK_THAT(yarn("yarn_mscale", ",\"mscale\":2.0,\"mscale_all_dim\":1.0").attention_factor,
               Catch::WithinRel((0.2 * std::log(8.0) + 1.0) / (0.1 * std::log(8.0) + 1.0), 1e-6));
    CHECK_THAT(yarn("yarn_mscale_alone", ",\"mscale\":2.0").attention_factor, Catch::WithinRel(0.1 * std::log(8.0) + 1.0, 1e-6));
    // transformers reads `beta_fast or 32`: 0 and null are the defaults.
    CHECK(yarn("yarn_beta_zero", ",\"beta_fast\":0,\"beta_slow\":null").beta_fast == 32.0f);
    const RopeScaling betas = yarn("yarn_betas", ",\"beta_fast\":16,\"beta_slow\":2,\"truncate\":false");
    CHECK(betas.beta_fast == 16.0f);
    CHECK(betas.beta_slow == 2.0f);
    CHECK_FALSE(betas.truncate);
    Config cfg = test::tiny_config();
    cfg.attention_head_dim = 32;
    cfg.rope_theta = 1e6f;
    cfg.rope_scaling = betas;
    const std::vector<double> want = hf_yarn_frequencies(32, 1e6, 8.0, 64, 16, 2, false);
    const std::vector<double> got = rope_inverse_frequencies(cfg);
    for (std::size_t j = 0; j < got.size(); ++j) CHECK_THAT(got[j], Catch::WithinRel(want[j], 1e-12));

    // Written whole, the attention factor as resolved: the same scaling reads back, in either spelling.
    const fs::path dir = fresh_dir("yarn_roundtrip");
    save_config(cfg, dir / "config.json");
    const Config back = load_config(dir / "config.json");
    CHECK(detail::same_rope_scaling(back.rope_scaling, cfg.rope_scaling));
    CHECK(rope_inverse_frequencies(back) == got);
    const Config five = load_text("yarn_5x", config_json(",\"rope_parameters\":{\"rope_theta\":1000000.0," + base + "}"));
    CHECK(detail::same_rope_scaling(five.rope_scaling, yarn("yarn_4x", "")));

    const auto refused = [&](const std::string& name, const std::string& scaling) {
        return [=] { (void)load_text(name, config_json(",\"rope_scaling\":{" + scaling + "}")); };
    };
    // Without original_max_position_embeddings transformers 5 takes max_position_embeddings (128 here).
    const Config no_original = load_text("yarn_no_original", config_json(",\"rope_scaling\":{\"rope_type\":\"yarn\",\"factor\":4.0}"));
    CHECK(no_original.rope_scaling.original_max_position_embeddings == 128);
    CHECK_THROWS_WITH(refused("yarn_no_factor", "\"rope_type\":\"yarn\",\"original_max_position_embeddings\":64")(),
                      Catch::Contains("field 'rope_scaling.factor' is missing (rope_type 'yarn' needs it)"));
    CHECK_THROWS_WITH(refused("yarn_shrink", "\"rope_type\":\"yarn\",\"factor\":0.5,\"original_max_position_embeddings\":64")(),
                      Catch::Contains("rope_scaling.factor must be >= 1 for yarn, got 0.5"));
    CHECK_THROWS_WITH(refused("yarn_betas_reversed", base + ",\"beta_fast\":1,\"beta_slow\":32")(),
                      Catch::Contains("rope_scaling.beta_fast 1.000000 must exceed beta_slow 32.000000"));
    CHECK_THROWS_WITH(refused("yarn_truncate_text", base + ",\"truncate\":\"yes\"")(),
                      Catch::Contains("field 'rope_scaling.truncate' is string \"yes\", expected true or false"));
    CHECK_THROWS_WITH(refused("yarn_unknown", base + ",\"low_freq_factor\":1")(),
                      Catch::Contains("field 'rope_scaling.low_freq_factor' (integer 1) is not read for rope_type 'yarn'"));
}

}  // namespace test_hf_config
