// Tests of detail/model/matmul.hpp, detail/model/panel_matmul.hpp, detail/model/row_ops.hpp and detail/model/thread_pool.hpp:
// every fast path against the reference.
#include "catch.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "detail/model/matmul.hpp"
#include "detail/model/panel_matmul.hpp"
#include "detail/model/row_ops.hpp"
#include "detail/model/thread_pool.hpp"

namespace test_matmul {  // a unity build compiles several test files as one

namespace {

using specdec::bf16;
using specdec::ThreadPool;
using specdec::detail::MatmulIsa;
using specdec::detail::MatmulKernel;
using specdec::detail::MatmulPath;

std::vector<float> random_floats(std::size_t count, std::uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> v(count);
    for (auto& f : v) f = u(rng);
    return v;
}

std::vector<bf16> to_bf16s(const std::vector<float>& v) {
    std::vector<bf16> out(v.size());
    std::transform(v.begin(), v.end(), out.begin(), [](float f) { return specdec::to_bf16(f); });
    return out;
}

float magnitude(float w) { return std::fabs(w); }
float magnitude(bf16 w) { return std::fabs(specdec::to_float(w)); }

// The stated tolerance. Both sides sum the same k f32 products in different orders, so each is within
// γ_k·Σ|x_p·w_p| of the exact sum (Higham, Accuracy and Stability, §3.1; γ_k ≈ k·2⁻²⁴). That worst
// case is loose; for sign-random data the error is a few ulps of Σ|x_p·w_p|, so we demand
//     |fast − reference| ≤ 1e-5 · Σ_p |x_p|·|w_p|     for every output,
// about 170 ulps of the scale, independent of k.
constexpr double kRelTol = 1e-5;

/// The allowed |fast − ref| per output: kRelTol · Σ_p |x_p|·|w_p|.
template <class WT>
std::vector<double> error_bounds(const std::vector<float>& x, const std::vector<WT>& W, int n, int k, int m) {
    std::vector<double> bounds(std::size_t(n) * m);
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < m; ++j) {
            double scale = 0.0;
            for (int p = 0; p < k; ++p)
                scale += std::fabs(x[std::size_t(i) * k + p]) * double(magnitude(W[std::size_t(j) * k + p]));
            bounds[std::size_t(i) * m + j] = kRelTol * scale + 1e-30;
        }
    return bounds;
}

/// Worst |fast − ref| / bound over all outputs; ≤ 1 passes (NaN, e.g. an unwritten output, fails).
double worst_error_ratio(const std::vector<float>& fast, const std::vector<float>& ref, const std::vector<double>& bounds) {
    double worst = 0.0;
    for (std::size_t o = 0; o < fast.size(); ++o) {
        const double ratio = std::fabs(double(fast[o]) - double(ref[o])) / bounds[o];
        worst = std::isnan(ratio) ? INFINITY : std::max(worst, ratio);
    }
    return worst;
}

struct Shape {
    int n, k, m;
};

std::vector<Shape> ragged_shapes() {
    std::vector<Shape> shapes;
    for (int n : {1, 2, 3, 5, 8, 16, 17, 33, 64})
        for (int k : {1, 7, 31, 129, 770})
            for (int m : {1, 7, 31, 129, 770}) shapes.push_back({n, k, m});
    // Tree-sized n: every remainder of n mod 6 (the rows kernel's x tile), k with a ragged tail.
    for (int n : {9, 10, 11, 12, 31, 47, 95})
        for (Shape s : {Shape{n, 33, 129}, Shape{n, 770, 31}, Shape{n, 1601, 7}}) shapes.push_back(s);
    // Large n, where the packed kernel runs by default: fewer shapes, since the reference is slow.
    for (int n : {100, 512}) {
        shapes.push_back({n, 7, 31});
        shapes.push_back({n, 129, 770});
        shapes.push_back({n, 770, 129});
    }
    shapes.push_back({100, 770, 770});
    return shapes;
}

std::vector<MatmulPath> all_paths() {
    std::vector<MatmulPath> paths;
    for (MatmulIsa isa : {MatmulIsa::kScalar, MatmulIsa::kAvx2, MatmulIsa::kAvx512}) {
        if (!specdec::detail::isa_available(isa)) {
            WARN("path '" << specdec::detail::isa_name(isa) << "' is not available on this CPU: not tested");
            continue;
        }
        paths.push_back({isa, MatmulKernel::kRows});
        if (isa != MatmulIsa::kScalar) paths.push_back({isa, MatmulKernel::kPacked});
    }
    paths.push_back({MatmulIsa::kAuto, MatmulKernel::kAuto});
    return paths;
}

const char* kernel_name(MatmulKernel kernel) {
    switch (kernel) {
        case MatmulKernel::kAuto: return "auto";
        case MatmulKernel::kRows: return "rows";
        case MatmulKernel::kPacked: return "packed";
    }
    return "?";
}

/// One random product and its reference: x, W as float32 (wf) and as stored (W: rounded for bf16),
/// y = x·Wᵀ by the plain loops, and the per-output error bounds.
template <class WT>
struct Problem {
    std::vector<float> x, wf, ref;
    std::vector<WT> W;
    std::vector<double> bounds;
    Problem(const Shape& s, std::uint32_t seed)
        : x(random_floats(std::size_t(s.n) * s.k, seed + 1)), wf(random_floats(std::size_t(s.m) * s.k, seed + 2)),
          ref(std::size_t(s.n) * s.m) {
        if constexpr (std::is_same_v<WT, bf16>) W = to_bf16s(wf);
        else W = wf;
        specdec::matmul_reference(ref.data(), x.data(), W.data(), s.n, s.k, s.m);
        bounds = error_bounds(x, W, s.n, s.k, s.m);
    }
};

template <class WT>
void check_all_paths_against_reference(std::uint32_t seed) {
    const auto paths = all_paths();
    ThreadPool pool1(1), pool2(2), pool3(3);
    ThreadPool* pools[] = {&pool1, &pool2, &pool3};
    for (const Shape& s : ragged_shapes()) {
        const Problem<WT> pr(s, seed);
        const auto& [x, wf, ref, W, bounds] = pr;
        for (const MatmulPath& path : paths)
            for (ThreadPool* pool : pools) {
                // Scalar is slow; one multi-threaded run is enough to check its split.
                if (path.isa == MatmulIsa::kScalar && pool->size() == 3) continue;
                std::vector<float> y(std::size_t(s.n) * s.m, std::nanf(""));
                specdec::detail::matmul_path(path, *pool, y.data(), x.data(), W.data(), s.n, s.k, s.m);
                INFO("n=" << s.n << " k=" << s.k << " m=" << s.m << " isa=" << specdec::detail::isa_name(path.isa)
                          << " kernel=" << kernel_name(path.kernel) << " threads=" << pool->size());
                CHECK(worst_error_ratio(y, ref, bounds) <= 1.0);
            }
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// matmul

TEST_CASE("every matmul path matches the reference for f32 weights over ragged shapes", "[matmul]") {
    check_all_paths_against_reference<float>(11);
}

TEST_CASE("every matmul path matches the reference for bf16 weights over ragged shapes", "[matmul]") {
    check_all_paths_against_reference<bf16>(23);
}

TEST_CASE("the scalar rows path sums in the reference's order, bit for bit", "[matmul]") {
    ThreadPool pool(2);
    const int n = 5, k = 129, m = 31;
    const auto x = random_floats(n * k, 3), W = random_floats(m * k, 4);
    std::vector<float> ref(n * m), y(n * m);
    specdec::matmul_reference(ref.data(), x.data(), W.data(), n, k, m);
    specdec::detail::matmul_path({MatmulIsa::kScalar, MatmulKernel::kRows}, pool, y.data(), x.data(), W.data(), n, k, m);
    CHECK(y == ref);
}

TEST_CASE("matmul handles empty dimensions and rejects bad ones", "[matmul]") {
    ThreadPool pool(2);
    std::vector<float> y(6, 1.0f), x(6, 1.0f), W(6, 1.0f);
    SECTION("k = 0 gives zeros") {
        specdec::matmul(pool, y.data(), x.data(), W.data(), 2, 0, 3);
        CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == 0.0f; }));
    }
    SECTION("n = 0 or m = 0 writes nothing") {
        specdec::matmul(pool, y.data(), x.data(), W.data(), 0, 3, 2);
        specdec::matmul(pool, y.data(), x.data(), W.data(), 2, 3, 0);
        CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v == 1.0f; }));
    }
    SECTION("negative sizes and null pointers throw specdec::error") {
        CHECK_THROWS_AS(specdec::matmul(pool, y.data(), x.data(), W.data(), -1, 3, 2), specdec::error);
        CHECK_THROWS_WITH(specdec::matmul(pool, y.data(), x.data(), W.data(), 2, -3, 2),
                          Catch::Matchers::StartsWith("[specdec.matmul] k = -3"));
        CHECK_THROWS_AS(specdec::matmul(pool, y.data(), nullptr, W.data(), 2, 3, 2), specdec::error);
    }
}

