// The EAGLE layout (eagle_layout.hpp): EAGLE-1/2's drafter layer without its end norms in the model and
// the trainer, the folder SGLang's and vLLM's loaders read (names, shapes and config fields against the
// list read from their code), export -> import bit for bit, refusals by name, and greedy and T = 1
// losslessness of the imported drafter in EAGLE-2's tree.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "catch.hpp"
#include "gradient_check.hpp"
#include "helpers.hpp"

namespace test_eagle_layout {  // a unity build compiles several test files as one

using namespace specdec;
using namespace specdec::train;
namespace fs = std::filesystem;

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

/// An EAGLE-layout drafter for (tc, tw): random layer and connector, optionally a random fc bias.
FeatureCheckpoint eagle_drafter(const Config& tc, const Weights& tw, std::uint64_t seed, bool bias, float std_dev = 0.3f) {
    FeatureCheckpoint ck = initial_feature_drafter(tc, tw, Connector::kFc, false, seed, std_dev);
    ck.config.identity_end_norms = true;
    if (bias) {
        const std::vector<double> b = test::randn(static_cast<std::size_t>(tc.hidden_size), seed + 3, 0.3);
        ck.connector_weights.fc_bias.assign(b.begin(), b.end());
    }
    return ck;
}

fs::path scratch(const std::string& name) {
    const fs::path dir = fs::temp_directory_path() / ("specdec_eagle_layout_" + name);
    fs::remove_all(dir);
    return dir;
}

/// The message of the specdec::error `f` throws.
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const specdec::error& e) {
        return e.what();
    }
    FAIL("no error");
    return {};
}

/// Every (name, shape) of a safetensors file.
std::map<std::string, std::vector<std::int64_t>> tensors_of(const fs::path& file) {
    std::map<std::string, std::vector<std::int64_t>> out;
    const SafetensorsFile st = SafetensorsFile::open(file);
    for (const TensorInfo& t : st.tensors()) out[t.name] = t.shape;
    return out;
}

using test::read_json;

void write_json(const fs::path& file, const json::Value& v) {
    std::ofstream out(file, std::ios::binary);
    out << json::dump(v, 2) << "\n";
}

}  // namespace

TEST_CASE("EAGLE's layer reads no input norm on layer 0 and no final norm", "[eagle][layout]") {
    Config c = test::tiny_config();
    c.identity_end_norms = true;
    const Weights w = random_weights(c, 3, 0.3f);
    const std::vector<int> tokens = some_tokens(6, c.vocab_size, 1);
    CpuModel model(c, w);
    const Rows base = model.forward(Tree::chain(tokens));
    const std::vector<float> logits(base.data.begin(), base.data.end());
    SECTION("the two skipped norms' weights change nothing, the others do") {
        Weights other = w;
        for (float& v : other.layers[0].attn_norm) v *= 3.0f;
        for (float& v : other.norm) v *= -2.0f;
        CpuModel same(c, other);
        const Rows r = same.forward(Tree::chain(tokens));
        CHECK(std::vector<float>(r.data.begin(), r.data.end()) == logits);
        for (float& v : other.layers[1].attn_norm) v *= 3.0f;
        CpuModel changed(c, other);
        const Rows r2 = changed.forward(Tree::chain(tokens));
        CHECK(std::vector<float>(r2.data.begin(), r2.data.end()) != logits);
    }
    SECTION("the captured final state is the residual stream the head reads") {
        CpuModel m(c, w);
        m.capture_hidden({c.num_hidden_layers});
        const Rows r = m.forward(Tree::chain(tokens));
        const Rows h = m.hidden(0);
        const int D = c.hidden_size, V = c.vocab_size;
        for (int i = 0; i < static_cast<int>(tokens.size()); ++i)
            for (int v = 0; v < V; v += 5) {
                double z = 0;
                for (int d = 0; d < D; ++d) z += double(h.row(i)[d]) * w.output_matrix()[static_cast<std::size_t>(v) * D + d];
                CHECK(std::abs(z - r.row(i)[v]) < 1e-4 * (1 + std::abs(z)));
            }
    }
    SECTION("the trainable model computes the same logits, and its gradients match finite differences") {
        ThreadPool pool(2);
        TrainableLlama t(c, w, pool);
        const ModelInput in{.B = 1, .T = 6, .tokens = tokens};
        t.forward(in);
        float worst = 0;
        for (std::size_t i = 0; i < logits.size(); ++i) worst = std::max(worst, std::abs(logits[i] - t.logits()[i]));
        CHECK(worst < 1e-4f);
        const std::vector<int> targets = some_tokens(6, c.vocab_size, 9);
        const auto loss = [&](bool with_backward) {
            t.forward(in);
            const double l = t.cross_entropy(targets);
            if (with_backward) t.backward();
            return l;
        };
        test::check_model_gradient(t, c, loss);
    }
    SECTION("FSPAD's PAD and the EAGLE layer are refused together") {
        Config both = c;
        both.partial_alignment = true;
        CHECK_THAT(error_of([&] { both.validate(); }), Catch::Contains("identity_end_norms") && Catch::Contains("partial_alignment"));
    }
}

