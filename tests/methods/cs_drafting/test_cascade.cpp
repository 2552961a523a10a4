// CS Drafting's cascades as compositions: a Review is a proposer, nests to any depth, takes turns in a
// Horizontal draft; the target's output never changes (greedy: token for token); lenience stays
// between drafters; the K-matrix and every option are checked.
#include "catch.hpp"
#include "helpers.hpp"

namespace test_cascade {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

/// A target and two drafters of decreasing quality (noise), all sharing one vocabulary.
struct Trio {
    Config cfg = test::tiny_config();
    Weights w = random_weights(cfg, 11, 0.4f);
    CpuModel target{cfg, w};
    CpuModel mid{cfg, perturbed(cfg, w, 0.15f, 12)};
    CpuModel small{cfg, perturbed(cfg, w, 0.35f, 13)};
};

template <class P, class B>
Generation greedy_run(Trio& m, P& proposer, B builder, const std::vector<int>& prompt, int n = 40) {
    TreeVerifier verifier;
    GreedyMatch acceptor;
    return speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt,
                                GenerateOptions{.max_new_tokens = n});
}

void check_partial(const Generation& g) {
    int rejected = 0, accepted = 0;
    for (const StepRecord& s : g.steps) {
        rejected += s.n_accepted < s.depth;
        accepted += s.n_accepted;
    }
    CHECK(accepted > 0);
    CHECK(rejected > 0);
}

}  // namespace

TEST_CASE("a vertical cascade is a proposer, nests to any depth, and keeps greedy output exact", "[cascade][lossless]") {
    Trio m;
    const std::vector<int> prompt{5, 9, 2, 33};
    const Generation plain = autoregressive_generate(m.target, prompt, GenerateOptions{.max_new_tokens = 40});
    test::Stepper stepper;
    STATIC_REQUIRE(DraftsTokens<test::Stepper>);
    STATIC_REQUIRE(Proposer<Review<CpuModel, test::Stepper>>);
    STATIC_REQUIRE(Proposer<Review<CpuModel, Review<CpuModel, test::Stepper>>>);

    SECTION("target <- small <- stepper") {
        Review small(m.small, stepper, {.budget = 6});
        const Generation g = greedy_run(m, small, Chain{.gamma = 5}, prompt);
        CHECK(g.tokens == plain.tokens);
        check_partial(g);
        CHECK(small.n_calls() > 0);
    }
    SECTION("target <- mid <- small <- stepper, with lenience between the drafters") {
        Review small(m.small, stepper, {.budget = 4});
        Review mid(m.mid, small, {.budget = 6, .lenience = {3.0}});
        const Generation g = greedy_run(m, mid, Chain{.gamma = 6}, prompt);
        CHECK(g.tokens == plain.tokens);
        check_partial(g);
        const auto use = mid.usage();
        REQUIRE(use.size() == 2);
        CHECK(use[0].model == &m.mid);
        CHECK(use[1].model == &m.small);
        CHECK(use[0].calls == mid.n_reviews());
        CHECK(use[1].calls == small.n_reviews());
        CHECK(use[0].calls > 0);
        CHECK(use[1].calls >= use[0].calls);  // every mid review needs at least one small review
    }
    SECTION("horizontal: the mid level drafts first, then the small level, then the stepper") {
        Review small(m.small, stepper, {.budget = 3});
        Horizontal below_mid({2, 3}, small, stepper);
        Review mid(m.mid, below_mid, {.budget = 5, .lenience = {2.0}});
        Horizontal top({2, 3, 2}, mid, small, stepper);
        CHECK(top.total_budget() == 7);
        const Generation g = greedy_run(m, top, Chain{.gamma = 7}, prompt);
        CHECK(g.tokens == plain.tokens);
        check_partial(g);
        // The small level serves below mid and at the top: its forwards happened once and count once.
        const auto use = top.usage();
        REQUIRE(use.size() == 2);
        CHECK(use[0].model == &m.mid);
        CHECK(use[1].model == &m.small);
        CHECK(use[0].calls == mid.n_reviews());
        CHECK(use[1].calls == small.n_reviews());
        CHECK(top.n_calls() == mid.n_reviews() + small.n_reviews());
        CHECK(mid.n_calls() == mid.n_reviews() + small.n_reviews());  // below mid: the same small level
        long per_step = 0;
        for (const StepRecord& r : g.steps) per_step += r.n_draft_calls;
        CHECK(per_step == top.n_calls());
    }
    SECTION("the tree variant: 8 children of each lead node (CS Drafting App. B)") {
        Review small(m.small, stepper, {.budget = 1});
        Horizontal top({1, 3}, small, stepper);
        ExpandedChain builder{.gamma = 4, .sizes = ExpansionSizes::fixed(7), .max_drafts = 32};
        const Generation g = greedy_run(m, top, builder, prompt);
        CHECK(g.tokens == plain.tokens);
    }
}

