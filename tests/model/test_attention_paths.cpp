// The attention paths of the fast CPU model: one node split over key rows (attend_one), a few nodes
// with the queries in vector lanes (tree_attention.hpp), and the blocked matrix-product path for
// many (CpuModel::attend_blocked), all checked against the plain-loop reference model on trees,
// prefills and grown trees, with and without GQA, on one thread and three.
#include <bit>
#include <cmath>
#include <iomanip>
#include <limits>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_attention_paths {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

/// A random tree of n nodes below one root (parents drawn uniformly among earlier nodes).
Tree random_tree(int n, int vocab, std::uint64_t seed) {
    Tree t;
    StepRng rng{seed, 0, RngStream::kUser};
    t.add_root(static_cast<int>(rng.uniform(0, 0) * vocab));
    for (int i = 1; i < n; ++i) t.add(static_cast<int>(rng.uniform(i, 1) * vocab), static_cast<int>(rng.uniform(i, 0) * i));
    return t;
}

/// The first `n` nodes of `tree` (a tree grown later to the whole one).
Tree first_nodes(const Tree& tree, int n) {
    Tree t;
    for (int i = 0; i < n; ++i) t.add(tree[i].token, tree[i].parent);
    return t;
}

float max_abs(std::span<const float> a) {
    float m = 0;
    for (float v : a) m = std::max(m, std::abs(v));
    return m;
}

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
    float d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
    return d;
}

/// Head layouts: plain multi-head, GQA, ragged groups (3 query heads per kv head, so blocks of 21
/// nodes = 63 rows), multi-query, and llama2.c's head_dim 64.
struct Heads {
    int hidden, heads, kv_heads;
};

Config config_for(Heads h) {
    Config c = test::tiny_config(true, 77);
    c.hidden_size = h.hidden;
    c.num_attention_heads = h.heads;
    c.num_key_value_heads = h.kv_heads;
    c.intermediate_size = 40;
    c.max_position_embeddings = 512;
    return c;
}

}  // namespace

TEST_CASE("the fast attention paths match the plain-loop reference model", "[model][attention][fast]") {
    const Heads heads = GENERATE(Heads{32, 4, 4}, Heads{32, 4, 2}, Heads{48, 6, 2}, Heads{36, 3, 1}, Heads{128, 2, 1});
    // Where AVX-512 runs every n takes tree_attention: 1 (key rows in the lanes), and 2..200 (queries
    // in the lanes: 1-38 vectors of them, head sizes 8, 12 and 64, partial blocks of 16); elsewhere
    // attend_one for 1 and the blocked matrix products from 2.
    const int n = GENERATE(1, 2, 16, 40, 200);
    const int threads = GENERATE(1, 3);
    const Config cfg = config_for(heads);
    // Weights scaled like test_model's (0.3 at width 32) so that the wider shapes are no worse conditioned.
    const Weights w = random_weights(cfg, 31, 0.3f * std::sqrt(32.0f / static_cast<float>(heads.hidden)));
    ThreadPool pool(threads);
    CpuModel reference(cfg, w, {.reference = true});
    CpuModel fast(cfg, w, {.pool = &pool});
    INFO("hidden " << heads.hidden << ", heads " << heads.heads << ", kv heads " << heads.kv_heads << ", n " << n
                   << ", threads " << threads);

    // Logits of `forward(tree, first)` after committing `prefix`, and of forward(first_nodes(tree, first)) before it.
    const auto logits = [&](CpuModel& m, const std::vector<int>& prefix, const Tree& tree, int first) {
        m.reset();
        detail::prefill(m, prefix);
        if (first > 0) m.forward(first_nodes(tree, first), 0);
        const Rows r = m.forward(tree, first);
        return std::vector<float>(r.data.begin(), r.data.end());
    };
    // Same products in another summation order, and exp by a polynomial within 2 ulp: float32
    // rounding only, through two layers and the head. Measured: at most 4e-6 of the largest logit
    // (3e-6 with the per-(node, head) loop and the same matrix products), so 1e-5 as in test_model.
    const auto check = [&](const std::vector<int>& prefix, const Tree& tree, int first) {
        const auto ref = logits(reference, prefix, tree, first), got = logits(fast, prefix, tree, first);
        REQUIRE(got.size() == ref.size());
        CHECK_THAT(max_abs_diff(got, ref), Catch::Matchers::WithinAbs(0.0, 1e-5 * max_abs(ref) + 1e-6));
    };

    SECTION("a random tree on a committed context") {
        check({3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5}, random_tree(n, cfg.vocab_size, 17 + n), 0);
    }
    SECTION("a prefill: a chain on an empty cache (the causal mask)") {
        std::vector<int> prompt(n);
        for (int i = 0; i < n; ++i) prompt[i] = (i * 13 + 7) % cfg.vocab_size;
        check({}, Tree::chain(prompt), 0);
    }
    SECTION("a tree grown from its first nodes: forward(tree, first) reuses their rows") {
        check({2, 7, 1, 8}, random_tree(n + 9, cfg.vocab_size, 5 + n), 9);
    }
    SECTION("a tree on a long context (key rows in several chunks, merged)") {
        std::vector<int> prefix(300);
        for (int i = 0; i < 300; ++i) prefix[i] = (i * 29 + 3) % cfg.vocab_size;
        check(prefix, random_tree(std::min(n, 150), cfg.vocab_size, 11 + n), 0);
    }
}