TEST_CASE("cpu_features is consistent with the paths it enables", "[matmul]") {
    const auto f = specdec::cpu_features();
    CHECK((!f.avx512 || f.avx2_fma));
    CHECK((!f.avx512_bf16 || f.avx512));
    CHECK(specdec::detail::isa_available(MatmulIsa::kAvx512) == f.avx512);
    CHECK(specdec::detail::isa_available(MatmulIsa::kAvx2) == f.avx2_fma);
    if (!f.avx512) {
        ThreadPool pool(1);
        float y = 0, x = 1, w = 1;
        CHECK_THROWS_AS(specdec::detail::matmul_path({MatmulIsa::kAvx512, MatmulKernel::kAuto}, pool, &y, &x, &w, 1, 1, 1),
                        specdec::error);
    }
}

TEST_CASE("dot and axpy match plain loops", "[matmul]") {
    const int k = GENERATE(0, 1, 7, 16, 31, 64, 129);
    const auto a = random_floats(std::size_t(k), 5), b = random_floats(std::size_t(k), 6);
    double exact = 0.0, scale = 0.0;
    for (int p = 0; p < k; ++p) exact += double(a[p]) * b[p], scale += std::fabs(double(a[p]) * b[p]);
    CHECK(std::fabs(specdec::dot(a.data(), b.data(), k) - exact) <= kRelTol * scale + 1e-30);

    auto y = b;
    specdec::axpy(y.data(), 0.5f, a.data(), k);
    for (int p = 0; p < k; ++p) CHECK_THAT(y[p], Catch::Matchers::WithinAbs(b[p] + 0.5f * a[p], 1e-6));
}