TEST_CASE("a review at lenience 1 drafts exactly the reviewer's own greedy text", "[cascade]") {
    Trio m;
    const std::vector<int> prompt{7, 1, 19};
    test::Stepper stepper;
    Review mid(m.mid, stepper, {.budget = 5});
    // Reviewing with the drafter as "target": its output must be the drafter's greedy text, and the
    // cascade's drafts must be accepted whole (they are that text).
    const Generation own = autoregressive_generate(m.mid, prompt, GenerateOptions{.max_new_tokens = 24});
    Sampling greedy;
    std::vector<int> text = prompt;
    const StepContext ctx{greedy, StepRng{1, 0, RngStream::kAccept}, text, static_cast<int>(prompt.size())};
    mid.start(prompt);
    const Draft d = detail::draft_tokens(mid, 24, ctx);
    REQUIRE(d.size() == 24);
    for (int i = 0; i < 24; ++i) {
        CHECK(d[i].token == own.tokens[i]);
        CHECK_FALSE(d[i].sampled);
        CHECK(d[i].q.size() == static_cast<std::size_t>(m.cfg.vocab_size));
    }
}

namespace {

/// A token drafter that records the scope of every call it gets (and drafts like the Stepper).
struct ScopeRecorder {
    test::Stepper stepper;
    std::vector<std::uint32_t> scopes;
    int vocab_size() const { return stepper.vocab_size(); }
    void start(std::span<const int> p) { stepper.start(p); }
    void observe(const StepOutcome& o) { stepper.observe(o); }
    Draft draft(std::span<const int> after, int limit, const StepContext& ctx) {
        scopes.push_back(ctx.rng.scope);
        return stepper.draft(after, limit, ctx);
    }
};

}  // namespace

TEST_CASE("every part of a cascade draws at scopes of its own, whatever the nesting", "[cascade][rng]") {
    Trio m;
    ScopeRecorder first, below, last;
    Review level(m.mid, below, {.budget = 2});
    Horizontal top({1, 2, 1}, first, level, last);
    // scopes are dense: Horizontal = its parts', Review = 1 + its level below's, any other proposer 1
    STATIC_REQUIRE(rng_scopes_of<test::Stepper>() == 1);
    STATIC_REQUIRE(decltype(level)::rng_scopes() == 2);
    STATIC_REQUIRE(decltype(top)::rng_scopes() == 4);
    // The loop's builder and acceptor draw at scope 0; the builder hands the proposer scope 1, and the
    // cascade gives first 1, the Review 2 (its level below 3), last 4.
    const std::vector<int> prompt{5, 9, 2};
    greedy_run(m, top, Chain{.gamma = 4}, prompt, 12);
    REQUIRE_FALSE(first.scopes.empty());
    REQUIRE_FALSE(below.scopes.empty());
    REQUIRE_FALSE(last.scopes.empty());
    for (std::uint32_t s : first.scopes) CHECK(s == 1);
    for (std::uint32_t s : below.scopes) CHECK(s == 3);
    for (std::uint32_t s : last.scopes) CHECK(s == 4);
    const Sampling greedy;
    const StepContext ctx{greedy, StepRng{}, prompt, 3};
    CHECK_THROWS_WITH(ctx.scoped(kRngScopes),
                      Catch::StartsWith("[specdec.rng] scope 16777216 is beyond"));
}

TEST_CASE("under sampling at lenience 1 each drafted token's law is the reviewer's distribution", "[cascade]") {
    Trio m;
    const std::vector<int> prompt{3, 14, 15};
    test::Stepper stepper;
    const Sampling s{.temperature = 1.0f};
    Review mid(m.mid, stepper, {.budget = 4});
    std::vector<int> text = prompt;
    mid.start(prompt);
    const StepContext ctx{s, StepRng{5, 0, RngStream::kAccept}, text, static_cast<int>(prompt.size())};
    const Draft d = mid.draft({}, 5, ctx);
    REQUIRE_FALSE(d.empty());
    // p_mid(. | prompt + d[0..i)) recomputed from scratch
    std::vector<int> seq = prompt;
    for (const DraftToken& t : d) {
        CHECK(t.sampled);
        const std::vector<float> p = next_token_distribution(m.mid, seq, s);
        for (int y = 0; y < m.cfg.vocab_size; ++y) CHECK_THAT(t.q[y], Catch::WithinAbs(p[y], 2e-5));
        seq.push_back(t.token);
    }
}

