// widen(): a trained model grown to a larger shape keeps its outputs (docs/widening.md): logits on
// chains and trees, greedy decoding plain and speculative, the parts that must be zero, bad shapes;
// the drafters that read the target's internals (EDD, GLIDE, EAGLE/FSPAD) widened with it draft the same.
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "catch.hpp"
#include "source_dir.hpp"
#include "helpers.hpp"

namespace test_widen {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

/// A random tree of n nodes below one root (parents drawn uniformly among earlier nodes).
Tree random_tree(int n, int vocab, std::uint64_t seed) {
    Tree t;
    StepRng rng{seed, 0, RngStream::kUser};
    t.add_root(static_cast<int>(rng.uniform(0, 0) * vocab));
    for (int i = 1; i < n; ++i) t.add(static_cast<int>(rng.uniform(i, 1) * vocab), static_cast<int>(rng.uniform(i, 0) * i));
    return t;
}

/// max |a - b| / max |a| over a forward's rows.
double relative_difference(const Rows& a, const Rows& b) {
    REQUIRE(a.rows() == b.rows());
    double diff = 0, scale = 0;
    for (int i = 0; i < a.rows(); ++i)
        for (std::size_t v = 0; v < a.row(i).size(); ++v) {
            diff = std::max(diff, static_cast<double>(std::abs(a.row(i)[v] - b.row(i)[v])));
            scale = std::max(scale, static_cast<double>(std::abs(a.row(i)[v])));
        }
    return diff / scale;
}

/// The largest relative logit difference between two models over: a prompt as a chain, then a tree
/// after committing it, then a second tree after committing a path of the first.
double max_relative_difference(CpuModel& a, CpuModel& b, int vocab, std::uint64_t seed) {
    a.reset();
    b.reset();
    std::vector<int> prompt;
    for (int i = 0; i < 12; ++i) prompt.push_back(static_cast<int>((seed * 7919 + i * 104729) % vocab));
    const Tree chain = Tree::chain(prompt);
    double worst = relative_difference(a.forward(chain, 0), b.forward(chain, 0));
    std::vector<int> all(prompt.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
    a.commit(all);
    b.commit(all);
    const Tree tree = random_tree(16, vocab, seed);
    worst = std::max(worst, relative_difference(a.forward(tree, 0), b.forward(tree, 0)));
    std::vector<int> path{0};
    for (int i = 1; i < tree.size(); ++i)
        if (tree[i].parent == path.back()) path.push_back(i);
    a.commit(path);
    b.commit(path);
    const Tree second = random_tree(9, vocab, seed + 1);
    return std::max(worst, relative_difference(a.forward(second, 0), b.forward(second, 0)));
}

Config toy_config() {
    Config c = test::tiny_config(/*gqa=*/true);  // D 32, F 48, L 2, 4 heads of 8 over 2 KV heads
    c.rms_norm_eps = 1e-3f;                       // large enough that a missed eps compensation shows
    return c;
}

/// 2x deep, 3x wide, and a GQA grouping of 3 where the trained one is 2 (the head mapping is not the identity).
WidenShape toy_shape() {
    return {.hidden_size = 96, .intermediate_size = 144, .num_hidden_layers = 4, .num_attention_heads = 12,
            .num_key_value_heads = 4};
}

std::string refusal(const Config& c, const WidenShape& s) {
    try {
        (void)widened_config(c, s);
    } catch (const error& e) {
        return e.what();
    }
    return "";
}

fs::path models() { return fs::path(SPECDEC_SOURCE_DIR) / "models"; }

}  // namespace

TEST_CASE("widen: a 2x-deep 3x-wide toy keeps the logits on chains and trees", "[widen]") {
    const Config c = toy_config();
    const Weights w = random_weights(c, 11, 0.3f);  // a peaky random model: logits far from uniform
    Checkpoint trained{c, w};
    const Checkpoint wide = widen(trained, toy_shape(), 5);
    REQUIRE(wide.config.hidden_size == 96);
    CHECK(wide.config.head_dim() == c.head_dim());
    CHECK(wide.config.rms_norm_eps == Approx(c.rms_norm_eps / 3.0f));
    CHECK(added_layers(c, wide.config) == 2);

    CpuModel original(c, w);
    SECTION("float32, with and without the fast paths") {
        CpuModel widened(wide.config, widen(trained, toy_shape(), 5).weights);
        CHECK(max_relative_difference(original, widened, c.vocab_size, 1) < 1e-4);
        CpuModel reference(wide.config, widen(trained, toy_shape(), 5).weights, ModelOptions{.reference = true});
        CHECK(max_relative_difference(original, reference, c.vocab_size, 2) < 1e-4);
    }
    SECTION("controls: without the RMSNorm compensation the logits differ") {
        Config plain_eps = wide.config;
        plain_eps.rms_norm_eps = c.rms_norm_eps;
        CpuModel no_eps(plain_eps, widen(trained, toy_shape(), 5).weights);
        CHECK(max_relative_difference(original, no_eps, c.vocab_size, 1) > 1e-3);
        Weights m = materialize(wide.config, widen(trained, toy_shape(), 5).weights);
        for (float& g : m.norm) g *= std::sqrt(3.0f);  // the final norm's gains as trained
        CpuModel no_gain(wide.config, m);
        CHECK(max_relative_difference(original, no_gain, c.vocab_size, 1) > 1e-2);
    }
    SECTION("another seed changes the free parts, not the function") {
        const Weights a = materialize(wide.config, widen(trained, toy_shape(), 5).weights);
        const Weights b = materialize(wide.config, widen(trained, toy_shape(), 6).weights);
        CHECK(a.layers[0].wq != b.layers[0].wq);
        CHECK(a.layers[0].wo == b.layers[0].wo);  // zero in a new layer
        CpuModel widened(wide.config, b);
        CHECK(max_relative_difference(original, widened, c.vocab_size, 3) < 1e-4);
    }
    SECTION("an untied LM head widens alike") {
        Config u = c;
        u.tie_word_embeddings = false;
        Weights uw = random_weights(u, 12, 0.3f);
        CpuModel untied(u, uw);
        CpuModel widened(widened_config(u, toy_shape()), widen(Checkpoint{u, uw}, toy_shape(), 7).weights);
        CHECK(max_relative_difference(untied, widened, u.vocab_size, 4) < 1e-4);
    }
}

TEST_CASE("widen: new parts write exact zeros and trained norms are rescaled", "[widen]") {
    const Config c = toy_config();
    const Weights w = random_weights(c, 13, 0.3f);
    const Checkpoint wide = widen(Checkpoint{c, w}, toy_shape(), 5);
    const Weights m = materialize(wide.config, wide.weights);
    const int D = c.hidden_size, D2 = 96, F = c.intermediate_size, F2 = 144, q2 = wide.config.q_dim();
    const auto all_zero = [](const std::vector<float>& t, auto&& pick) {
        for (std::size_t i = 0; i < t.size(); ++i)
            if (pick(i) && t[i] != 0.0f) return false;
        return true;
    };
    CHECK(all_zero(m.embed, [&](std::size_t i) { return static_cast<int>(i % D2) >= D; }));
    for (int l = 0; l < 2; ++l) {  // the new layers: identities on the residual
        CHECK(all_zero(m.layers[l].wo, [](std::size_t) { return true; }));
        CHECK(all_zero(m.layers[l].w_down, [](std::size_t) { return true; }));
    }
    const LayerWeights& t = m.layers[2];  // trained layer 0
    CHECK(all_zero(t.wo, [&](std::size_t i) { return static_cast<int>(i / q2) >= D; }));
    CHECK(all_zero(t.w_down, [&](std::size_t i) { return static_cast<int>(i / F2) >= D || static_cast<int>(i % F2) >= F; }));
    // Trained query head h = 3 (group 1 of 2) sits at widened head (3 / 2) * 3 + 3 % 2 = 4; KV heads stay.
    const int hd = c.head_dim();
    CHECK(t.wq[static_cast<std::size_t>(4 * hd) * D2 + 5] == w.layers[0].wq[static_cast<std::size_t>(3 * hd) * D + 5]);
    CHECK(t.wk[static_cast<std::size_t>(1 * hd + 2) * D2] == w.layers[0].wk[static_cast<std::size_t>(1 * hd + 2) * D]);
    CHECK(t.wo[7 * static_cast<std::size_t>(q2) + 4 * hd + 1] == w.layers[0].wo[7 * static_cast<std::size_t>(c.q_dim()) + 3 * hd + 1]);
    CHECK(t.attn_norm[3] == Approx(w.layers[0].attn_norm[3] * std::sqrt(32.0f / 96.0f)));
    CHECK(m.norm[D2 - 1] == 1.0f);
}

TEST_CASE("widen: shapes that cannot keep the trained function are refused by name", "[widen]") {
    const Config c = toy_config();
    WidenShape s = toy_shape();
    CHECK(refusal(c, s).empty());
    SECTION("narrower") {
        s.hidden_size = 16;
        CHECK_THAT(refusal(c, s), Catch::Contains("[specdec.widen] hidden_size 16 is narrower"));
        s = toy_shape();
        s.num_hidden_layers = 1;
        CHECK_THAT(refusal(c, s), Catch::Contains("num_hidden_layers 1 is narrower"));
        s = toy_shape();
        s.num_key_value_heads = 1;
        CHECK_THAT(refusal(c, s), Catch::Contains("num_key_value_heads 1 is narrower"));
    }
    SECTION("head_dim, grouping and vocabulary") {
        s.head_dim = 16;
        CHECK_THAT(refusal(c, s), Catch::Contains("[specdec.widen] head_dim 16 differs"));
        s = toy_shape();
        s.num_attention_heads = 12;
        s.num_key_value_heads = 12;  // groups of 1: two trained heads cannot share a KV head
        CHECK_THAT(refusal(c, s), Catch::Contains("GQA grouping 12 / 12"));
        s = toy_shape();
        s.vocab_size = 128;
        CHECK_THAT(refusal(c, s), Catch::Contains("vocab_size 128 differs"));
    }
    SECTION("unknown presets") {
        CHECK_THROWS_WITH(widen_preset("3b"), Catch::Contains("'3b': the presets are 110m, 1b and 7b"));
    }
}

TEST_CASE("widen: a target too large for this machine's memory is refused before its matrices are packed", "[widen][memory]") {
    // 154G weights (309 GB in bf16): the matrices are rows generated on demand until the model packs
    // them, so only the packing would allocate, and the model asks first.
    const std::optional<std::int64_t> available = detail::available_memory_bytes();
    if (!available) {
        WARN("this system reports no available memory (no /proc/meminfo): skipped");
        return;
    }
    REQUIRE(*available > 0);
    REQUIRE(*available < std::int64_t{300'000'000'000});
    const Config c = toy_config();
    Checkpoint ck{c, random_weights(c, 5, 0.3f)};
    ck = widen(ck, {.hidden_size = 16384, .intermediate_size = 65536, .num_hidden_layers = 48, .num_attention_heads = 64,
                    .num_key_value_heads = 32});
    CHECK_THROWS_WITH(CpuModel(ck.config, ck.weights, {.weight_format = WeightFormat::kBF16}),
                      Catch::Contains("[specdec.model] the bf16 matrices of this model (hidden_size 16384, intermediate_size "
                                      "65536, 48 layers, ") &&
                          Catch::Contains("refused before allocating; hint: free memory, or a smaller model"));
}

TEST_CASE("a cgroup's headroom is its limit less the working set, page cache the kernel reclaims first excluded", "[memory]") {
    // Named by process, so that the suites of two builds run at once do not share it.
    const fs::path dir = fs::temp_directory_path() / ("specdec_cgroup_test_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto write = [&](const char* name, const std::string& text) { std::ofstream(dir / name) << text; };
    CHECK_FALSE(detail::cgroup_headroom(dir.string()).has_value());  // no files: no limit known
    write("memory.max", "max\n");
    write("memory.current", "5000000000\n");
    CHECK_FALSE(detail::cgroup_headroom(dir.string()).has_value());  // "max": no limit
    write("memory.max", "24000000000\n");
    CHECK(detail::cgroup_headroom(dir.string()) == std::int64_t{19'000'000'000});  // no memory.stat: all used
    write("memory.stat", "anon 1000000000\nfile 4000000000\nactive_file 1000000000\ninactive_file 3000000000\n");
    CHECK(detail::cgroup_headroom(dir.string()) == std::int64_t{22'000'000'000});  // 5 GB used, 3 GB reclaimable
    write("memory.current", "30000000000\n");
    write("memory.stat", "inactive_file 0\n");
    CHECK(detail::cgroup_headroom(dir.string()) == std::int64_t{0});  // over the limit: no headroom, not negative
    fs::remove_all(dir);
}

TEST_CASE("require_memory names both sizes, and checks nothing where the available memory is unknown", "[memory]") {
    CHECK_NOTHROW(detail::require_memory(2'000'000'000, 3'000'000'000, "model", "the matrices", "free memory"));
    CHECK_NOTHROW(detail::require_memory(2'000'000'000, std::nullopt, "model", "the matrices", "free memory"));
    CHECK_THROWS_WITH(detail::require_memory(13'400'000'000, 9'800'000'000, "model", "the matrices", "free memory"),
                      Catch::StartsWith("[specdec.model] the matrices need 13.4 GB, and 9.8 GB of memory is available") &&
                          Catch::EndsWith("; hint: free memory"));
}

TEST_CASE("the memory check counts a copy for every matrix make_matrix copies, and none for one used in place",
          "[memory]") {
    const std::vector<float> a(6 * 4, 0.5f), b(2 * 4, 0.25f);
    for (const bool bf : {false, true})
        for (const bool panels : {false, panels_available()})
            for (const bool fused : {false, true}) {
                std::vector<detail::MatrixPart> parts{&a};
                if (fused) parts.emplace_back(&b);
                const int m = fused ? 8 : 6;
                ThreadPool pool(1);
                const detail::Matrix mat = detail::make_matrix(nullptr, parts, m, 4, bf, panels, &pool);
                INFO("bf16 " << bf << ", panels " << panels << ", fused " << fused);
                CHECK(detail::used_in_place(parts, bf, panels) == (mat.f32 == a.data()));
                CHECK(detail::used_in_place(parts, bf, panels) == (!bf && !panels && !fused));
            }
}

TEST_CASE("widen: the presets fit the shipped target at the named costs", "[widen]") {
    const fs::path target = models() / "target";
    if (!fs::exists(target / "model.safetensors")) {
        WARN("models/target is absent: skipped");
        return;
    }
    const Config c = load_config(target / "config.json");
    const auto bf16_bytes = [&](const char* name) {
        return 2.0 * static_cast<double>(widened_config(c, widen_preset(name)).parameter_count());
    };
    CHECK(bf16_bytes("110m") / 2 == Approx(110e6).epsilon(0.05));
    CHECK(bf16_bytes("1b") / 2 == Approx(1.14e9).epsilon(0.02));
    CHECK(bf16_bytes("7b") == Approx(2.0 * 6'738'415'616).epsilon(0.05));  // Llama-2-7B's parameters, in bf16
}

TEST_CASE("widen: the shipped target at 110M cost keeps its logits", "[widen]") {
    const fs::path target = models() / "target";
    if (!fs::exists(target / "model.safetensors")) {
        WARN("models/target is absent: skipped");
        return;
    }
    const Checkpoint t = load_checkpoint(target);
    ThreadPool pool(2);
    CpuModel original(t.config, t.weights, ModelOptions{.pool = &pool});
    // Widened from the file's bf16 rows in place (a deferred load), as a large preset is built.
    const Checkpoint wide = widen(load_checkpoint(target, LoadOptions{.defer_matrices = true}), widen_preset("110m"), 1);
    CpuModel widened(wide.config, wide.weights, ModelOptions{.pool = &pool});
    CHECK(max_relative_difference(original, widened, t.config.vocab_size, 9) < 1e-4);
}

TEST_CASE("widen: the shipped pair decodes the same greedy tokens when widened", "[widen]") {
    const fs::path root = models();
    if (!fs::exists(root / "target/model.safetensors") || !fs::exists(root / "small/model.safetensors")) {
        WARN("models/target or models/small is absent: skipped");
        return;
    }
    const Checkpoint t = load_checkpoint(root / "target"), d = load_checkpoint(root / "small");
    const Tokenizer tok = Tokenizer::load(root / "target/tokenizer.json");
    ThreadPool pool(2);
    const ModelOptions opts{.pool = &pool};
    // 1.5x deep and 4/3 wide, groups of 3 over 4 KV heads: the shipped target's 6 heads over 2 grow to 12 over 4.
    const WidenShape shape{.hidden_size = 512, .intermediate_size = 1536, .num_hidden_layers = 12,
                           .num_attention_heads = 12, .num_key_value_heads = 4};
    const Checkpoint wide = widen(t, shape, 3);
    CpuModel original(t.config, t.weights, opts), widened(wide.config, wide.weights, opts), draft(d.config, d.weights, opts);
    const GenerateOptions g{.max_new_tokens = 32};
    for (const char* text : {"It was the best of times, it was the worst of times,", "Once upon a time there was"}) {
        const std::vector<int> prompt = tok.encode(text);
        const std::vector<int> expected = autoregressive_generate(original, prompt, g).tokens;
        CHECK(autoregressive_generate(widened, prompt, g).tokens == expected);
        ModelProposer proposer(draft);
        TreeVerifier verifier;
        GreedyMatch acceptor;
        Chain chain{.gamma = 4};
        CHECK(speculative_generate(widened, proposer, chain, verifier, acceptor, prompt, g).tokens == expected);
        KAryTree tree{.k_config = {2, 2, 1}};
        CHECK(speculative_generate(widened, proposer, tree, verifier, acceptor, prompt, g).tokens == expected);
    }
}

TEST_CASE("widen: drafters of the target's width refuse a widened target", "[widen]") {
    const fs::path root = models();
    if (!fs::exists(root / "target/model.safetensors") || !fs::exists(root / "edd/model.safetensors") ||
        !fs::exists(root / "glide/model.safetensors") || !fs::exists(root / "eagle/model.safetensors")) {
        WARN("models/target, edd, glide or eagle is absent: skipped");
        return;
    }
    const Checkpoint t = load_checkpoint(root / "target");
    const WidenShape shape{.hidden_size = 512, .intermediate_size = 1024, .num_hidden_layers = 9,
                           .num_attention_heads = 6, .num_key_value_heads = 2};
    const Checkpoint wide = widen(t, shape, 3);
    CpuModel widened(wide.config, wide.weights);
    EddCheckpoint e = load_edd_checkpoint(root / "edd");
    CpuModel edd(e.config, std::move(e.weights));
    CHECK_THROWS_WITH((EddProposer(widened, edd, e.target_layer)), Catch::Contains("[specdec.edd]") && Catch::Contains("hidden_size"));
    FeatureDrafter eagle(load_feature_checkpoint(root / "eagle"));
    CHECK_THROWS_WITH((FeatureProposer(widened, eagle)), Catch::Contains("[specdec.eagle]") && Catch::Contains("hidden_size"));
    GlideCheckpoint g = load_glide_checkpoint(root / "glide");
    CHECK_THROWS_WITH((GlideModel(std::move(g.config), std::move(g.weights), widened)),
                      Catch::Contains("[specdec.glide]") && Catch::Contains("glide_target_layers"));
}

TEST_CASE("widen: EDD's drafter widened with its target drafts the same", "[widen]") {
    const fs::path root = models();
    if (!fs::exists(root / "target/model.safetensors") || !fs::exists(root / "edd/model.safetensors")) {
        WARN("models/target or models/edd is absent: skipped");
        return;
    }
    const Checkpoint t = load_checkpoint(root / "target");
    const EddCheckpoint e = load_edd_checkpoint(root / "edd");
    const Tokenizer tok = Tokenizer::load(root / "target/tokenizer.json");
    const WidenShape shape{.hidden_size = 512, .intermediate_size = 1536, .num_hidden_layers = 12,
                           .num_attention_heads = 12, .num_key_value_heads = 4};
    const Checkpoint wide = widen(t, shape, 3);
    // The drafter's one layer is widened like a trained layer (no layers added); its state, counted from
    // the target's end, moves by the layers added in front.
    WidenShape drafter_shape = shape;
    drafter_shape.num_hidden_layers = e.config.num_hidden_layers;
    EddCheckpoint we = widen(e, drafter_shape, 4);
    we.target_layer += added_layers(t.config, wide.config);
    REQUIRE(we.target_layer == edd_hidden_layer(wide.config));

    ThreadPool pool(2);
    const ModelOptions opts{.pool = &pool};
    CpuModel target(t.config, t.weights, opts), widened(wide.config, wide.weights, opts);
    CpuModel edd(e.config, e.weights, opts), wide_edd(we.config, we.weights, opts);
    const std::vector<int> prompt = tok.encode("It was the best of times, it was the worst of times,");
    const GenerateOptions g{.max_new_tokens = 32};
    Chain chain{.gamma = 5};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    EddProposer small(target, edd, e.target_layer);
    const Generation a = speculative_generate(target, small, chain, verifier, acceptor, prompt, g);
    EddProposer large(widened, wide_edd, we.target_layer);
    const Generation b = speculative_generate(widened, large, chain, verifier, acceptor, prompt, g);
    CHECK(b.tokens == a.tokens);
    CHECK(b.token_depth == a.token_depth);  // the same drafts accepted at the same depths: the same drafts
    CHECK(b.n_target_calls() == a.n_target_calls());
}

TEST_CASE("widen: GLIDE's drafter made to read a widened target drafts the same", "[widen]") {
    const fs::path root = models();
    if (!fs::exists(root / "target/model.safetensors") || !fs::exists(root / "glide/model.safetensors")) {
        WARN("models/target or models/glide is absent: skipped");
        return;
    }
    const Checkpoint t = load_checkpoint(root / "target");
    const Tokenizer tok = Tokenizer::load(root / "target/tokenizer.json");
    const WidenShape shape{.hidden_size = 512, .intermediate_size = 1536, .num_hidden_layers = 12,
                           .num_attention_heads = 12, .num_key_value_heads = 4};
    const Checkpoint wide = widen(t, shape, 3);
    GlideCheckpoint g = load_glide_checkpoint(root / "glide");
    GlideCheckpoint wg = widen_glide(g, t.config, wide.config, 5);
    REQUIRE(wg.config.glide_target_layers == 12);

    ThreadPool pool(2);
    const ModelOptions opts{.pool = &pool};
    CpuModel target(t.config, t.weights, opts), widened(wide.config, wide.weights, opts);
    GlideModel small(std::move(g.config), std::move(g.weights), target, opts);
    GlideModel large(std::move(wg.config), std::move(wg.weights), widened, opts);
    const std::vector<int> prompt = tok.encode("It was the best of times, it was the worst of times,");
    const GenerateOptions opt{.max_new_tokens = 32};
    Chain chain{.gamma = 4};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    ModelProposer from_small(small), from_large(large);
    const Generation a = speculative_generate(target, from_small, chain, verifier, acceptor, prompt, opt);
    const Generation b = speculative_generate(widened, from_large, chain, verifier, acceptor, prompt, opt);
    CHECK(b.tokens == a.tokens);
    CHECK(b.token_depth == a.token_depth);
    CHECK(b.n_target_calls() == a.n_target_calls());
    CHECK_THROWS_WITH(widen_glide(load_glide_checkpoint(root / "glide"), wide.config, wide.config, 5),
                      Catch::Contains("[specdec.glide] widen_glide: glide_target_layers is 8"));
}

namespace {

/// The drafter's logits and predicted features for a small tree (a root, two children, a grandchild)
/// after `prompt`, against `target`.
struct Drafted {
    std::vector<float> logits, features;
};
Drafted draft_tree(CpuModel& target, FeatureDrafter& drafter, const std::vector<int>& prompt) {
    target.reset();
    FeatureProposer proposer(target, drafter);
    detail::prefill(target, std::span(prompt).first(prompt.size() - 1));
    proposer.start(prompt);
    // Depth by depth, as a builder drives it: a node's input is its parent's predicted feature.
    Tree tree;
    tree.add_root(prompt.back());
    (void)proposer.propose(tree, std::vector<int>{0});
    tree.add(3, 0);
    tree.add(5, 0);
    (void)proposer.propose(tree, std::vector<int>{1, 2});
    tree.add(7, 1);
    (void)proposer.propose(tree, std::vector<int>{3});
    const Rows logits = proposer.propose(tree, std::vector<int>{0, 1, 2, 3});
    const Rows features = proposer.node_features();
    return {{logits.data.begin(), logits.data.end()}, {features.data.begin(), features.data.end()}};
}

/// max |a - b| / max |a|.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, static_cast<double>(std::abs(a[i] - b[i])));
        scale = std::max(scale, static_cast<double>(std::abs(a[i])));
    }
    return diff / scale;
}

}  // namespace

TEST_CASE("widen: a feature drafter widened with its toy target drafts the same logits and features",
          "[widen][eagle][fspad]") {
    // EAGLE (FC), FSPAD (sampler + PAD), and EAGLE's own layout with an fc bias (an imported drafter's).
    const int variant = GENERATE(0, 1, 2);
    const Connector kind = variant == 1 ? Connector::kSampler : Connector::kFc;
    const bool pad = variant == 1, eagle_layout = variant == 2;
    CAPTURE(variant);
    const Config c = toy_config();
    const Weights w = random_weights(c, 21, 0.3f);
    const Checkpoint wide = widen(Checkpoint{c, w}, toy_shape(), 5);
    FeatureCheckpoint f = initial_feature_drafter(c, w, kind, pad, 22, 0.3f);
    if (eagle_layout) {
        f.config.identity_end_norms = true;
        detail::NormalStream normal{23};
        f.connector_weights.fc_bias.resize(static_cast<std::size_t>(c.hidden_size));
        for (float& b : f.connector_weights.fc_bias) b = 0.3f * normal.next();
    }
    FeatureCheckpoint wf = widen_feature(f, c, wide.config, 6);
    REQUIRE(wf.config.hidden_size == 96);
    CHECK(wf.config.num_hidden_layers == 1);
    CHECK(wf.config.partial_alignment == pad);
    CHECK(wf.config.identity_end_norms == eagle_layout);
    CHECK(wf.connector_weights.fc_bias.size() == (eagle_layout ? 96u : 0u));
    CHECK(wf.sampler_size == 144);
    CHECK(wf.target_hash == target_config_hash(wide.config));

    const std::vector<int> prompt{5, 9, 17, 33, 2, 41, 8, 60};
    CpuModel target(c, w), widened(wide.config, wide.weights);
    FeatureDrafter small(f), large(wf);
    const Drafted a = draft_tree(target, small, prompt), b = draft_tree(widened, large, prompt);
    CHECK(relative_difference(a.logits, b.logits) < 1e-4);
    // The predicted features: the trained ones on the trained dims, exact zeros on the new ones.
    REQUIRE(b.features.size() == a.features.size() * 3);
    std::vector<float> trained_dims;
    bool new_dims_zero = true;
    for (std::size_t i = 0; i < b.features.size(); ++i) {
        if (i % 96 < 32) trained_dims.push_back(b.features[i]);
        else new_dims_zero = new_dims_zero && b.features[i] == 0.0f;
    }
    CHECK(new_dims_zero);
    CHECK(relative_difference(a.features, trained_dims) < 1e-4);

    SECTION("control: a connector that writes the residual's new dims changes the drafts") {
        // Row D of the FC (or of the sampler's Down) reading trained inputs: η's new dims are no longer 0.
        std::vector<float>& m = pad ? wf.connector_weights.down : wf.connector_weights.fc;
        const std::size_t row = 32 * static_cast<std::size_t>(pad ? 144 : 2 * 96);
        std::fill_n(m.begin() + static_cast<std::ptrdiff_t>(row), 32, 0.5f);
        FeatureDrafter broken(wf);
        CHECK(relative_difference(a.logits, draft_tree(widened, broken, prompt).logits) > 1e-3);
    }
    SECTION("the connector's and PAD's trained parts sit where the rules say; the rest writes zeros") {
        const ConnectorWeights& t = f.connector_weights;
        const ConnectorWeights& u = wf.connector_weights;
        const auto all_zero = [](const std::vector<float>& v, auto&& pick) {
            for (std::size_t i = 0; i < v.size(); ++i)
                if (pick(i) && v[i] != 0.0f) return false;
            return true;
        };
        if (pad) {
            CHECK(u.gate[static_cast<std::size_t>(7) * 96 + 3] == t.gate[static_cast<std::size_t>(7) * 32 + 3]);
            CHECK(u.up[static_cast<std::size_t>(47) * 96 + 31] == t.up[static_cast<std::size_t>(47) * 32 + 31]);
            CHECK(u.down[static_cast<std::size_t>(5) * 144 + 47] == t.down[static_cast<std::size_t>(5) * 48 + 47]);
            CHECK(all_zero(u.down, [](std::size_t i) { return i / 144 >= 32 || i % 144 >= 48; }));
            // PAD's (2D', F') down_proj: the feature half's trained rows at D'..D'+D, zeros elsewhere.
            const Weights m = materialize(wf.config, wf.weights);
            const std::vector<float>& down = m.layers[0].w_down;
            REQUIRE(down.size() == static_cast<std::size_t>(2 * 96) * 144);
            CHECK(down[static_cast<std::size_t>(96 + 3) * 144 + 10] == f.weights.layers[0].w_down[static_cast<std::size_t>(32 + 3) * 48 + 10]);
            CHECK(down[static_cast<std::size_t>(3) * 144 + 10] == f.weights.layers[0].w_down[static_cast<std::size_t>(3) * 48 + 10]);
            CHECK(all_zero(down, [](std::size_t i) { return i / 144 % 96 >= 32 || i % 144 >= 48; }));
        } else {
            CHECK(u.fc[static_cast<std::size_t>(4) * 192 + 6] == t.fc[static_cast<std::size_t>(4) * 64 + 6]);        // reads e
            CHECK(u.fc[static_cast<std::size_t>(4) * 192 + 96 + 6] == t.fc[static_cast<std::size_t>(4) * 64 + 32 + 6]);  // reads f
            CHECK(all_zero(u.fc, [](std::size_t i) { return i / 192 >= 32 && i % 96 < 32; }));
        }
        const Weights m = materialize(wf.config, wf.weights);
        CHECK(m.norm[3] == Approx(f.weights.norm[3] * std::sqrt(32.0f / 96.0f)));
        CHECK(wf.config.rms_norm_eps == Approx(c.rms_norm_eps / 3.0f));
    }
}

TEST_CASE("widen: EAGLE's and FSPAD's drafters widened with their target draft the same", "[widen][eagle][fspad]") {
    const fs::path root = models();
    const std::string name = GENERATE("eagle", "fspad");
    CAPTURE(name);
    if (!fs::exists(root / "target/model.safetensors") || !fs::exists(root / name / "model.safetensors")) {
        WARN("models/target or models/" + name + " is absent: skipped");
        return;
    }
    const Checkpoint t = load_checkpoint(root / "target");
    const FeatureCheckpoint f = load_feature_checkpoint(root / name);
    const Tokenizer tok = Tokenizer::load(root / "target/tokenizer.json");
    const WidenShape shape{.hidden_size = 512, .intermediate_size = 1536, .num_hidden_layers = 12,
                           .num_attention_heads = 12, .num_key_value_heads = 4};
    const Checkpoint wide = widen(t, shape, 3);
    const FeatureCheckpoint wf = widen_feature(f, t.config, wide.config, 4);
    REQUIRE(wf.config.hidden_size == 512);
    CHECK(wf.target_hash == target_config_hash(wide.config));

    ThreadPool pool(2);
    const ModelOptions opts{.pool = &pool};
    CpuModel target(t.config, t.weights, opts), widened(wide.config, wide.weights, opts);
    FeatureDrafter small(f, opts), large(wf, opts);
    FeatureProposer from_small(target, small), from_large(widened, large);
    const std::vector<int> prompt = tok.encode("It was the best of times, it was the worst of times,");
    const GenerateOptions g{.max_new_tokens = 32};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const auto same_drafts = [&](const auto& builder) {
        auto for_small = builder, for_large = builder;
        const Generation a = speculative_generate(target, from_small, for_small, verifier, acceptor, prompt, g);
        const Generation b = speculative_generate(widened, from_large, for_large, verifier, acceptor, prompt, g);
        CHECK(b.tokens == a.tokens);
        CHECK(b.token_depth == a.token_depth);  // the same drafts accepted at the same depths
        CHECK(b.n_target_calls() == a.n_target_calls());
        CHECK(a.n_target_calls() < 32);  // drafts were accepted: a test of drafts, not of the target alone
    };
    same_drafts(Chain{.gamma = 5});
    same_drafts(Eagle2Tree::half_budget());

    // Refused by name: the widened drafter on the trained target, the trained one on the widened
    // target (tested above), and widening for a target the drafter was not trained for.
    CHECK_THROWS_WITH((FeatureProposer(target, large)), Catch::Contains("[specdec.eagle]") && Catch::Contains("hidden_size"));
    Config other = t.config;
    other.num_hidden_layers = 9;
    CHECK_THROWS_WITH(widen_feature(f, other, widened_config(other, shape), 4),
                      Catch::Contains("[specdec.eagle] the drafter was trained for a target with config hash"));
}

}  // namespace test_widen