// ---------------------------------------------------------------------------------------------------
// The steps between products (row_ops.hpp): fast against the plain loops

TEST_CASE("the fast RMSNorm (with its residual add) matches the plain loop over ragged widths", "[matmul][rows]") {
    const int d = GENERATE(1, 7, 8, 15, 16, 17, 100, 768);
    auto x = random_floats(std::size_t(d), 11), w = random_floats(std::size_t(d), 12);
    const auto r = random_floats(std::size_t(d), 13);
    std::vector<float> plain(d), fast(d);
    specdec::detail::rmsnorm(plain.data(), x.data(), w.data(), d, 1e-5f);
    specdec::detail::rmsnorm(fast.data(), x.data(), w.data(), d, 1e-5f, true);
    // Both sum squares in double and then round once: the same 1/rms to within an ulp, and then the
    // same two float products. Allowed: 4 ulp (2^-21) relative per output.
    for (int i = 0; i < d; ++i) CHECK(std::fabs(fast[i] - plain[i]) <= 4.8e-7f * std::fabs(plain[i]));

    // add_rmsnorm: x += r exactly (the residual stream keeps no rounding of its own), out may be r.
    auto x2 = x, out = r;
    specdec::detail::add_rmsnorm(out.data(), x2.data(), out.data(), w.data(), d, 1e-5f, true);
    for (int i = 0; i < d; ++i) CHECK(x2[i] == x[i] + r[i]);
    specdec::detail::rmsnorm(plain.data(), x2.data(), w.data(), d, 1e-5f);
    for (int i = 0; i < d; ++i) CHECK(std::fabs(out[i] - plain[i]) <= 4.8e-7f * std::fabs(plain[i]));
}

