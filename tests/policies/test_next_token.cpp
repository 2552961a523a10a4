// prefill, next_token_logits and next_token_distribution: the law the decoding loop draws from.
#include "catch.hpp"
#include "helpers.hpp"

namespace test_next_token {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

struct Target {
    Config cfg = test::tiny_config(true, 32);
    CpuModel model{cfg, random_weights(cfg, 7, 0.4f)};
};

}  // namespace

TEST_CASE("next_token_logits are the last row of one forward over the whole text", "[next_token]") {
    Target t;
    const std::vector<int> text{3, 1, 4, 1, 5, 9, 2, 6};
    t.model.reset();
    const Rows whole = t.model.forward(Tree::chain(text), 0);
    const std::span<const float> want = whole.row(static_cast<int>(text.size()) - 1);
    const std::vector<float> want_copy(want.begin(), want.end());
    const std::vector<float> got = next_token_logits(t.model, text);
    REQUIRE(got.size() == 32);
    for (std::size_t v = 0; v < got.size(); ++v) CHECK_THAT(got[v], Catch::WithinAbs(want_copy[v], 1e-4));
    CHECK(t.model.cache_len() == static_cast<int>(text.size()) - 1);  // the last token was the pending root
}

TEST_CASE("prefill appends a text to the cache in chunks of any size", "[next_token]") {
    Target t;
    const std::vector<int> text{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};
    const std::span<const int> head = std::span<const int>(text).first(text.size() - 1);
    t.model.reset();
    prefill(t.model, head.first(4));
    prefill(t.model, head.subspan(4), /*chunk=*/3);
    CHECK(t.model.cache_len() == static_cast<int>(head.size()));
    Tree root;
    root.add_root(text.back());
    const Rows rows = t.model.forward(root, 0);
    const std::vector<float> chunked(rows.row(0).begin(), rows.row(0).end());
    const std::vector<float> whole = next_token_logits(t.model, text);
    for (std::size_t v = 0; v < whole.size(); ++v) CHECK_THAT(chunked[v], Catch::WithinAbs(whole[v], 1e-4));
}

TEST_CASE("next_token_distribution is the law the loop samples from", "[next_token][sampling]") {
    Target t;
    const std::vector<int> text{2, 7, 1, 8};
    SECTION("greedy: one-hot at the token plain greedy decoding emits") {
        const std::vector<float> p = next_token_distribution(t.model, text, Sampling{});
        const Generation g = autoregressive_generate(t.model, text, GenerateOptions{.max_new_tokens = 1});
        CHECK(p[g.tokens[0]] == 1.0f);
        CHECK(std::count(p.begin(), p.end(), 0.0f) == 31);
    }
    SECTION("temperature T: softmax of logits / T, normalised") {
        const std::vector<float> logits = next_token_logits(t.model, text);
        const std::vector<float> p = next_token_distribution(t.model, text, Sampling{.temperature = 0.7f});
        double z = 0.0, sum = 0.0;
        for (float l : logits) z += std::exp(double(l) / 0.7);
        for (std::size_t v = 0; v < p.size(); ++v) {
            CHECK_THAT(p[v], Catch::WithinAbs(std::exp(double(logits[v]) / 0.7) / z, 1e-6));
            sum += p[v];
        }
        CHECK_THAT(sum, Catch::WithinAbs(1.0, 1e-5));
    }
    SECTION("top-k keeps k tokens, renormalised") {
        const std::vector<float> p = next_token_distribution(t.model, text, Sampling{.temperature = 1.0f, .top_k = 3});
        CHECK(std::count_if(p.begin(), p.end(), [](float x) { return x > 0.0f; }) == 3);
        double sum = 0.0;
        for (float x : p) sum += x;
        CHECK_THAT(sum, Catch::WithinAbs(1.0, 1e-5));
    }
}

TEST_CASE("next_token refuses an empty text and an invalid sampling, naming them", "[next_token][errors]") {
    Target t;
    CHECK_THROWS_WITH(next_token_logits(t.model, std::vector<int>{}), Catch::Contains("text is empty"));
    CHECK_THROWS_WITH(next_token_distribution(t.model, std::vector<int>{1}, Sampling{.temperature = -1.0f}),
                      Catch::Contains("temperature"));
    CHECK_THROWS_WITH(prefill(t.model, std::vector<int>{1, 2}, 0), Catch::Contains("chunk"));
}

}  // namespace test_next_token
