// The model's invariants: a tree forward equals decoding each branch alone; commit equals decoding the
// accepted tokens one by one.
#include "catch.hpp"
#include "helpers.hpp"

namespace test_model {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

/// A random tree of n nodes below one root (parents drawn uniformly among earlier nodes).
Tree random_tree(int n, int vocab, std::uint64_t seed) {
    Tree t;
    StepRng rng{seed, 0, RngStream::kUser};
    t.add_root(static_cast<int>(rng.uniform(0, 0) * vocab));
    for (int i = 1; i < n; ++i) {
        const int parent = static_cast<int>(rng.uniform(i, 0) * i);
        t.add(static_cast<int>(rng.uniform(i, 1) * vocab), parent);
    }
    return t;
}

/// Logits of the last token after decoding `prefix` then `branch`, one token per forward.
std::vector<float> decode_alone(CpuModel& m, const std::vector<int>& prefix, const std::vector<int>& branch) {
    m.reset();
    std::vector<int> all = prefix;
    all.insert(all.end(), branch.begin(), branch.end());
    std::vector<float> last;
    for (int tok : all) {
        const Tree t = Tree::chain(std::vector<int>{tok});
        const Rows r = m.forward(t, 0);
        last.assign(r.row(0).begin(), r.row(0).end());
        m.commit(std::vector<int>{0});
    }
    return last;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
    float d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
    return d;
}

}  // namespace

TEST_CASE("a tree forward gives every node the logits of its branch decoded alone", "[model][tree]") {
    const bool gqa = GENERATE(false, true);
    const std::uint64_t seed = GENERATE(1u, 2u, 3u);
    const test::Block block = GENERATE(test::Block::kLlama, test::Block::kQwen2, test::Block::kQwen3);
    const Config cfg = test::tiny_block_config(block, gqa);
    const Weights w = test::random_block_weights(cfg, seed, 0.3f);
    CpuModel model(cfg, w), reference(cfg, w);
    const std::vector<int> prefix{5, 9, 11, 3};
    const Tree tree = random_tree(12, cfg.vocab_size, seed);

    model.reset();
    detail::prefill(model, prefix);
    const Rows logits = model.forward(tree, 0);
    REQUIRE(logits.rows() == tree.size());
    for (int i = 0; i < tree.size(); ++i) {
        std::vector<int> branch;
        for (int node : tree.path_to(i)) branch.push_back(tree[node].token);
        const auto alone = decode_alone(reference, prefix, branch);
        INFO("node " << i << " at depth " << tree[i].depth);
        CHECK(max_abs_diff(logits.row(i), alone) < 1e-4f);
    }
}

TEST_CASE("growing a tree with forward(tree, first) equals one forward over the whole tree", "[model][tree]") {
    const Config cfg = test::tiny_config();
    const Weights w = random_weights(cfg, 7, 0.3f);
    CpuModel a(cfg, w), b(cfg, w);
    const Tree tree = random_tree(10, cfg.vocab_size, 7);
    const Rows whole = a.forward(tree, 0);
    std::vector<float> whole_copy(whole.data.begin(), whole.data.end());
    Tree grown;
    int first = 0;
    for (int i = 0; i < tree.size(); ++i) {
        grown.add(tree[i].token, tree[i].parent);
        if (i % 3 == 2 || i + 1 == tree.size()) {
            const Rows part = b.forward(grown, first);
            for (int r = 0; r < part.rows(); ++r)
                CHECK(max_abs_diff(part.row(r), std::span<const float>(whole_copy).subspan((first + r) * cfg.vocab_size,
                                                                                         cfg.vocab_size)) < 1e-5f);
            first = grown.size();
        }
    }
}

