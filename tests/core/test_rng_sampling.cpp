// Counter-based randomness and the processing of logits into the distribution we sample from.
#include "catch.hpp"
#include "helpers.hpp"

using namespace specdec;

TEST_CASE("Philox4x32-10 reproduces the Random123 known-answer vectors", "[rng]") {
    // Known-answer tests from Random123's kat_vectors (philox4x32_10).
    CHECK(philox4x32({0, 0, 0, 0}, {0, 0}) == std::array<std::uint32_t, 4>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
    CHECK(philox4x32({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}) ==
          std::array<std::uint32_t, 4>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
    CHECK(philox4x32({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}) ==
          std::array<std::uint32_t, 4>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("uniforms lie in 0 <= u < 1, keyed by (seed, step, node, k) and roughly uniform", "[rng]") {
    const StepRng a{42, 7, RngStream::kAccept};
    CHECK(a.uniform(3, 1) == a.uniform(3, 1));
    CHECK(a.uniform(3, 1) != a.uniform(3, 2));
    CHECK(a.uniform(3, 1) != a.with_stream(RngStream::kDraft).uniform(3, 1));
    CHECK(a.uniform(3, 1) != StepRng{43, 7, RngStream::kAccept}.uniform(3, 1));
    // a scope keys its own draws; scope 0 is the counter as it was before scopes (the CUDA kernels' coins)
    CHECK(a.uniform(3, 1) != StepRng{42, 7, RngStream::kAccept, 1}.uniform(3, 1));
    CHECK(a.uniform(3, 1) == detail::philox_uniform(42, 7, static_cast<std::uint32_t>(RngStream::kAccept), 3, 1));
    CHECK(StepRng{42, 7, RngStream::kAccept, 1}.stream_word() != StepRng{42, 7, RngStream::kDraft, 0}.stream_word());
    CHECK(a.with_stream(RngStream::kCascade).scope == a.scope);
    std::vector<int> bins(10, 0);
    for (std::uint32_t i = 0; i < 20000; ++i) {
        const float u = a.uniform(i);
        REQUIRE(u >= 0.0f);
        REQUIRE(u < 1.0f);
        ++bins[static_cast<int>(u * 10)];
    }
    double chi = 0;
    for (int b : bins) chi += (b - 2000.0) * (b - 2000.0) / 2000.0;
    CHECK(chi < test::chi_square_critical(9));
}

TEST_CASE("processed probabilities apply temperature, top-k and top-p", "[sampling]") {
    const std::vector<float> logits{2.0f, 1.0f, 0.0f, -1.0f, 3.0f};
    std::vector<float> p(5);
    SECTION("greedy is one-hot at the argmax, ties to the lowest index") {
        processed_probs(logits, Sampling{.temperature = 0}, p);
        CHECK(p == std::vector<float>{0, 0, 0, 0, 1});
        const std::vector<float> tie{1, 3, 3};
        CHECK(argmax(tie) == 1);
    }
    SECTION("temperature 1 is softmax") {
        processed_probs(logits, Sampling{.temperature = 1}, p);
        double z = 0;
        for (float l : logits) z += std::exp(l);
        for (int i = 0; i < 5; ++i) CHECK_THAT(p[i], Catch::WithinRel(static_cast<float>(std::exp(logits[i]) / z), 1e-5f));
    }
    SECTION("top-k keeps the k largest") {
        processed_probs(logits, Sampling{.temperature = 1, .top_k = 2}, p);
        CHECK(p[1] == 0.0f);
        CHECK(p[2] == 0.0f);
        CHECK(p[3] == 0.0f);
        CHECK_THAT(p[0] + p[4], Catch::WithinAbs(1.0, 1e-6));
        CHECK_THAT(p[4] / p[0], Catch::WithinRel(std::exp(1.0f), 1e-5f));
    }
    SECTION("top-p keeps the smallest prefix reaching the mass") {
        processed_probs(logits, Sampling{.temperature = 1, .top_p = 0.7f}, p);  // masses .64 .23 .09 ...
        CHECK(p[4] > 0.0f);
        CHECK(p[0] > 0.0f);
        CHECK(p[1] == 0.0f);
        CHECK_THAT(p[0] + p[4], Catch::WithinAbs(1.0, 1e-6));
    }
}

TEST_CASE("inverse-CDF sampling never returns a zero-probability token", "[sampling]") {
    const std::vector<float> p{0.0f, 0.25f, 0.0f, 0.75f, 0.0f};
    CHECK(sample_index(p, 0.0f) == 1);
    CHECK(sample_index(p, 0.2499f) == 1);
    CHECK(sample_index(p, 0.25f) == 3);
    CHECK(sample_index(p, 0.99999994f) == 3);
    const std::vector<float> zero(3, 0.0f);
    CHECK_THROWS_WITH(sample_index(zero, 0.5f), Catch::Contains("all-zero"));
}

TEST_CASE("top indices rank the largest first, ties to the lower index, as argmax does", "[sampling]") {
    const std::vector<float> q{.1f, .3f, .2f, .3f, .1f};
    CHECK(detail::top_indices(q, 3) == std::vector<int>{1, 3, 2});
    CHECK(detail::top_indices(q, 9) == std::vector<int>{1, 3, 2, 0, 4});  // clipped to the size
    CHECK(detail::top_indices(q, 0).empty());
    CHECK(detail::top_indices(q, 1).front() == argmax(q));
    const std::vector<double> joint{.5, .25, .5};
    CHECK(detail::top_indices(joint, 2) == std::vector<int>{0, 2});
}

TEST_CASE("invalid sampling parameters are rejected naming the field", "[sampling][errors]") {
    CHECK_THROWS_WITH((Sampling{.temperature = -1}.validate()), Catch::Contains("temperature"));
    CHECK_THROWS_WITH((Sampling{.temperature = NAN}.validate()), Catch::Contains("temperature"));
    CHECK_THROWS_WITH((Sampling{.temperature = 1, .top_k = -3}.validate()), Catch::Contains("top_k") && Catch::Contains("-3"));
    CHECK_THROWS_WITH((Sampling{.temperature = 1, .top_p = 0}.validate()), Catch::Contains("top_p"));
    CHECK_THROWS_WITH((Sampling{.temperature = 1, .top_p = 1.5f}.validate()), Catch::Contains("1.5"));
    CHECK_NOTHROW(Sampling{.temperature = 0.7f, .top_k = 50, .top_p = 0.9f}.validate());
}

TEST_CASE("bfloat16 conversion rounds to nearest even and widens exactly", "[bf16]") {
    CHECK(to_float(to_bf16(1.0f)) == 1.0f);
    CHECK(to_bf16(1.0f + 0x1p-8f).bits == to_bf16(1.0f).bits);            // halfway: to even
    CHECK(to_bf16(1.0f + 0x1p-8f + 0x1p-12f).bits == to_bf16(1.0f).bits + 1);  // above halfway: up
    CHECK(std::isnan(to_float(to_bf16(NAN))));
    CHECK(to_float(to_bf16(-0.0f)) == 0.0f);
    CHECK(std::signbit(to_float(to_bf16(-0.0f))));
}