TEST_CASE("the fast RoPE matches the plain loop over ragged head sizes and leaves the rest alone", "[matmul][rows]") {
    const int hd = GENERATE(2, 6, 30, 32, 34, 48, 64, 96, 130);
    const int half = hd / 2;
    std::vector<float> cs;
    const std::vector<int> positions{0, 7, 1000};
    std::vector<double> inv_freq(half);
    for (int j = 0; j < half; ++j) inv_freq[j] = std::pow(10000.0, -2.0 * j / hd);
    specdec::detail::rope_table(cs, positions, inv_freq);
    REQUIRE(cs.size() == positions.size() * std::size_t(hd));
    CHECK(cs[std::size_t(hd + 2 * half - 1)] == float(std::sin(7.0 * inv_freq[half - 1])));  // (pos 7, last pair, sin)
    for (std::size_t p = 0; p < positions.size(); ++p) {
        // Two heads side by side plus a sentinel: each call rotates its own hd floats only.
        auto x = random_floats(std::size_t(2 * hd + 1), 20 + std::uint32_t(p));
        auto plain = x, fast = x;
        const float* row = cs.data() + p * std::size_t(hd);
        specdec::detail::rope(plain.data(), hd, row);
        specdec::detail::rope(fast.data(), hd, row, true);
        CHECK(fast[std::size_t(hd)] == x[std::size_t(hd)]);
        CHECK(fast[std::size_t(2 * hd)] == x[std::size_t(2 * hd)]);
        // Each output is a·b ± c·d: a fused multiply-add rounds once where the loop rounds twice, so
        // they differ by at most an ulp or two of |a·b| + |c·d| <= |x_i| + |x_{i+half}|.
        for (int i = 0; i < half; ++i) {
            const double scale = std::fabs(x[i]) + std::fabs(x[i + half]);
            CHECK(std::fabs(fast[i] - plain[i]) <= 2.4e-7 * scale);
            CHECK(std::fabs(fast[i + half] - plain[i + half]) <= 2.4e-7 * scale);
        }
    }
}

TEST_CASE("the fast SwiGLU matches std::exp's over ragged widths, saturating like it", "[matmul][rows]") {
    const int n = GENERATE(1, 15, 16, 17, 100, 2048);
    auto g = random_floats(std::size_t(n), 30), u = random_floats(std::size_t(n), 31);
    for (int j = 0; j < n; ++j) g[j] *= (j % 5 == 3 ? 120.0f : 8.0f);  // some beyond exp's range (|g| > 88)
    std::vector<float> plain(n), fast(n);
    specdec::detail::swiglu(plain.data(), g.data(), u.data(), n, false);
    specdec::detail::swiglu(fast.data(), g.data(), u.data(), n, true);
    // exp16 is within 2 ulp of expf, then one add, one divide and one product round: allow 8 ulp.
    for (int j = 0; j < n; ++j) {
        INFO("g " << g[j] << " u " << u[j]);
        CHECK(std::fabs(fast[j] - plain[j]) <= 9.6e-7f * std::fabs(plain[j]));
    }
}

TEST_CASE("split_qkv places q, k and v and rotates the q and k heads only", "[matmul][rows]") {
    const int H = 3, Hkv = 1, hd = 6, qd = H * hd, kvd = Hkv * hd;
    const auto row = random_floats(std::size_t(qd + 2 * kvd), 40);
    std::vector<float> cs;
    const std::vector<int> pos{5};
    specdec::detail::rope_table(cs, pos, std::vector<double>{1.0, 0.1, 0.01});
    for (const bool fast : {false, true}) {
        std::vector<float> q(qd), k(kvd), v(kvd);
        specdec::detail::split_qkv(row.data(), q.data(), k.data(), v.data(), H, Hkv, hd, cs.data(), fast);
        std::vector<float> want(row.begin(), row.begin() + qd + kvd);
        for (int h = 0; h < H + Hkv; ++h) specdec::detail::rope(want.data() + h * hd, hd, cs.data());
        for (int i = 0; i < qd; ++i) CHECK_THAT(q[i], Catch::Matchers::WithinAbs(want[i], 1e-6));
        for (int i = 0; i < kvd; ++i) CHECK_THAT(k[i], Catch::Matchers::WithinAbs(want[qd + i], 1e-6));
        CHECK(v == std::vector<float>(row.begin() + qd + kvd, row.end()));
    }
}