TEST_CASE("a node's logits in a verified tree are bit-identical to decoding its path token by token",
          "[model][attention][lossless]") {
    // What GreedyMatch's "output = plain greedy decoding" rests on: near-ties make "equal up to
    // rounding" not enough (tree_attention.hpp, panel_tile). Tree forward on 1 thread, decode steps
    // on 3: the split over threads must not matter either.
    if (!detail::tree_attention_available() || !panels_available()) {
        WARN("this CPU lacks AVX-512: the fast paths are not batch-invariant here, and not tested");
        return;
    }
    const Heads heads = GENERATE(Heads{32, 4, 4}, Heads{32, 4, 2}, Heads{36, 3, 1}, Heads{128, 2, 1});
    const WeightFormat format = GENERATE(WeightFormat::kF32, WeightFormat::kBF16);
    const Config cfg = config_for(heads);
    const Weights w = random_weights(cfg, 41, 0.3f * std::sqrt(32.0f / static_cast<float>(heads.hidden)));
    ThreadPool pool1(1), pool3(3);
    CpuModel tree_model(cfg, w, {.weight_format = format, .pool = &pool1});
    CpuModel step_model(cfg, w, {.weight_format = format, .pool = &pool3});
    const std::vector<int> prefix{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4};
    const Tree tree = random_tree(21, cfg.vocab_size, 99);
    detail::prefill(tree_model, prefix);
    const Rows verified = tree_model.forward(tree, 0);
    const std::vector<float> all(verified.data.begin(), verified.data.end());
    const int V = cfg.vocab_size;
    for (int node = 0; node < tree.size(); ++node) {
        step_model.reset();
        detail::prefill(step_model, prefix);
        Rows step{};
        for (int a : tree.path_to(node)) {
            step = step_model.forward(Tree::chain(std::vector<int>{tree[a].token}), 0);
            if (a != node) step_model.commit(std::vector<int>{0});
        }
        INFO("hidden " << heads.hidden << ", heads " << heads.heads << "/" << heads.kv_heads << ", "
                       << (format == WeightFormat::kF32 ? "f32" : "bf16") << ", node " << node << " at depth "
                       << tree[node].depth);
        int differing = 0;
        for (int t = 0; t < V; ++t)
            differing += std::bit_cast<std::uint32_t>(step.data[t]) != std::bit_cast<std::uint32_t>(all[std::size_t(node) * V + t]);
        CHECK(differing == 0);
    }
}