TEST_CASE("the EAGLE-layout feature drafter trains: gradients with an fc bias match finite differences", "[eagle][layout]") {
    Config tc = target_config(24);
    tc.hidden_size = 16;
    tc.intermediate_size = 24;
    const Weights tw = random_weights(tc, 30, 0.3f);
    CpuModel target(tc, tw);
    ThreadPool pool(2);
    const int B = 2, T = 7;
    WindowBatch w{B, T, some_tokens(B * T, tc.vocab_size, 5), some_tokens(B * T, tc.vocab_size, 6), {0, 0}};
    const FeatureBatch batch = feature_batch(w, hidden_teacher(target, pool, tc.num_hidden_layers, w), tw.embed, 3);
    TrainableFeatureDrafter d(eagle_drafter(tc, tw, 31, true), pool);
    REQUIRE(d.layer().config().identity_end_norms);
    const auto loss = [&](bool with_backward) { return d.forward_loss(batch, 0.1, with_backward).total; };
    test::check_model_gradient(d.layer(), d.layer().config(), loss);
    d.zero_grad();
    loss(true);
    const ConnectorWeights grads = d.connector_grads();
    test::check_tensor_gradient(d.connector_params(), grads, d.connector_shape(), loss, 0.02, 500);
    std::vector<std::string> names;
    for_each_tensor(grads, d.connector_shape(), [&](const std::string& n, const std::vector<float>&, std::size_t) { names.push_back(n); });
    CHECK(names == std::vector<std::string>{"fc.weight", "fc.bias"});

    // What a training row computes is what the drafter computes when it drafts (the root of text[0..7]).
    const std::vector<int> text(w.inputs.begin(), w.inputs.begin() + T);
    d.forward_loss(batch, 0.1, false);
    CpuModel live(tc, tw);
    FeatureDrafter drafter(d.checkpoint());
    FeatureProposer proposer(live, drafter);
    detail::prefill(live, std::span(text).first(T - 1), T - 1);
    proposer.start(text);
    Tree root;
    root.add_root(text.back());
    const Rows r = proposer.propose(root, std::vector<int>{0});
    const int V = tc.vocab_size;
    float worst = 0;
    for (int v = 0; v < V; ++v) worst = std::max(worst, std::abs(r.row(0)[v] - d.layer().logits()[static_cast<std::size_t>(T - 2) * V + v]));
    CHECK(worst < 1e-4f);
}