TEST_CASE("after commit(path) the KV cache equals decoding the accepted tokens one by one", "[model][commit]") {
    const bool gqa = GENERATE(false, true);
    const test::Block block = GENERATE(test::Block::kLlama, test::Block::kQwen2, test::Block::kQwen3);
    const Config cfg = test::tiny_block_config(block, gqa);
    const Weights w = test::random_block_weights(cfg, 11, 0.3f);
    CpuModel model(cfg, w), reference(cfg, w);
    const std::vector<int> prefix{1, 2, 3};
    const Tree tree = random_tree(15, cfg.vocab_size, 11);
    const int leaf = GENERATE(0, 6, 14);
    const std::vector<int> path = tree.path_to(leaf);

    detail::prefill(model, prefix);
    model.forward(tree, 0);
    model.commit(path);
    std::vector<int> tokens = prefix;
    for (int node : path) tokens.push_back(tree[node].token);
    decode_alone(reference, {}, tokens);

    REQUIRE(model.cache_len() == static_cast<int>(tokens.size()));
    REQUIRE(reference.cache_len() == model.cache_len());
    for (int l = 0; l < cfg.num_hidden_layers; ++l) {
        CHECK(max_abs_diff(model.kv(l).k, reference.kv(l).k) < 1e-5f);
        CHECK(max_abs_diff(model.kv(l).v, reference.kv(l).v) < 1e-5f);
    }
    // And the next forward agrees too.
    const Tree next = Tree::chain(std::vector<int>{7});
    const Rows a = model.forward(next, 0);
    std::vector<float> a_copy(a.data.begin(), a.data.end());
    const Rows b = reference.forward(next, 0);
    CHECK(max_abs_diff(a_copy, b.data) < 1e-4f);
}

TEST_CASE("captured hidden states follow HF numbering and KV views cover committed rows only", "[model][hidden]") {
    const Config cfg = test::tiny_config();
    CpuModel model(cfg, random_weights(cfg, 3, 0.3f));
    model.capture_hidden({0, cfg.num_hidden_layers});
    const std::vector<int> toks{4, 8, 15};
    const Tree t = Tree::chain(toks);
    const Rows logits = model.forward(t, 0);
    std::vector<float> logits_copy(logits.data.begin(), logits.data.end());
    // Layer 0 is the embedding of each token.
    for (int i = 0; i < 3; ++i)
        CHECK(max_abs_diff(model.hidden(0).row(i),
                           std::span<const float>(model.weights().embed).subspan(toks[i] * cfg.hidden_size, cfg.hidden_size)) == 0.0f);
    // The last captured state times lm_head gives the logits.
    for (int v = 0; v < cfg.vocab_size; v += 7) {
        float acc = 0;
        for (int d = 0; d < cfg.hidden_size; ++d)
            acc += model.hidden(1).row(2)[d] * model.weights().lm_head[v * cfg.hidden_size + d];
        CHECK(std::abs(acc - logits_copy[2 * cfg.vocab_size + v]) < 1e-4f);
    }
    CHECK(model.kv(0).len == 0);
    model.commit(std::vector<int>{0, 1});
    CHECK(model.kv(1).len == 2);
    CHECK(model.kv(1).k.size() == std::size_t(2 * cfg.kv_dim()));
    CHECK_THROWS_WITH(model.kv(5), Catch::Contains("kv(5)"));
    CHECK_THROWS_WITH(model.capture_hidden({9}), Catch::Contains("layer 9"));
}

TEST_CASE("bad shapes and trees are rejected with errors that name the value", "[model][errors]") {
    const Config cfg = test::tiny_config();
    SECTION("a config that cannot work") {
        Config bad = cfg;
        bad.num_key_value_heads = 3;
        CHECK_THROWS_WITH(bad.validate(), Catch::Contains("num_key_value_heads 3"));
        bad = cfg;
        bad.hidden_size = 30;
        CHECK_THROWS_WITH(bad.validate(), Catch::Contains("hidden_size 30"));
    }
    SECTION("weights that do not match the config") {
        Weights w = random_weights(cfg, 1);
        w.layers[1].wk.pop_back();
        CHECK_THROWS_WITH(CpuModel(cfg, w), Catch::Contains("model.layers.1.self_attn.k_proj.weight"));
    }
    CpuModel model(cfg, random_weights(cfg, 1));
    SECTION("a token id outside the vocabulary") {
        const Tree t = Tree::chain(std::vector<int>{1, 64});
        CHECK_THROWS_WITH(model.forward(t, 0), Catch::Contains("token id 64") && Catch::Contains("[0, 64)"));
    }
    SECTION("a tree that is not topologically ordered") {
        const std::vector<Node> nodes{{1, -1, 0}, {2, 2, 1}, {3, 0, 1}};
        CHECK_THROWS_WITH(Tree::from_nodes(nodes), Catch::Contains("node 1 has parent 2") && Catch::Contains("topologically"));
    }
    SECTION("a tree larger than the scratch rows") {
        std::vector<int> many(cfg.max_position_embeddings + 300, 1);
        const Tree t = Tree::chain(many);
        CHECK_THROWS_WITH(model.forward(t, 0), Catch::Contains("does not fit"));
    }
    SECTION("a commit of nodes that were never computed, or out of order") {
        const Tree t = Tree::chain(std::vector<int>{1, 2});
        model.forward(t, 0);
        CHECK_THROWS_WITH(model.commit(std::vector<int>{0, 5}), Catch::Contains("node 5"));
        CHECK_THROWS_WITH(model.commit(std::vector<int>{1, 0}), Catch::Contains("not root-first"));
    }
    SECTION("forward from a node that was not computed") {
        const Tree t = Tree::chain(std::vector<int>{1, 2});
        CHECK_THROWS_WITH(model.forward(t, 1), Catch::Contains("forward from node 1"));
    }
}