TEST_CASE("softmax numerators follow std::exp and give masked keys exactly zero", "[model][attention]") {
    const int len = GENERATE(1, 7, 16, 17, 40, 333);
    std::vector<float> scores(len);
    StepRng rng{static_cast<std::uint64_t>(len), 0, RngStream::kUser};
    for (int r = 0; r < len; ++r) scores[r] = (r % 4 == 2 ? 600.0f : 40.0f) * (rng.uniform(r) - 0.5f);  // some underflow
    for (int r = 1; r < len; r += 3) scores[r] = -std::numeric_limits<float>::infinity();  // masked keys
    const float scale = 0.35f;
    const float mx = *std::max_element(scores.begin(), scores.end());
    std::vector<float> expected(len);
    double expected_sum = 0;
    for (int r = 0; r < len; ++r) expected_sum += (expected[r] = std::exp((scores[r] - mx) * scale));

    // Every implementation this CPU runs, not only the one the dispatch picks.
    struct Path {
        const char* name;
        float (*run)(float*, int, float);
    };
    std::vector<Path> paths{{"dispatch", detail::softmax_numerators}};
#if defined(__x86_64__)
    if (cpu_features().avx2_fma) paths.push_back({"avx2", detail::softmax_numerators_avx2});
    if (cpu_features().avx512) paths.push_back({"avx512", detail::softmax_numerators_avx512});
#endif
    for (const Path& path : paths) {
        std::vector<float> p = scores;
        const float sum = path.run(p.data(), len, scale);
        // Cephes' expf polynomial is within 2 ulp of expf; allow 4 (2^-21 relative). Values below
        // expf's normal range (x < -87) may flush to zero.
        for (int r = 0; r < len; ++r) {
            INFO(path.name << ", r " << r << ": expected " << std::setprecision(9) << expected[r] << ", got " << p[r]);
            if (expected[r] == 0.0f) CHECK(p[r] == 0.0f);
            else if (expected[r] < 1e-37f) CHECK(p[r] <= 1e-37f);
            else CHECK_THAT(p[r], Catch::Matchers::WithinRel(expected[r], 4.8e-7f));
        }
        INFO(path.name);
        CHECK_THAT(sum, Catch::Matchers::WithinRel(expected_sum, 1e-6));
    }
}

TEST_CASE("decode steps over long caches (attention split over chunks of key rows) match the reference", "[model][attention][fast]") {
    const Heads heads = GENERATE(Heads{32, 4, 4}, Heads{48, 6, 2}, Heads{128, 2, 1});
    const int context = GENERATE(0, 31, 32, 95, 300);
    const int threads = GENERATE(1, 2, 3);
    const Config cfg = config_for(heads);
    const Weights w = random_weights(cfg, 37, 0.3f * std::sqrt(32.0f / static_cast<float>(heads.hidden)));
    ThreadPool pool(threads);
    CpuModel reference(cfg, w, {.reference = true});
    CpuModel fast(cfg, w, {.pool = &pool});
    INFO("hidden " << heads.hidden << ", heads " << heads.heads << ", kv heads " << heads.kv_heads << ", context "
                   << context << ", threads " << threads);
    std::vector<int> prompt(context);
    for (int i = 0; i < context; ++i) prompt[i] = (i * 29 + 3) % cfg.vocab_size;
    if (context > 0) {
        detail::prefill(reference, prompt);
        detail::prefill(fast, prompt);
    }
    // Three decode steps, each one node (the tail of the text), committed before the next.
    for (int step = 0; step < 3; ++step) {
        const Tree one = Tree::chain(std::vector<int>{(step * 7 + 11) % cfg.vocab_size});
        const Rows r = reference.forward(one, 0);
        const std::vector<float> ref(r.data.begin(), r.data.end());
        const Rows g = fast.forward(one, 0);
        const std::vector<float> got(g.data.begin(), g.data.end());
        // The chunks' partial sums merge in another order: float32 rounding only, as above.
        CHECK_THAT(max_abs_diff(got, ref), Catch::Matchers::WithinAbs(0.0, 1e-5 * max_abs(ref) + 1e-6));
        const std::vector<int> path{0};
        reference.commit(path);
        fast.commit(path);
    }
}

}  // namespace test_attention_paths