TEST_CASE("for_rows visits every row once: over the pool when parallel, in order on the caller if not", "[matmul][rows]") {
    ThreadPool pool(3);
    const int n = GENERATE(0, 1, 2, 37);
    std::vector<std::atomic<int>> seen(std::size_t(n) + 1);
    specdec::detail::for_rows(pool, n, true, [&](int i) { ++seen[std::size_t(i)]; });
    for (int i = 0; i < n; ++i) CHECK(seen[std::size_t(i)] == 1);
    std::vector<int> order;
    const auto caller = std::this_thread::get_id();
    bool on_caller = true;
    specdec::detail::for_rows(pool, n, false, [&](int i) {
        order.push_back(i);
        on_caller = on_caller && std::this_thread::get_id() == caller;
    });
    CHECK(on_caller);
    CHECK(order.size() == std::size_t(n));
    CHECK(std::is_sorted(order.begin(), order.end()));
}

// ---------------------------------------------------------------------------------------------------
// ThreadPool

TEST_CASE("parallel_for runs every task exactly once, over many tiny calls", "[thread_pool]") {
    const int threads = GENERATE(1, 2, 3, 4);
    ThreadPool pool(threads);
    REQUIRE(pool.size() == threads);
    std::vector<std::atomic<int>> hits(64);
    long expected_total = 0;
    for (int call = 0; call < 20000; ++call) {
        const int n_tasks = 1 + call % 37;
        pool.parallel_for(n_tasks, [&](int t) { hits[std::size_t(t) % hits.size()].fetch_add(1, std::memory_order_relaxed); });
        expected_total += n_tasks;
    }
    long total = 0;
    for (auto& h : hits) total += h.load();
    CHECK(total == expected_total);
    // Task t of a call with n_tasks > t hits slot t: slot 0 is hit once per call.
    CHECK(hits[0].load() == 20000);
}

TEST_CASE("an exception thrown in a task is rethrown in the caller and the pool stays usable", "[thread_pool]") {
    const int threads = GENERATE(1, 2, 3);
    ThreadPool pool(threads);
    CHECK_THROWS_WITH(pool.parallel_for(16, [](int t) {
                          if (t == 5) throw std::runtime_error("task 5 failed");
                      }),
                      "task 5 failed");
    std::atomic<int> count{0};
    pool.parallel_for(16, [&](int) { count.fetch_add(1); });
    CHECK(count.load() == 16);
}

TEST_CASE("a pool of size 1 runs tasks inline on the calling thread", "[thread_pool]") {
    ThreadPool pool(1);
    const auto caller = std::this_thread::get_id();
    bool all_inline = true;
    pool.parallel_for(10, [&](int) { all_inline = all_inline && std::this_thread::get_id() == caller; });
    CHECK(all_inline);
}

TEST_CASE("a parallel_for issued from inside a task runs inline instead of deadlocking", "[thread_pool]") {
    ThreadPool pool(3);
    std::atomic<int> count{0};
    pool.parallel_for(6, [&](int) { pool.parallel_for(4, [&](int) { count.fetch_add(1); }); });
    CHECK(count.load() == 24);
}

TEST_CASE("the pool's size defaults to the hardware and rejects negative counts", "[thread_pool]") {
    ThreadPool pool(0);
    CHECK(pool.size() == std::max(1, int(std::thread::hardware_concurrency())));
    CHECK_THROWS_AS(ThreadPool(-1), specdec::error);
}

// ---------------------------------------------------------------------------------------------------
// panel_matmul: W packed once into 48-row groups (detail/model/panel_matmul.hpp)