TEST_CASE("the exported folder holds the names, shapes and config fields SGLang's and vLLM's loaders read", "[eagle][layout]") {
    // Read from SGLang's and vLLM's llama_eagle.py and EAGLE's cnets.py (docs/formats.md cites the
    // commits): no "model." prefix, no input_layernorm on layer 0, no final norm, no lm_head; fc over
    // concat(embedding, feature); SGLang's fc has a bias, vLLM's has none.
    const Config tc = target_config();
    const Weights tw = random_weights(tc, 4, 0.3f);
    const FeatureCheckpoint ck = eagle_drafter(tc, tw, 5, false);
    const ServingEngine engine = GENERATE(ServingEngine::kSglang, ServingEngine::kVllm);
    CAPTURE(engine_name(engine));
    const fs::path dir = scratch(std::string("names_") + engine_name(engine));
    save_eagle_layout(dir, ck, engine, SaveFormat::kBF16);
    const std::int64_t D = 32, F = 48, V = 16, q = 32, kv = 16;
    std::map<std::string, std::vector<std::int64_t>> want{
        {"fc.weight", {D, 2 * D}},
        {"embed_tokens.weight", {V, D}},
        {"layers.0.self_attn.q_proj.weight", {q, D}},
        {"layers.0.self_attn.k_proj.weight", {kv, D}},
        {"layers.0.self_attn.v_proj.weight", {kv, D}},
        {"layers.0.self_attn.o_proj.weight", {D, q}},
        {"layers.0.post_attention_layernorm.weight", {D}},
        {"layers.0.mlp.gate_proj.weight", {F, D}},
        {"layers.0.mlp.up_proj.weight", {F, D}},
        {"layers.0.mlp.down_proj.weight", {D, F}},
    };
    if (engine == ServingEngine::kSglang) want["fc.bias"] = {D};
    CHECK(tensors_of(dir / "model.safetensors") == want);
    const SafetensorsFile st = SafetensorsFile::open(dir / "model.safetensors");
    for (const TensorInfo& t : st.tensors()) CHECK(t.dtype == DType::kBF16);

    const json::Value cfg = read_json(dir / "config.json");
    const json::Array& arch = cfg.at("architectures").as_array();
    REQUIRE(arch.size() == 1);
    CHECK(arch[0].as_string() == (engine == ServingEngine::kSglang ? "LlamaForCausalLMEagle" : "EagleLlamaForCausalLM"));
    CHECK(cfg.at("model_type").as_string() == "llama");
    CHECK(cfg.at("bias").as_bool() == (engine == ServingEngine::kSglang));
    CHECK(cfg.at("num_hidden_layers").as_int() == 1);
    CHECK(cfg.at("hidden_size").as_int() == D);
    CHECK(cfg.at("intermediate_size").as_int() == F);
    CHECK(cfg.at("num_attention_heads").as_int() == 4);
    CHECK(cfg.at("num_key_value_heads").as_int() == 2);
    CHECK(cfg.at("vocab_size").as_int() == V);
    CHECK(cfg.at("hidden_act").as_string() == "silu");
    CHECK(cfg.at("tie_word_embeddings").as_bool() == tc.tie_word_embeddings);
    CHECK(cfg.at("torch_dtype").as_string() == "bfloat16");
    for (const char* ours : {"connector", "target_config_hash", "layout", "sampler_intermediate_size", "partial_alignment"})
        CHECK(cfg.find(ours) == nullptr);
    CHECK(is_eagle_layout(dir));
    fs::remove_all(dir);
}

