// CS Drafting's closed forms (§4): the paper's Table 1 and worked numbers, the PGF's coefficients, and
// each formula against a Monte-Carlo simulation of the process it models (i.i.d. Bernoulli acceptance).
#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_cascade_analytics {  // a unity build compiles several test files as one

using namespace specdec;
using Catch::Contains;
using Catch::WithinAbs;
using Catch::WithinRel;

namespace {

/// App. C.1: P(tokens = j) for one review of k drafts, j = 0..k+1: alpha^(j-1) - alpha^j for
/// 1 <= j <= k, alpha^k for j = k+1 (all accepted, plus the reviewer's token), 0 for j = 0.
std::vector<double> pgf_coefficients(double alpha, int k) {
    std::vector<double> p(static_cast<std::size_t>(k) + 2, 0.0);
    for (int j = 1; j <= k; ++j) p[j] = std::pow(alpha, j - 1) - std::pow(alpha, j);
    p[k + 1] = std::pow(alpha, k);
    return p;
}

/// Coefficients of the product of two polynomials (the PGF of a sum of independent counts).
std::vector<double> convolve(const std::vector<double>& a, const std::vector<double>& b) {
    std::vector<double> c(a.size() + b.size() - 1, 0.0);
    for (std::size_t i = 0; i < a.size(); ++i)
        for (std::size_t j = 0; j < b.size(); ++j) c[i + j] += a[i] * b[j];
    return c;
}

/// A uniform double in [0, 1) from the top 53 bits: the same numbers on every standard library.
double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

/// How many of k drafts a reviewer accepts when each is accepted with probability alpha until the
/// first rejection.
int accepted_run(std::mt19937_64& rng, double alpha, int k) {
    int accepted = 0;
    while (accepted < k && uniform01(rng) < alpha) ++accepted;
    return accepted;
}

/// Mean and standard error of a sample, and the counts of each value.
struct Sample {
    double sum = 0, sum_sq = 0;
    int n = 0;
    std::map<int, int> counts;
    void add(int x) {
        sum += x, sum_sq += double(x) * x, ++n;
        ++counts[x];
    }
    double mean() const { return sum / n; }
    double standard_error() const { return std::sqrt((sum_sq / n - mean() * mean()) / (n - 1)); }
};

std::map<int, double> as_map(const std::vector<double>& p) {
    std::map<int, double> m;
    for (std::size_t j = 0; j < p.size(); ++j)
        if (p[j] > 0) m[static_cast<int>(j)] = p[j];
    return m;
}

constexpr int kTrials = 200000;

}  // namespace

// ---------------------------------------------------------------------------------------------------
// The paper's numbers

TEST_CASE("Cor. 4.2 and Thm 4.5 reproduce all six EWIF values of CS Drafting's Table 1", "[cs_analytics]") {
    // Leviathan et al.'s acceptance rates for FLAN-T5 drafters of T5-XXL (NOTES §3.3). The costs that
    // reproduce every printed value: c_small in [0.00685, 0.006915], c_base in [0.021951, 0.022025];
    // the plain parameter ratios 77/11300 and 248/11300 miss two CNNDM cells (2.656, 2.965).
    const double c_small = 0.0069, c_base = 0.022;
    const double cnndm_small = 0.65, cnndm_base = 0.73, ende_small = 0.75, ende_base = 0.80;

    CHECK_THAT(cs_ewif_sd(cnndm_small, 9, c_small), WithinAbs(2.65, 0.005));
    CHECK_THAT(cs_ewif_sd(cnndm_base, 8, c_base), WithinAbs(2.96, 0.005));
    CHECK_THAT(cs_ewif_sd(ende_small, 12, c_small), WithinAbs(3.61, 0.005));
    CHECK_THAT(cs_ewif_sd(ende_base, 11, c_base), WithinAbs(3.75, 0.005));

    // Base + small: the first k1 draft tokens from base, the next k2 from small.
    const auto cascade = [&](double a_base, int k1, double a_small, int k2) {
        std::vector<double> alphas(k1, a_base), costs(k1, c_base);
        alphas.insert(alphas.end(), k2, a_small);
        costs.insert(costs.end(), k2, c_small);
        return cs_ewif_horizontal(alphas, costs);
    };
    CHECK_THAT(cascade(cnndm_base, 5, cnndm_small, 3), WithinAbs(3.03, 0.005));
    CHECK_THAT(cascade(ende_base, 5, ende_small, 8), WithinAbs(3.93, 0.005));

    SECTION("each single-drafter row's k is the one that maximises Cor. 4.2") {
        const auto best_k = [](double alpha, double c) {
            int best = 1;
            for (int k = 2; k <= 40; ++k)
                if (cs_ewif_sd(alpha, k, c) > cs_ewif_sd(alpha, best, c)) best = k;
            return best;
        };
        CHECK(best_k(cnndm_small, c_small) == 9);
        CHECK(best_k(cnndm_base, c_base) == 8);
        CHECK(best_k(ende_small, c_small) == 12);
        CHECK(best_k(ende_base, c_base) == 11);
    }
}