namespace {

template <class WT>
void check_panels_against_reference(std::uint32_t seed) {
    if (!specdec::panels_available()) {
        WARN("this CPU lacks AVX-512: the panel product is not used here and not tested");
        return;
    }
    ThreadPool pool1(1), pool2(2), pool3(3);
    std::vector<Shape> shapes = ragged_shapes();
    // Every tile height 1..9 and the even splits above it; m ending in a partial vector, a partial
    // group, whole groups (48), and groups plus one vector.
    for (int n = 1; n <= 20; ++n) shapes.push_back({n, 65, 40});
    for (int m : {16, 33, 48, 96, 112}) shapes.push_back({7, 30, m});
    shapes.push_back({24, 200, 100});  // three tiles over several blocks of k steps
    shapes.push_back({27, 97, 50});
    for (const Shape& s : shapes) {
        const Problem<WT> pr(s, seed);  // the panels round wf as pr.W does: the reference multiplies the same values
        const auto& [x, wf, ref, W, bounds] = pr;
        const specdec::PanelMatrix<WT> P(s.m, s.k, [&](int j) { return wf.data() + std::size_t(j) * s.k; });
        for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
            std::vector<float> y(std::size_t(s.n) * s.m, std::nanf(""));
            specdec::panel_matmul(*pool, y.data(), x.data(), P, s.n);
            INFO("n=" << s.n << " k=" << s.k << " m=" << s.m << " threads=" << pool->size());
            CHECK(worst_error_ratio(y, ref, bounds) <= 1.0);
        }
    }
}

}  // namespace

TEST_CASE("the panel product matches the reference for f32 weights over ragged shapes", "[matmul][panels]") {
    check_panels_against_reference<float>(30);
}
TEST_CASE("the panel product matches the reference for bf16 weights over ragged shapes", "[matmul][panels]") {
    check_panels_against_reference<bf16>(40);
}

TEST_CASE("with x rounded to bf16, the panel product matches the reference over rounded x, by vdpbf16ps and by widening",
          "[matmul][panels]") {
    const bool dot = GENERATE(true, false);  // the AVX512-BF16 kernel, or rounded floats times widened W
    if (!specdec::panels_available() || (dot && !specdec::bf16_dot_available())) {
        WARN("this CPU lacks AVX-512" << (dot ? " BF16" : "") << ": this path is not tested here");
        return;
    }
    ThreadPool pool1(1), pool2(2), pool3(3);
    std::vector<Shape> shapes = ragged_shapes();
    for (int n = 1; n <= 20; ++n) shapes.push_back({n, 65, 40});  // odd k: the last pair is (x, 0)
    for (int m : {16, 33, 48, 96, 112}) shapes.push_back({7, 30, m});
    for (const Shape& s : shapes) {
        const Problem<bf16> pr(s, 50);
        std::vector<float> xr(pr.x.size()), ref(pr.ref.size());
        for (std::size_t i = 0; i < xr.size(); ++i) xr[i] = specdec::to_float(specdec::to_bf16(pr.x[i]));
        specdec::matmul_reference(ref.data(), xr.data(), pr.W.data(), s.n, s.k, s.m);
        const auto bounds = error_bounds(xr, pr.W, s.n, s.k, s.m);
        const specdec::PanelMatrix<bf16> P(s.m, s.k, [&](int j) { return pr.wf.data() + std::size_t(j) * s.k; });
        for (ThreadPool* pool : {&pool1, &pool2, &pool3}) {
            std::vector<float> y(std::size_t(s.n) * s.m, std::nanf(""));
            specdec::panel_matmul(*pool, y.data(), pr.x.data(), P, s.n, specdec::PanelInput::kBf16, dot);
            INFO("n=" << s.n << " k=" << s.k << " m=" << s.m << " threads=" << pool->size() << " dot=" << dot);
            CHECK(worst_error_ratio(y, ref, bounds) <= 1.0);
        }
    }
}

// Greedy verification is lossless only if a tree node's logits are the bits its own decode step
// computes (tree_attention.hpp), so a row of y must not depend on how many rows come with it: tile
// heights, blocks of k steps, thread count.
template <class WT>
void check_rows_do_not_depend_on_n(specdec::PanelInput input, bool dot) {
    ThreadPool pool1(1), pool3(3);
    const int k = 201, m = 150, n_max = 40;
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> w(static_cast<std::size_t>(m) * k), x(static_cast<std::size_t>(n_max) * k);
    for (float& v : w) v = u(rng);
    for (float& v : x) v = u(rng);
    const specdec::PanelMatrix<WT> W(m, k, [&](int j) { return &w[static_cast<std::size_t>(j) * k]; });
    std::vector<float> alone(static_cast<std::size_t>(n_max) * m), together(alone.size());
    for (int i = 0; i < n_max; ++i)
        specdec::panel_matmul(pool1, &alone[static_cast<std::size_t>(i) * m], &x[static_cast<std::size_t>(i) * k], W, 1, input, dot);
    for (int n : {2, 9, 10, 16, 19, 24, 27, 28, 40})
        for (ThreadPool* pool : {&pool1, &pool3}) {
            specdec::panel_matmul(*pool, together.data(), x.data(), W, n, input, dot);
            INFO("n = " << n << ", threads = " << pool->size());
            CHECK(std::equal(together.begin(), together.begin() + static_cast<std::ptrdiff_t>(n) * m, alone.begin(),
                             [](float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }));
        }
}