TEST_CASE("lenience cannot reach the target", "[cascade][lossless]") {
    Trio m;
    const std::vector<int> prompt{4, 4, 8};
    test::Stepper stepper;
    // There is no lenient Acceptor: lenience is an option of Review, and a Review is a proposer.
    STATIC_REQUIRE_FALSE(Acceptor<Lenience>);
    STATIC_REQUIRE_FALSE(Acceptor<Review<CpuModel, test::Stepper>>);
    // A Review whose reviewer IS the target model is refused by the loop (lenient or not) ...
    Review lenient_target(m.target, stepper, {.budget = 4, .lenience = {2.0}});
    try {
        greedy_run(m, lenient_target, Chain{.gamma = 4}, prompt);
        FAIL("a lenient review by the target was accepted");
    } catch (const error& e) {
        CHECK_THAT(e.what(), Catch::Contains("lenience"));
    }
    // ... also when it hides one level down.
    Review deep(m.target, stepper, {.budget = 2, .lenience = {1.5}});
    Review outer(m.mid, deep, {.budget = 3});
    CHECK_THROWS_WITH(greedy_run(m, outer, Chain{.gamma = 3}, prompt), Catch::Contains("lenience"));
    // An exact review by a copy of the target drafts the target's own text: every draft is accepted.
    CpuModel copy(m.cfg, m.w);
    Review exact(copy, stepper, {.budget = 4});
    const Generation g = greedy_run(m, exact, Chain{.gamma = 4}, prompt, 20);
    CHECK(g.tokens == autoregressive_generate(m.target, prompt, GenerateOptions{.max_new_tokens = 20}).tokens);
    for (const StepRecord& r : g.steps) CHECK(r.n_accepted == r.depth);
}

TEST_CASE("cascade options and the K-matrix are checked", "[cascade][errors]") {
    Trio m;
    test::Stepper stepper;
    CHECK_THROWS_WITH((Review(m.mid, stepper, {.budget = 0})), Catch::Contains("budget must be >= 1"));
    CHECK_THROWS_WITH((Review(m.mid, stepper, {.budget = 3, .lenience = {0.5}})), Catch::Contains("lenience must be"));
    CHECK_THROWS_WITH((Review(m.mid, stepper, {.budget = 3, .lenience = {std::nan("")}})), Catch::Contains("lenience must be"));
    Review low(m.small, stepper);
    CHECK_THROWS_WITH((Review(m.small, low)), Catch::Contains("already reviews at a level below"));
    test::Stepper other{.vocab = 65};
    CHECK_THROWS_WITH((Review(m.mid, other)), Catch::Contains("vocabulary has 64") && Catch::Contains("65"));
    CHECK_THROWS_WITH((Horizontal({1}, stepper, other)), Catch::Contains("1 budgets for 2 drafters"));
    CHECK_THROWS_WITH((Horizontal({1, -1}, stepper, stepper)), Catch::Contains("budgets[1] = -1"));
    CHECK_THROWS_WITH((Horizontal({1, 1}, stepper, other)), Catch::Contains("disagree on the vocabulary"));

    KMatrix ok{{{5, 14, 10}, {0, 1, 10}, {0, 0, 10}}};  // the paper's MMLU configuration (README of its code)
    CHECK_NOTHROW(ok.validate());
    CHECK(ok.row(1) == std::vector<int>{1, 10});
    CHECK(ok.row_sum(0) == 29);
    CHECK_THROWS_WITH((KMatrix{{{2, 10}, {3, 10}}}.validate()), Catch::Contains("[1][0] = 3 lies below the diagonal"));
    CHECK_THROWS_WITH((KMatrix{{{2, 10}, {0}}}.validate()), Catch::Contains("row 1 has 1 entries, expected 2"));
    CHECK_THROWS_WITH((KMatrix{{{2, -1}, {0, 10}}}.validate()), Catch::Contains("[0][1] = -1"));
    CHECK_THROWS_WITH((KMatrix{{{2, 10}, {0, 0}}}.validate()), Catch::Contains("row 1 drafts nothing"));
    CHECK_THROWS_WITH(KMatrix{}.validate(), Catch::Contains("empty"));
}

