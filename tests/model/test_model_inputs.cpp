// The model's two doors for drafters fed by a target: supplied input vectors instead of token ids
// (HF's inputs_embeds), and the hidden states of every committed token kept like the KV rows.
#include <algorithm>
#include <numeric>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_model_inputs {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

/// The model's own embedding rows for nodes first..N-1 of `tree`: (N - first, D).
std::vector<float> embedding_rows(const CpuModel& m, const Tree& tree, int first) {
    std::vector<float> rows;
    for (int i = first; i < tree.size(); ++i) {
        const auto e = m.embedding(tree[i].token);
        rows.insert(rows.end(), e.begin(), e.end());
    }
    return rows;
}

std::vector<float> copy(Rows r) { return {r.data.begin(), r.data.end()}; }

float max_abs_diff(std::span<const float> a, std::span<const float> b) {
    float d = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::abs(a[i] - b[i]));
    return d;
}

/// A root with two children, each with two children: a branchy tree to commit a non-contiguous path of.
Tree two_by_two(std::span<const int> tokens) {
    Tree t;
    t.add_root(tokens[0]);
    for (int a = 0; a < 2; ++a) {
        const int child = t.add(tokens[1 + a], 0);
        for (int b = 0; b < 2; ++b) t.add(tokens[3 + 2 * a + b], child);
    }
    return t;
}

static_assert(ExposesCommittedHidden<CpuModel>);

}  // namespace

TEST_CASE("a forward from the model's own embedding rows equals the forward from token ids bit for bit",
          "[model][embeddings]") {
    const WeightFormat format = GENERATE(WeightFormat::kF32, WeightFormat::kBF16);
    const bool reference = GENERATE(false, true);
    CAPTURE(static_cast<int>(format), reference);
    const Config cfg = test::tiny_config();
    const Weights w = random_weights(cfg, 11, 0.3f);
    const ModelOptions opts{.weight_format = format, .reference = reference};
    CpuModel by_id(cfg, w, opts), by_vector(cfg, w, opts);

    // The prompt: tokens on one side, their embedding rows on the other, committed in two chunks.
    const std::vector<int> prompt{3, 14, 15, 9, 26, 5, 35};
    for (const auto& [at, len] : {std::pair{0, 4}, std::pair{4, 3}}) {
        const Tree chunk = Tree::chain(std::span(prompt).subspan(at, len));
        std::vector<int> all(len);
        std::iota(all.begin(), all.end(), 0);
        CHECK(copy(by_id.forward(chunk, 0)) ==
              copy(by_vector.forward_embeddings(chunk, 0, Rows{embedding_rows(by_vector, chunk, 0), cfg.hidden_size})));
        by_id.commit(all);
        by_vector.commit(all);
    }

    // A tree grown in two forwards (a drafter's depth-by-depth use), then a non-contiguous path committed.
    const std::vector<int> tokens{8, 1, 2, 40, 41, 50, 51};
    Tree top;  // the root and its two children
    top.add_root(tokens[0]);
    top.add(tokens[1], 0);
    top.add(tokens[2], 0);
    CHECK(copy(by_id.forward(top, 0)) ==
          copy(by_vector.forward_embeddings(top, 0, Rows{embedding_rows(by_vector, top, 0), cfg.hidden_size})));
    Tree grown = top;  // then two children of each, scored from node 3 on
    for (int a = 0; a < 2; ++a)
        for (int b = 0; b < 2; ++b) grown.add(tokens[3 + 2 * a + b], 1 + a);
    const std::vector<float> rows = embedding_rows(by_vector, grown, 3);
    CHECK(copy(by_id.forward(grown, 3)) == copy(by_vector.forward_embeddings(grown, 3, Rows{rows, cfg.hidden_size})));
    const std::vector<int> path{0, 2, 5};  // root, its second child, that child's first child
    by_id.commit(path);
    by_vector.commit(path);
    REQUIRE(by_id.cache_len() == by_vector.cache_len());
    for (int l = 0; l < cfg.num_hidden_layers; ++l) {
        const KvView a = by_id.kv(l), b = by_vector.kv(l);
        CHECK(std::equal(a.k.begin(), a.k.end(), b.k.begin()));
        CHECK(std::equal(a.v.begin(), a.v.end(), b.v.begin()));
    }
    const Tree next = Tree::chain(std::vector<int>{17});
    CHECK(copy(by_id.forward(next, 0)) == copy(by_vector.forward(next, 0)));
}

TEST_CASE("supplied input vectors of the wrong shape are named", "[model][embeddings][errors]") {
    const Config cfg = test::tiny_config();
    CpuModel m(cfg, random_weights(cfg, 1));
    const Tree t = Tree::chain(std::vector<int>{1, 2, 3});
    const std::vector<float> short_rows(2 * cfg.hidden_size);
    CHECK_THROWS_WITH(m.forward_embeddings(t, 0, Rows{short_rows, cfg.hidden_size}),
                      Catch::Contains("[specdec.model] forward_embeddings: inputs are (2, 32), expected") &&
                          Catch::Contains("(3, 32)"));
    const std::vector<float> wide(3 * 40);
    CHECK_THROWS_WITH(m.forward_embeddings(t, 0, Rows{wide, 40}), Catch::Contains("(3, 40)"));
    CHECK_THROWS_WITH(m.embedding(cfg.vocab_size), Catch::Contains("embedding(64): outside the vocabulary"));
}