TEST_CASE("the fast paths match the plain-loop reference model", "[model][fast]") {
    const bool gqa = GENERATE(false, true);
    const int threads = GENERATE(1, 2, 3);
    const bool panels = GENERATE(true, false);  // W packed as panels (where the CPU has AVX-512) or as stored
    const bool bf16_inputs = GENERATE(true, false);  // bf16 models: x rounded where it enters a product, or not
    const test::Block block = GENERATE(test::Block::kLlama, test::Block::kQwen2, test::Block::kQwen3);
    Config cfg = test::tiny_block_config(block, gqa, 77);  // a vocabulary that is no multiple of the vector width
    cfg.intermediate_size = 50;
    const Weights w = test::random_block_weights(cfg, 21, 0.3f);
    ThreadPool pool(threads);
    CpuModel reference(cfg, w, {.reference = true});
    CpuModel fast(cfg, w, {.pool = &pool, .panels = panels});
    CpuModel bf16_ref(cfg, w, {.weight_format = WeightFormat::kBF16, .reference = true, .bf16_inputs = bf16_inputs});
    CpuModel bf16_fast(cfg, w,
                       {.weight_format = WeightFormat::kBF16, .pool = &pool, .panels = panels, .bf16_inputs = bf16_inputs});
    INFO("threads " << threads << ", gqa " << gqa << ", panels " << panels << ", bf16 inputs " << bf16_inputs << ", block "
                    << static_cast<int>(block));
    const std::vector<int> prefix{3, 1, 4, 1, 5, 9, 2, 6};
    const Tree tree = random_tree(20, cfg.vocab_size, 5);
    const auto logits = [&](CpuModel& m) {
        detail::prefill(m, prefix);
        const Rows r = m.forward(tree, 0);
        return std::vector<float>(r.data.begin(), r.data.end());
    };
    const auto ref = logits(reference), f = logits(fast), bref = logits(bf16_ref), bf = logits(bf16_fast);
    float scale = 0;
    for (float v : ref) scale = std::max(scale, std::abs(v));
    // Same products in a different summation order: float32 rounding only.
    CHECK(max_abs_diff(f, ref) <= 1e-5f * scale + 1e-6f);
    // With bf16 inputs x is rounded where it enters each product, so an ulp of float32 difference can
    // flip one element's rounding (2^-8 of it). Llama's weights here meet no such flip; the Qwen blocks'
    // do (0.3% of the largest logit measured, identical for 1, 2 and 3 threads; without bf16 inputs the
    // same models agree to float32 rounding).
    CHECK(max_abs_diff(bf, bref) <= (block != test::Block::kLlama && bf16_inputs ? 1e-2f * scale : 1e-5f * scale + 1e-6f));
    // bfloat16 weights keep 8 mantissa bits (relative error <= 2^-9 per weight); through two layers
    // and the head the worst logit moves by a few percent of the largest one (2.3% measured with f32
    // inputs), not more; rounding x as well adds errors of the same size.
    CHECK(max_abs_diff(bref, ref) <= 5e-2f * scale);
    CHECK(max_abs_diff(bref, ref) > 0.0f);  // and they do differ: the bf16 path is really taken
}