TEST_CASE("a row of the panel product is the same bits whatever the number of rows and threads", "[matmul][panels]") {
    if (!specdec::panels_available()) {
        WARN("this CPU lacks AVX-512: the panel product is not used here and not tested");
        return;
    }
    check_rows_do_not_depend_on_n<float>(specdec::PanelInput::kFloat32, true);
    check_rows_do_not_depend_on_n<bf16>(specdec::PanelInput::kFloat32, true);
    check_rows_do_not_depend_on_n<bf16>(specdec::PanelInput::kBf16, false);
    if (specdec::bf16_dot_available()) check_rows_do_not_depend_on_n<bf16>(specdec::PanelInput::kBf16, true);
}

TEST_CASE("packing x for the panel product copies, rounds and pairs like to_bf16, bit for bit", "[matmul][panels]") {
    using specdec::detail::PackX;
    const int k = GENERATE(1, 2, 15, 16, 31, 32, 33, 64, 65, 100);
    const int mr = GENERATE(1, 2, 5, 8, 9);
    const PackX how = GENERATE(PackX::kCopy, PackX::kRound, PackX::kPairs);
    const int kp = how == PackX::kPairs ? (k + 1) / 2 * 2 : k + 3;  // float units past k: zero padding
    // Rounding's hard cases among ordinary values: ties to even both ways, a carry into the exponent,
    // the largest finite floats, infinities, a signalling NaN (kept NaN, made quiet), subnormals.
    const std::uint32_t special[] = {0x3F808000u, 0x3F818000u, 0x3FFFFFFFu, 0x7F7FFFFFu, 0xFF7FFFFFu, 0x7F800000u,
                                     0xFF800000u, 0x7F800001u, 0x00000001u, 0x80400000u, 0x3F80FFFFu, 0x00000000u};
    std::vector<float> x = random_floats(std::size_t(mr) * k, static_cast<std::uint32_t>(k * 100 + mr));
    for (std::size_t i = 0; i < x.size(); i += 3) x[i] = std::bit_cast<float>(special[(i / 3) % std::size(special)]);
    const std::size_t units = how == PackX::kPairs ? std::size_t(kp) / 2 : std::size_t(kp);
    std::vector<float> got(units * mr, 12345.0f);
    specdec::detail::pack_x_tile(got.data(), x.data(), k, kp, mr, how);
    const auto bits = [](float f) { return std::bit_cast<std::uint32_t>(f); };
    const auto bf = [](float f) { return std::uint32_t{specdec::to_bf16(f).bits}; };
    for (int r = 0; r < mr; ++r)
        for (std::size_t u = 0; u < units; ++u) {
            const auto at = [&](std::size_t p) { return p < std::size_t(k) ? x[std::size_t(r) * k + p] : 0.0f; };
            std::uint32_t want = 0;
            if (how == PackX::kPairs) want = bf(at(2 * u)) | bf(at(2 * u + 1)) << 16;
            else if (how == PackX::kRound) want = bits(specdec::to_float(specdec::to_bf16(at(u))));
            else want = bits(at(u));
            INFO("k=" << k << " mr=" << mr << " row " << r << " unit " << u);
            REQUIRE(bits(got[u * mr + r]) == want);
        }
}