TEST_CASE("Thm 4.3 gives the worked vertical-cascade example", "[cs_analytics]") {
    // alpha = 0.8, alpha' = 0.6, n = 3, k = 4, c_d1 = 0.05, c_d2 = 0.005 (NOTES §3.4): phi(0.8) = 0.625184,
    // (1 - 0.8 * 0.625184^3) / 0.2 = 4.02256 tokens per target step, cost 1.21.
    CHECK_THAT(cs_pgf(0.6, 4, 0.8), WithinAbs(0.625184, 1e-6));
    CHECK_THAT(cs_ewif_vertical(0.8, 0.6, 4, 3, 0.05, 0.005), WithinAbs(3.324, 0.0005));
}

// ---------------------------------------------------------------------------------------------------
// The PGF

TEST_CASE("the PGF of Thm 4.1 is the distribution of App. C.1", "[cs_analytics]") {
    const double alpha = GENERATE(0.0, 0.3, 0.75, 1.0);
    const int k = GENERATE(0, 1, 4, 9);
    CAPTURE(alpha, k);
    CHECK_THAT(cs_pgf(alpha, k, 1.0), WithinAbs(1.0, 1e-12));  // a distribution sums to 1

    // phi'(1) = E[tokens] = (1 - alpha^(k+1)) / (1 - alpha), by a central difference.
    const double h = 1e-5;
    const double slope = (cs_pgf(alpha, k, 1 + h) - cs_pgf(alpha, k, 1 - h)) / (2 * h);
    CHECK_THAT(slope, WithinRel(expected_tokens_per_step(alpha, k), 1e-8));
    CHECK_THAT(cs_ewif_sd(alpha, k, 0.05), WithinRel(slope / (0.05 * k + 1), 1e-8));  // Cor. 4.2

    // phi is a polynomial of degree k+1: equal to sum_j p_j x^j at k+2 distinct points (x = 1/alpha,
    // where the closed form is 0/0, among them), its coefficients are the p_j.
    const std::vector<double> p = pgf_coefficients(alpha, k);
    std::vector<double> xs{-1.3, 0.0, 0.5, 2.0};
    if (alpha > 0) xs.push_back(1.0 / alpha);
    for (int i = 0; static_cast<int>(xs.size()) < k + 2; ++i) xs.push_back(3.0 + 0.25 * i);
    for (double x : xs) {
        double series = 0.0;
        for (std::size_t j = 0; j < p.size(); ++j) series += p[j] * std::pow(x, static_cast<double>(j));
        CAPTURE(x);
        CHECK_THAT(cs_pgf(alpha, k, x), WithinAbs(series, 1e-9 * std::max(1.0, std::abs(series))));
    }
}

// ---------------------------------------------------------------------------------------------------
// Each formula against a simulation of its process