TEST_CASE("the KV cache grows as a generation reaches new positions, keeping every row", "[model][kv]") {
    SECTION("rows survive each growth") {
        detail::KvCache kv(2, 4, 2000, "model");
        CHECK(kv.capacity() == 0);  // nothing is allocated before the first forward
        kv.reserve(10, 0);
        CHECK(kv.capacity() == 256);
        for (int l = 0; l < 2; ++l)
            for (int i = 0; i < 10 * 4; ++i) kv.k(l)[i] = kv.v(l)[i] = static_cast<float>(100 * l + i);
        kv.reserve(300, 10);
        CHECK(kv.capacity() == 512);
        kv.reserve(1999, 10);
        CHECK(kv.capacity() == 1999);  // doubling stops at max_position_embeddings + max_tree_nodes
        for (int l = 0; l < 2; ++l)
            for (int i = 0; i < 10 * 4; ++i) {
                CHECK(kv.k(l)[i] == static_cast<float>(100 * l + i));
                CHECK(kv.v(l)[i] == static_cast<float>(100 * l + i));
            }
    }
    SECTION("a model that grew its cache computes what one that did not computes") {
        Config cfg = test::tiny_config();
        cfg.max_position_embeddings = 1000;
        const Weights w = random_weights(cfg, 3, 0.4f);
        std::vector<int> text(400);
        for (int i = 0; i < 400; ++i) text[i] = (i * 7 + 3) % cfg.vocab_size;
        CpuModel grown(cfg, w), whole(cfg, w);
        detail::prefill(grown, std::span<const int>(text).first(399));  // 32 rows at a time: grows 256 -> 512
        const Tree root = Tree::chain(std::span<const int>(text).last(1));
        const std::vector<float> a(grown.forward(root, 0).row(0).begin(), grown.forward(root, 0).row(0).end());
        const Rows all = whole.forward(Tree::chain(text), 0);  // 400 rows in one allocation
        for (int v = 0; v < cfg.vocab_size; ++v) CHECK_THAT(a[v], Catch::WithinAbs(all.row(399)[v], 1e-4));
    }
    SECTION("a context of two billion positions costs nothing until it is used") {
        Config cfg = test::tiny_config();
        cfg.max_position_embeddings = 2'000'000'000;  // all at once: 2e9 x 2 layers x 16 floats x 8 bytes = 512 GB
        CpuModel model(cfg, random_weights(cfg, 4, 0.4f));
        const std::vector<int> prompt{1, 2, 3};
        CHECK(autoregressive_generate(model, prompt, GenerateOptions{.max_new_tokens = 20}).tokens.size() == 20);
    }
}

TEST_CASE("sizes are checked in 64 bits before anything is allocated", "[model][errors]") {
    Config cfg = test::tiny_config();
    SECTION("a context whose KV rows overflow an int") {
        cfg.max_position_embeddings = 2147483647;
        CHECK_THROWS_WITH(CpuModel(cfg, random_weights(test::tiny_config(), 1)),
                          Catch::StartsWith("[specdec.model] max_position_embeddings 2147483647 + max_tree_nodes 256 = "
                                            "2147483903 KV rows"));
    }
    SECTION("parameters beyond the bound, named by field and bytes") {
        cfg.vocab_size = 2'000'000'000;
        cfg.hidden_size = 4096;
        cfg.num_attention_heads = 32;
        cfg.num_key_value_heads = 32;
        // embed and lm_head: 2e9 x 4096 x 4 bytes each
        CHECK_THROWS_WITH(cfg.validate(), Catch::StartsWith("[specdec.config] the shape needs ") &&
                                              Catch::Contains("vocab_size 2000000000 x hidden_size 4096 = 32768000000000 "
                                                              "bytes per embedding matrix (two: lm_head is not tied)"));
        CHECK_THROWS_WITH(random_weights(cfg, 1), Catch::StartsWith("[specdec.config] the shape needs "));
    }
    SECTION("layers beyond the bound") {
        cfg.num_hidden_layers = 2147483647;  // 463 GB of empty layer records alone, before any weight
        // a tiny layer: q, o (32 x 32), k, v (16 x 32), gate, up, down (48 x 32), two norms = 7744 floats
        CHECK_THROWS_WITH(cfg.validate(), Catch::Contains("num_hidden_layers 2147483647 x 30976 bytes per layer"));
    }
    SECTION("fused widths that overflow an int") {
        cfg.intermediate_size = 1'500'000'000;
        cfg.num_hidden_layers = 1;
        CHECK_THROWS_WITH(cfg.validate(), Catch::StartsWith("[specdec.config] intermediate_size 1500000000 x 2 (the fused "
                                                            "gate|up rows) exceeds 2147483647"));
    }
}

}  // namespace test_model