TEST_CASE("supplied input vectors that are not embeddings change the output and are captured as layer 0",
          "[model][embeddings]") {
    const Config cfg = test::tiny_config();
    CpuModel m(cfg, random_weights(cfg, 4, 0.3f));
    m.capture_hidden({0});
    const Tree t = Tree::chain(std::vector<int>{0, 0});
    std::vector<float> soft(2 * cfg.hidden_size);
    for (std::size_t i = 0; i < soft.size(); ++i) soft[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
    const std::vector<float> from_vectors = copy(m.forward_embeddings(t, 0, Rows{soft, cfg.hidden_size}));
    CHECK(copy(m.hidden(0)) == soft);  // HF's hidden_states[0] is inputs_embeds
    CHECK(copy(m.forward(t, 0)) != from_vectors);
}

TEST_CASE("committed hidden states cover the whole committed text and move with commit like the KV rows",
          "[model][hidden]") {
    const Config cfg = test::tiny_config();
    const Weights w = random_weights(cfg, 21, 0.3f);
    const std::vector<int> layers{0, 1, cfg.num_hidden_layers};
    CpuModel model(cfg, w), fresh(cfg, w);
    model.capture_hidden(layers);
    fresh.capture_hidden(layers);

    // 70 prompt tokens: three prefill chunks of 32, 32 and 6.
    std::vector<int> text(70);
    for (std::size_t i = 0; i < text.size(); ++i) text[i] = static_cast<int>((13 * i + 5) % cfg.vocab_size);
    detail::prefill(model, text);
    REQUIRE(model.cache_len() == 70);
    // A tree from the root, then a path through its second branch: rows 0, 2, 5 of the tree move to 70..72.
    const std::vector<int> tokens{7, 1, 2, 40, 41, 50, 51};
    model.forward(two_by_two(tokens), 0);
    model.commit(std::vector<int>{0, 4, 6});  // two_by_two's order: 0, 1, (2, 3), 4, (5, 6)
    text.insert(text.end(), {7, 2, 51});

    // The same text through a model in one chain: its hidden states are the reference.
    fresh.forward(Tree::chain(text), 0);
    for (std::size_t c = 0; c < layers.size(); ++c) {
        CAPTURE(layers[c]);
        const Rows kept = model.committed_hidden(static_cast<int>(c)), want = fresh.hidden(static_cast<int>(c));
        REQUIRE(kept.rows() == static_cast<int>(text.size()));
        REQUIRE(kept.cols == cfg.hidden_size);
        CHECK(max_abs_diff(kept.data, want.data) < 1e-5f);
    }

    SECTION("truncate keeps the rows before the cut") {
        model.truncate(40);
        const Rows kept = model.committed_hidden(1);
        CHECK(kept.rows() == 40);
        CHECK(max_abs_diff(kept.data, fresh.hidden(1).data.first(kept.data.size())) < 1e-5f);
    }
    SECTION("states of tokens forwarded before capture_hidden are missing, and reading them is an error") {
        CpuModel late(cfg, w);
        detail::prefill(late, std::span(text).first(10));
        late.capture_hidden({1});
        CHECK_THROWS_WITH(late.committed_hidden(0),
                          Catch::Contains("[specdec.model] committed_hidden: capture_hidden was called after 10 tokens"));
        late.reset();
        detail::prefill(late, std::span(text).first(10));
        CHECK(late.committed_hidden(0).rows() == 10);
        CHECK_THROWS_WITH(late.committed_hidden(1), Catch::Contains("committed_hidden(1): 1 layers are captured"));
    }
    SECTION("readers add their layers beside the captured ones, each read by its own index") {
        const int L = cfg.num_hidden_layers;
        const std::size_t first10 = 10 * static_cast<std::size_t>(cfg.hidden_size);
        CpuModel shared(cfg, w);
        CHECK(shared.add_hidden_layer(L) == 0);
        detail::prefill(shared, std::span(text).first(10));
        CHECK(shared.add_hidden_layer(1) == 1);  // a second reader, after 10 tokens were committed
        CHECK(shared.add_hidden_layer(L) == 0);  // already there: the same index
        CHECK(shared.hidden_index(1) == 1);
        CHECK(max_abs_diff(shared.committed_hidden(0).data, fresh.hidden(2).data.first(first10)) < 1e-5f);
        CHECK_THROWS_WITH(shared.committed_hidden(1), Catch::Contains("after 10 tokens") && Catch::Contains("of layer 1"));
        shared.reset();
        detail::prefill(shared, std::span(text).first(10));
        CHECK(max_abs_diff(shared.committed_hidden(0).data, fresh.hidden(2).data.first(first10)) < 1e-5f);
        CHECK(max_abs_diff(shared.committed_hidden(1).data, fresh.hidden(1).data.first(first10)) < 1e-5f);
        CHECK_THROWS_WITH(shared.hidden_index(L + 5), Catch::Contains("layer " + std::to_string(L + 5) + " is not captured") &&
                                                          Catch::Contains("{" + std::to_string(L) + ", 1}"));
        CHECK_THROWS_WITH(shared.add_hidden_layer(L + 1), Catch::Contains("add_hidden_layer: layer " + std::to_string(L + 1)));
    }
}

}  // namespace test_model_inputs