TEST_CASE("panels hold every weight once, where index() says, and zeros in the padding", "[matmul][panels]") {
    const int m = GENERATE(1, 16, 40, 48, 100), k = GENERATE(1, 7, 30);
    std::vector<float> W(std::size_t(m) * k);
    for (std::size_t i = 0; i < W.size(); ++i) W[i] = float(i + 1);  // all distinct, none zero, exact in bf16 up to 256
    const auto row = [&](int j) { return W.data() + std::size_t(j) * k; };
    const specdec::PanelMatrix<float> pf(m, k, row);
    const specdec::PanelMatrix<bf16> pb(m, k, row);
    CHECK(pf.rows() == m);
    CHECK(pf.cols() == k);
    CHECK(pb.padded_cols() == (k + 1) / 2 * 2);
    const int m_pad = (m + 47) / 48 * 48;  // whole groups of 48 rows
    REQUIRE(pf.padded_cols() == k);
    std::vector<int> seen(std::size_t(m_pad) * k, 0);
    for (int j = 0; j < m; ++j)
        for (int p = 0; p < k; ++p) {
            CHECK(pf.at(j, p) == W[std::size_t(j) * k + p]);
            CHECK(specdec::to_float(pb.at(j, p)) == specdec::to_float(specdec::to_bf16(W[std::size_t(j) * k + p])));
            ++seen[pf.index(j, p)];
        }
    // index() is one-to-one onto the stored weights, and everything else is zero padding.
    CHECK(std::count(seen.begin(), seen.end(), 1) == std::ptrdiff_t(m) * k);
    std::ptrdiff_t nonzero = 0;
    for (std::size_t i = 0; i < seen.size(); ++i) nonzero += pf.data()[i] != 0.0f;
    CHECK(nonzero == std::ptrdiff_t(m) * k);
    CHECK(pf.groups() * specdec::kPanelGroupRows == m_pad);
}

TEST_CASE("panels packed from bf16 rows, in parallel, equal panels packed from float rows", "[matmul][panels]") {
    // bf16 rows of even k take pack16 (16 rows transposed in registers) where AVX-512 runs; the rest,
    // and RowRef rows (a loader's), the row-at-a-time copy. Every layout must be the same, padding included.
    const int m = GENERATE(5, 16, 47, 100), k = GENERATE(2, 7, 34, 70);
    std::vector<bf16> Wb(std::size_t(m) * k);
    std::vector<float> Wf(Wb.size());
    for (std::size_t i = 0; i < Wb.size(); ++i) Wf[i] = specdec::to_float(Wb[i] = specdec::to_bf16(0.01f * float(i % 997) - 3.0f));
    ThreadPool pool(2);
    const specdec::PanelMatrix<bf16> from_float(m, k, [&](int j) { return Wf.data() + std::size_t(j) * k; });
    const specdec::PanelMatrix<bf16> from_bf16(&pool, m, k, [&](int j) { return Wb.data() + std::size_t(j) * k; });
    const specdec::PanelMatrix<bf16> from_refs(&pool, m, k, [&](int j) {
        return j % 3 == 0 ? specdec::RowRef{.f32 = Wf.data() + std::size_t(j) * k} : specdec::RowRef{.bf = Wb.data() + std::size_t(j) * k};
    });
    const std::size_t stored = std::size_t(from_float.groups()) * specdec::kPanelGroupRows * from_float.padded_cols();
    CAPTURE(m, k);
    for (std::size_t i = 0; i < stored; ++i) {
        REQUIRE(from_bf16.data()[i].bits == from_float.data()[i].bits);
        REQUIRE(from_refs.data()[i].bits == from_float.data()[i].bits);
    }
}

TEST_CASE("panel_matmul handles empty products and rejects a negative n", "[matmul][panels]") {
    if (!specdec::panels_available()) {
        WARN("this CPU lacks AVX-512: panel_matmul is not tested");
        return;
    }
    ThreadPool pool(2);
    const std::vector<float> W(3 * 5, 1.0f), x(2 * 5, 1.0f);
    const specdec::PanelMatrix<float> P(3, 5, [&](int j) { return W.data() + j * 5; });
    std::vector<float> y(6, -1.0f);
    specdec::panel_matmul(pool, y.data(), x.data(), P, 0);
    CHECK(y[0] == -1.0f);  // n = 0 writes nothing
    CHECK_THROWS_WITH(specdec::panel_matmul(pool, y.data(), x.data(), P, -1), Catch::Contains("n = -1"));
    const specdec::PanelMatrix<float> empty_k(3, 0, [&](int j) { return W.data() + j * 5; });
    specdec::panel_matmul(pool, y.data(), x.data(), empty_k, 2);
    CHECK(y == std::vector<float>(6, 0.0f));  // k = 0: y = 0
}

}  // namespace test_matmul