TEST_CASE("export then import gives the drafter back bit for bit, and it drafts the same", "[eagle][layout]") {
    const Config tc = target_config();
    const Weights tw = random_weights(tc, 6, 0.3f);
    const ServingEngine engine = GENERATE(ServingEngine::kSglang, ServingEngine::kVllm);
    const bool bias = engine == ServingEngine::kSglang;  // vLLM's fc has none
    CAPTURE(engine_name(engine));
    const FeatureCheckpoint ck = eagle_drafter(tc, tw, 7, bias);
    const fs::path dir = scratch(std::string("round_trip_") + engine_name(engine));
    save_eagle_layout(dir, ck, engine, SaveFormat::kF32);
    const FeatureCheckpoint back = load_feature_drafter(dir, tc, tw);
    CHECK(back.config.identity_end_norms);
    CHECK(back.connector == Connector::kFc);
    CHECK(back.connector_weights.fc == ck.connector_weights.fc);
    CHECK(back.connector_weights.fc_bias == ck.connector_weights.fc_bias);
    CHECK(back.target_hash == target_config_hash(tc));
    const LayerWeights& a = back.weights.layers[0];
    const LayerWeights& b = ck.weights.layers[0];
    CHECK((a.wq == b.wq && a.wk == b.wk && a.wv == b.wv && a.wo == b.wo));
    CHECK((a.mlp_norm == b.mlp_norm && a.w_gate == b.w_gate && a.w_up == b.w_up && a.w_down == b.w_down));
    CHECK(back.weights.embed == tw.embed);
    CHECK(back.weights.output_matrix() == tw.output_matrix());

    // The same drafts: the two drafters' tree logits over one EAGLE-2 step, bit for bit.
    const std::vector<int> text = some_tokens(9, tc.vocab_size, 3);
    std::vector<std::vector<float>> logits;
    for (const FeatureCheckpoint* d : {&ck, &back}) {
        CpuModel target(tc, tw);
        FeatureDrafter drafter(*d);
        FeatureProposer proposer(target, drafter);
        detail::prefill(target, std::span(text).first(8), 8);
        proposer.start(text);
        Tree tree;
        tree.add_root(text.back());
        proposer.propose(tree, std::vector<int>{0});
        tree.add(3, 0, 0.5f);
        tree.add(5, 0, 0.2f);
        const Rows r = proposer.propose(tree, std::vector<int>{0, 1, 2});
        logits.emplace_back(r.data.begin(), r.data.end());
    }
    CHECK(logits[0] == logits[1]);

    // This library's own folder keeps the layout and the bias too ("layout": "eagle", fc.bias).
    const fs::path ours = scratch(std::string("round_trip_ours_") + engine_name(engine));
    save_feature_checkpoint(ours, back, SaveFormat::kF32);
    CHECK(read_json(ours / "config.json").at("layout").as_string() == "eagle");
    const FeatureCheckpoint again = load_feature_checkpoint(ours);
    CHECK(again.config.identity_end_norms);
    CHECK(again.connector_weights.fc_bias == ck.connector_weights.fc_bias);
    CHECK(again.connector_weights.fc == ck.connector_weights.fc);
    fs::remove_all(ours);
    fs::remove_all(dir);
}

TEST_CASE("what the layout cannot hold is refused on export, naming the field", "[eagle][layout][errors]") {
    const Config tc = target_config();
    const Weights tw = random_weights(tc, 8, 0.3f);
    const fs::path dir = scratch("refused_export");
    SECTION("FSPAD's Feature Sampler") {
        FeatureCheckpoint ck = initial_feature_drafter(tc, tw, Connector::kSampler, false, 1, 0.3f);
        ck.config.identity_end_norms = true;
        const std::string m = error_of([&] { save_eagle_layout(dir, ck, ServingEngine::kSglang); });
        CHECK_THAT(m, Catch::StartsWith("[specdec.convert]") && Catch::Contains("connector 'feature_sampler'") &&
                          Catch::Contains("no engine has its sampler"));
    }
    SECTION("FSPAD's PAD") {
        const FeatureCheckpoint ck = initial_feature_drafter(tc, tw, Connector::kFc, true, 1, 0.3f);
        const std::string m = error_of([&] { save_eagle_layout(dir, ck, ServingEngine::kVllm); });
        CHECK_THAT(m, Catch::StartsWith("[specdec.convert]") && Catch::Contains("partial_alignment") &&
                          Catch::Contains("no engine has its sampler"));
    }
    SECTION("an FC drafter with its input and final norms") {
        const FeatureCheckpoint ck = initial_feature_drafter(tc, tw, Connector::kFc, false, 1, 0.3f);
        const std::string m = error_of([&] { save_eagle_layout(dir, ck, ServingEngine::kSglang); });
        CHECK_THAT(m, Catch::StartsWith("[specdec.convert]") && Catch::Contains("input_layernorm and a final norm") &&
                          Catch::Contains("\"layout\": \"eagle\""));
    }
    SECTION("an fc bias for vLLM, whose fc has none") {
        const FeatureCheckpoint ck = eagle_drafter(tc, tw, 1, true);
        const std::string m = error_of([&] { save_eagle_layout(dir, ck, ServingEngine::kVllm); });
        CHECK_THAT(m, Catch::StartsWith("[specdec.convert]") && Catch::Contains("fc.bias[0]") && Catch::Contains("--engine sglang"));
    }
    CHECK_FALSE(fs::exists(dir / "model.safetensors"));
    fs::remove_all(dir);
}