// ---- sampled output: every cascade shape keeps the target's law --------------------------------------

namespace {

/// test_lossless_sampling's setting (a 6-token vocabulary, spread-out distributions, partial acceptance)
/// with a second, noisier drafter and Max-Gram over a bigram table of the same vocabulary.
struct SampledTrio {
    Config cfg = test::tiny_config(true, 6);
    Weights w = random_weights(cfg, 2024, 0.3f);
    CpuModel target{cfg, w};
    CpuModel mid{cfg, perturbed(cfg, w, 0.8f, 77)};
    CpuModel small{cfg, perturbed(cfg, w, 1.2f, 78)};
    Bigram bigram = Bigram::build(std::vector<int>{0, 3, 1, 4, 2, 5, 0, 2, 4, 1, 3, 5, 2, 1, 0, 4}, 6);
    MaxGram mag{bigram, 3};
};

constexpr int kRuns = 2000;  // enough: Horizontal(Review(a), Review(b)) scored 235 at 3000 runs before scopes (bound ~45)

/// Pearson's chi-square of the first two sampled tokens against the target's exact law (p = 0.001).
template <class P, class B, class A>
void check_law(SampledTrio& m, P& proposer, B builder, A acceptor, const Sampling& s) {
    const std::vector<int> prompt{1, 4, 2};
    const auto expected = test::exact_two_tokens(m.target, prompt, s);
    const auto observed = test::sampled_two_tokens(m.target, proposer, builder, acceptor, prompt, s, kRuns);
    const test::ChiSquare r = test::chi_square(observed, expected, kRuns);
    REQUIRE(r.dof >= 8);  // enough populated cells that the test means something
    CAPTURE(r.statistic, r.dof);
    CHECK(r.statistic < test::chi_square_critical(r.dof));
}

}  // namespace

TEST_CASE("sampled output of every cascade shape follows the target's distribution", "[cascade][lossless][sampling][slow]") {
    const Sampling s = GENERATE(Sampling{.temperature = 1.0f}, Sampling{.temperature = 1.5f, .top_k = 5, .top_p = 0.95f});
    CAPTURE(s.temperature, s.top_k, s.top_p);
    SampledTrio m;
    SECTION("two distinct reviewers side by side: Horizontal(Review(a), Review(b))") {
        Review a(m.mid, m.mag, {.budget = 2});
        Review b(m.small, m.mag, {.budget = 2});
        Horizontal top({1, 1}, a, b);
        check_law(m, top, Chain{.gamma = 2}, SpeculativeSampling{}, s);
    }
    SECTION("one reviewer at two places: Horizontal(r, r)") {
        Review r(m.mid, m.mag, {.budget = 2});
        Horizontal top({1, 1}, r, r);
        check_law(m, top, Chain{.gamma = 2}, SpeculativeSampling{}, s);
    }
    SECTION("a vertical cascade: Review(mid, Review(small, Max-Gram)), lenience 3") {
        Review small_level(m.small, m.mag, {.budget = 2});
        Review mid_level(m.mid, small_level, {.budget = 3, .lenience = {3.0}});
        check_law(m, mid_level, Chain{.gamma = 3}, SpeculativeSampling{}, s);
    }
    SECTION("CS(drafter, Max-Gram) with K [[4,0],[0,3]] (the README's two-level rows)") {
        Review level(m.small, m.mag, {.budget = 3});
        Horizontal top({4, 0}, level, m.mag);
        check_law(m, top, Chain{.gamma = 4}, SpeculativeSampling{}, s);
    }
    SECTION("CS(mid, small, Max-Gram) with K [[2,2,0],[0,1,0],[0,0,3]], lenience 3 (the README's code)") {
        Review small_level(m.small, m.mag, {.budget = 3});
        Horizontal below_mid({1, 0}, small_level, m.mag);
        Review mid_level(m.mid, below_mid, {.budget = 1, .lenience = {3.0}});
        Horizontal top({2, 2, 0}, mid_level, small_level, m.mag);
        check_law(m, top, Chain{.gamma = 4}, SpeculativeSampling{}, s);
    }
    SECTION("CS + tree: 8 children of each lead node, K [[1,3],[0,1]], SampleAndMatch") {
        Review level(m.mid, m.mag, {.budget = 1});
        Horizontal top({1, 3}, level, m.mag);
        check_law(m, top, ExpandedChain{.gamma = 4, .sizes = ExpansionSizes::fixed(7), .max_drafts = 32}, SampleAndMatch{}, s);
    }
}

}  // namespace test_cascade