TEST_CASE("Cor. 4.2 and the PGF match a simulation of speculative decoding", "[cs_analytics]") {
    // Per target step: k drafts, accepted i.i.d. with alpha until the first rejection, + 1 bonus token.
    const double alpha = 0.8, c = 0.05;
    const int k = 4;
    std::mt19937_64 rng(42);
    Sample tokens;
    for (int t = 0; t < kTrials; ++t) tokens.add(accepted_run(rng, alpha, k) + 1);

    const double cost = 1 + c * k;
    CAPTURE(tokens.mean() / cost, cs_ewif_sd(alpha, k, c), tokens.standard_error() / cost);
    CHECK(std::abs(tokens.mean() / cost - cs_ewif_sd(alpha, k, c)) < 4 * tokens.standard_error() / cost);

    const test::ChiSquare x2 = test::chi_square(tokens.counts, as_map(pgf_coefficients(alpha, k)), kTrials);
    CAPTURE(x2.statistic, x2.dof);
    CHECK(x2.statistic < test::chi_square_critical(x2.dof));
}

TEST_CASE("Thm 4.3 matches a simulation of a vertical cascade", "[cs_analytics]") {
    // Per target step: d1 makes n review passes, each over k drafts of d2 accepted with alpha_inner and
    // yielding (accepted + 1) tokens; the target then reviews all of them with alpha, + 1 bonus token.
    const double alpha = 0.8, alpha_inner = 0.6, c_d1 = 0.05, c_d2 = 0.005;
    const int k = 4, n = 3;
    std::mt19937_64 rng(43);
    Sample drafted, tokens;
    for (int t = 0; t < kTrials; ++t) {
        int x = 0;
        for (int pass = 0; pass < n; ++pass) x += accepted_run(rng, alpha_inner, k) + 1;
        drafted.add(x);
        tokens.add(accepted_run(rng, alpha, x) + 1);
    }

    const double cost = 1 + n * c_d1 + n * k * c_d2;
    const double ewif = cs_ewif_vertical(alpha, alpha_inner, k, n, c_d1, c_d2);
    CAPTURE(tokens.mean() / cost, ewif, tokens.standard_error() / cost);
    CHECK(std::abs(tokens.mean() / cost - ewif) < 4 * tokens.standard_error() / cost);

    // The drafted count is a sum of n passes: its distribution is phi_(alpha_inner,k)^n.
    const std::vector<double> p = pgf_coefficients(alpha_inner, k);
    std::vector<double> p_n{1.0};
    for (int pass = 0; pass < n; ++pass) p_n = convolve(p_n, p);
    const test::ChiSquare x2 = test::chi_square(drafted.counts, as_map(p_n), kTrials);
    CAPTURE(x2.statistic, x2.dof);
    CHECK(x2.statistic < test::chi_square_critical(x2.dof));
}

TEST_CASE("Thm 4.5 matches a simulation of a horizontal cascade", "[cs_analytics]") {
    // Draft token i is accepted with alpha_i given that all earlier ones were; + 1 bonus token.
    const std::vector<double> alphas{0.9, 0.85, 0.8, 0.6, 0.6, 0.5}, costs{0.04, 0.04, 0.04, 0.01, 0.01, 0.0};
    std::mt19937_64 rng(44);
    Sample tokens;
    for (int t = 0; t < kTrials; ++t) {
        int accepted = 0;
        while (accepted < static_cast<int>(alphas.size()) && uniform01(rng) < alphas[accepted]) ++accepted;
        tokens.add(accepted + 1);
    }

    double cost = 1;
    for (double c : costs) cost += c;
    const double ewif = cs_ewif_horizontal(alphas, costs);
    CAPTURE(tokens.mean() / cost, ewif, tokens.standard_error() / cost);
    CHECK(std::abs(tokens.mean() / cost - ewif) < 4 * tokens.standard_error() / cost);

    // P(i + 1 tokens) = alpha_1 ... alpha_i (1 - alpha_(i+1)), and alpha_1 ... alpha_k for k + 1.
    std::vector<double> p(alphas.size() + 2, 0.0);
    double survive = 1;
    for (std::size_t i = 0; i < alphas.size(); ++i) {
        p[i + 1] = survive * (1 - alphas[i]);
        survive *= alphas[i];
    }
    p[alphas.size() + 1] = survive;
    const test::ChiSquare x2 = test::chi_square(tokens.counts, as_map(p), kTrials);
    CAPTURE(x2.statistic, x2.dof);
    CHECK(x2.statistic < test::chi_square_critical(x2.dof));
}