TEST_CASE("an EAGLE folder that does not fit the target or the layout is refused on import, by name", "[eagle][layout][errors]") {
    const Config tc = target_config();
    const Weights tw = random_weights(tc, 9, 0.3f);
    const fs::path dir = scratch("refused_import");
    save_eagle_layout(dir, eagle_drafter(tc, tw, 2, true), ServingEngine::kSglang, SaveFormat::kF32);
    REQUIRE(load_eagle_layout(dir, tc, tw).connector_weights.fc_bias.size() == 32u);
    SECTION("another target's width, heads or vocabulary") {
        Config wider = tc, more_heads = tc, larger_vocab = tc;
        wider.hidden_size = 64;
        more_heads.num_attention_heads = 8;
        more_heads.num_key_value_heads = 4;
        more_heads.attention_head_dim = 8;
        larger_vocab.vocab_size = 20;
        const std::vector<std::pair<Config, const char*>> cases{
            {wider, "hidden_size 32 differs from the target's 64"},
            {more_heads, "num_attention_heads 4 differs from the target's 8"},
            {larger_vocab, "vocab_size 16 differs from the target's 20"}};
        for (const auto& c : cases) {
            const Config& other = c.first;
            const std::string m = error_of([&] { load_eagle_layout(dir, other, random_weights(other, 1, 0.3f)); });
            CHECK_THAT(m, Catch::StartsWith("[specdec.eagle]") && Catch::Contains("config.json") && Catch::Contains(c.second));
        }
    }
    SECTION("a pytorch_model.bin instead of safetensors") {
        fs::rename(dir / "model.safetensors", dir / "pytorch_model.bin");
        const std::string m = error_of([&] { load_feature_drafter(dir, tc, tw); });
        CHECK_THAT(m, Catch::StartsWith("[specdec.eagle]") && Catch::Contains("pytorch_model.bin") &&
                          Catch::Contains("convert it to safetensors"));
    }
    SECTION("a config whose bias disagrees with the file") {
        json::Value cfg = read_json(dir / "config.json");
        cfg.as_object().set("bias", false);
        write_json(dir / "config.json", cfg);
        CHECK_THAT(error_of([&] { load_eagle_layout(dir, tc, tw); }),
                   Catch::Contains("bias false") && Catch::Contains("holds tensor 'fc.bias'"));
    }
    SECTION("a tensor the layout has not (layer 0's input norm)") {
        const std::vector<float> ones(32, 1.0f);
        const FeatureCheckpoint ck = load_eagle_layout(dir, tc, tw);
        detail::write_tensors(dir / "model.safetensors", SaveFormat::kF32, [&](auto&& put) {
            for_each_eagle_tensor(ck.weights, ck.connector_weights.fc, &ck.connector_weights.fc_bias, ck.config,
                                  [&](const std::string& n, const std::vector<float>& t, const std::vector<std::int64_t>& s) {
                                      put(n, t, s);
                                  });
            put("layers.0.input_layernorm.weight", ones, std::vector<std::int64_t>{32});
        });
        CHECK_THAT(error_of([&] { load_eagle_layout(dir, tc, tw); }),
                   Catch::Contains("tensor 'layers.0.input_layernorm.weight' is not part of EAGLE-1/2's drafter") &&
                       Catch::Contains("no input norm on layer 0"));
    }
    SECTION("this library's own drafter folder, given to the layout's loader") {
        const fs::path ours = scratch("refused_import_ours");
        save_feature_checkpoint(ours, initial_feature_drafter(tc, tw, Connector::kFc, false, 1, 0.3f));
        CHECK_FALSE(is_eagle_layout(ours));
        CHECK_THAT(error_of([&] { load_eagle_layout(ours, tc, tw); }),
                   Catch::Contains("model_type 'eagle'") && Catch::Contains("load_feature_checkpoint reads it"));
        CHECK(load_feature_drafter(ours, tc, tw).connector == Connector::kFc);  // the dispatcher reads both
        fs::remove_all(ours);
    }
    fs::remove_all(dir);
}

TEST_CASE("greedy EAGLE-2 with an imported EAGLE-layout drafter equals plain greedy decoding", "[eagle][layout][lossless]") {
    const std::uint64_t seed = GENERATE(range(1, 5));
    const ServingEngine engine = seed % 2 == 0 ? ServingEngine::kVllm : ServingEngine::kSglang;
    CAPTURE(seed, engine_name(engine));
    const Config tc = target_config();
    const Weights tw = random_weights(tc, seed, 0.4f);
    const fs::path dir = scratch("greedy");
    save_eagle_layout(dir, eagle_drafter(tc, tw, seed + 50, engine == ServingEngine::kSglang, 0.4f), engine, SaveFormat::kBF16);
    FeatureDrafter drafter(load_feature_drafter(dir, tc, tw));
    CpuModel target(tc, tw);
    const std::vector<int> prompt = some_tokens(6, tc.vocab_size, static_cast<int>(seed));
    const GenerateOptions gen{.max_new_tokens = 40, .seed = seed};
    const Generation plain = autoregressive_generate(target, prompt, gen);
    FeatureProposer proposer(target, drafter);
    TreeVerifier verifier;
    Eagle2Tree tree = seed % 2 == 0 ? Eagle2Tree::half_budget() : Eagle2Tree{};
    GreedyMatch greedy;
    const Generation spec = speculative_generate(target, proposer, tree, verifier, greedy, prompt, gen);
    CHECK(spec.tokens == plain.tokens);
    int rejected = 0;
    for (const StepRecord& s : spec.steps) rejected += s.n_accepted < s.depth;
    CHECK(rejected > 0);
    fs::remove_all(dir);
}

TEST_CASE("T = 1 over EAGLE-2's tree of EAGLE-layout drafts keeps the target's law, and the control is caught",
          "[eagle][layout][lossless][sampling][slow]") {
    constexpr int kVocab = 6;
    const Config tc = test::tiny_config(true, kVocab);
    const Weights tw = random_weights(tc, 2024, 0.3f);
    CpuModel target(tc, tw);
    FeatureDrafter drafter(eagle_drafter(tc, tw, 9, true));
    const auto make = [&] {
        return check::Composition{FeatureProposer(target, drafter), Eagle2Tree{.total_tokens = 8, .depth = 3, .top_k = 3},
                                  SampleAndMatch{}};
    };
    const check::Report r = check::check_lossless(target, make, {{1, 4, 2}}, Sampling{.temperature = 1.0f}, 2000);
    INFO(r.to_string());
    REQUIRE(r.prompts.size() == 1);
    CHECK(r.prompts[0].law.chi.dof >= 8);
    CHECK(r.lossless());
    CHECK(r.powered());
}

}  // namespace test_eagle_layout