// ---------------------------------------------------------------------------------------------------
// Properties and consistency between the forms

TEST_CASE("Cor. 4.4: phi_(alpha',k)(alpha) < alpha, so a cheap d2 under d1 raises EWIF", "[cs_analytics]") {
    const double alpha = GENERATE(0.3, 0.7, 0.9);
    const double alpha_inner = GENERATE(0.2, 0.6, 0.95);
    const int k = GENERATE(1, 4);
    const int n = 3;
    const double c_d1 = 0.05;
    CAPTURE(alpha, alpha_inner, k);
    CHECK(cs_pgf(alpha_inner, k, alpha) < alpha);
    // Without d2, d1 drafts n tokens itself (each pass yields 1: phi(x) = x), which is plain SD.
    CHECK_THAT(cs_ewif_vertical(alpha, 0.0, k, n, c_d1, 0.0), WithinRel(cs_ewif_sd(alpha, n, c_d1), 1e-12));
    CHECK(cs_ewif_vertical(alpha, alpha_inner, k, n, c_d1, 1e-4) > cs_ewif_sd(alpha, n, c_d1));
}

TEST_CASE("the cascade forms agree with plain speculative decoding where they coincide", "[cs_analytics]") {
    // A horizontal cascade of one model is plain SD.
    const std::vector<double> alphas(6, 0.7), costs(6, 0.03);
    CHECK_THAT(cs_ewif_horizontal(alphas, costs), WithinRel(cs_ewif_sd(0.7, 6, 0.03), 1e-12));
    CHECK_THAT(cs_ewif_horizontal(std::vector<double>{}, std::vector<double>{}), WithinRel(1.0, 1e-12));
    // alpha = 1 is the limit of the closed form.
    CHECK_THAT(cs_ewif_vertical(1.0, 0.6, 4, 3, 0.05, 0.005),
               WithinRel(cs_ewif_vertical(1.0 - 1e-7, 0.6, 4, 3, 0.05, 0.005), 1e-5));
    CHECK_THAT(cs_ewif_sd(1.0, 5, 0.1), WithinRel(6.0 / 1.5, 1e-12));
}

TEST_CASE("the analytics reject acceptance rates, counts and costs out of range", "[cs_analytics]") {
    CHECK_THROWS_WITH(cs_pgf(1.5, 4, 1.0), Contains("[specdec.cs_analytics]") && Contains("alpha = 1.5"));
    CHECK_THROWS_WITH(cs_ewif_sd(0.5, -1, 0.1), Contains("k = -1"));
    CHECK_THROWS_WITH(cs_ewif_sd(0.5, 4, -0.1), Contains("c = -0.1"));
    CHECK_THROWS_WITH(cs_ewif_vertical(0.8, -0.2, 4, 3, 0.05, 0.005), Contains("alpha_inner = -0.2"));
    CHECK_THROWS_WITH(cs_ewif_vertical(0.8, 0.6, 4, -3, 0.05, 0.005), Contains("n = -3"));
    CHECK_THROWS_WITH(cs_ewif_horizontal(std::vector<double>{0.5, 0.5}, std::vector<double>{0.1}),
                      Contains("2 acceptance rates but 1 costs"));
    CHECK_THROWS_WITH(cs_ewif_horizontal(std::vector<double>{0.5, 2.0}, std::vector<double>{0.1, 0.1}),
                      Contains("alphas[1] = 2"));
}

}  // namespace test_cascade_analytics
