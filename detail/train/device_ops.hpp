// specdec/detail/train/device_ops.hpp — the training steps between matrix products, written once for the host and the GPU.
// SPDX-License-Identifier: MIT
#pragma once

// Each step is a functor whose operator()(i) computes one independent piece of the output: an element, a
// row, or a column summed over rows in order. A backend runs it for every i in [0, n): HostDevice in a
// loop over the thread pool, CudaDevice as one GPU thread per i. No piece writes where another does, so
// there are no atomics and the sums come out the same on any number of threads (and the same as the
// host's up to the order of floating-point work inside a piece). The arithmetic is layers.hpp's; the
// tests run these functors through HostDevice against TrainableLlama, which is how the GPU trainer's
// arithmetic is checked without a GPU (tests/train/test_device_llama.cpp).
//
// Layouts are TrainableLlama's: rows are N = B·T, q (N, H, hd), k and v (N, Hkv, hd), probs (B, H, T, T); a
// cross-attention (GLIDE's) reads Tk key rows per sequence instead: k and v (B, Tk, Hkv, hd), probs (B, H, T, Tk).

#include <cmath>
#include <cstdint>

#include "../core/philox.hpp"  // SPECDEC_HD

namespace specdec::train::ops {

using Index = std::int64_t;

SPECDEC_HD float sigmoid(float x) { return 1.0f / (1.0f + ::expf(-x)); }

// ---- copies and sums --------------------------------------------------------------------------------

/// dst[i] = value.
struct Fill {
    float* dst;
    float value;
    SPECDEC_HD void operator()(Index i) const { dst[i] = value; }
};

/// dst[i] += src[i].
struct AddInto {
    float* dst;
    const float* src;
    SPECDEC_HD void operator()(Index i) const { dst[i] += src[i]; }
};

/// dst[i] *= s.
struct Scale {
    float* dst;
    float s;
    SPECDEC_HD void operator()(Index i) const { dst[i] *= s; }
};

/// Piece c: Σ x² over [c·chunk, min(n, (c+1)·chunk)) in double, for a gradient norm.
struct SumSquaresChunk {
    double* out;
    const float* x;
    Index n, chunk;
    SPECDEC_HD void operator()(Index c) const {
        double s = 0.0;
        const Index end = (c + 1) * chunk < n ? (c + 1) * chunk : n;
        for (Index i = c * chunk; i < end; ++i) s += double(x[i]) * x[i];
        out[c] = s;
    }
};

/// Column d: bias[d] += Σ_rows dy[r, d] (rows in order).
struct ColumnSum {
    float* out;
    const float* dy;
    int N, D;
    SPECDEC_HD void operator()(Index d) const {
        float s = 0.0f;
        for (int r = 0; r < N; ++r) s += dy[Index(r) * D + d];
        out[d] += s;
    }
};

/// Row r: y[r] += bias.
struct AddBias {
    float* y;
    const float* bias;
    int D;
    SPECDEC_HD void operator()(Index i) const { y[i] += bias[i % D]; }
};

/// Row r of (N, 2D): [a_r | b_r].
struct Concat2 {
    float* out;
    const float* a;
    const float* b;
    int D;
    SPECDEC_HD void operator()(Index i) const {
        const Index r = i / (2 * D), c = i % (2 * D);
        out[i] = c < D ? a[r * D + c] : b[r * D + c - D];
    }
};

// ---- embeddings ---------------------------------------------------------------------------------------

/// Element (r, d): out = embed[token_r, d] for token rows, input[r, d] for soft-prompt rows (token < 0).
struct EmbeddingForward {
    float* out;
    const int* tokens;
    const float* embed;
    const float* input;  // may be null when no row reads it
    int D;
    SPECDEC_HD void operator()(Index i) const {
        const Index r = i / D, d = i % D;
        const int t = tokens[r];
        out[i] = t >= 0 ? embed[Index(t) * D + d] : input[i];
    }
};

/// Column d: dembed[token_r, d] += dout[r, d] over rows in order (two rows may share a token, but one
/// column belongs to one piece); soft-prompt rows copy their gradient to dinput instead.
struct EmbeddingBackward {
    float* dembed;  // may be null (a frozen embedding)
    float* dinput;  // may be null
    const float* dout;
    const int* tokens;
    int N, D;
    SPECDEC_HD void operator()(Index d) const {
        for (int r = 0; r < N; ++r) {
            const float g = dout[Index(r) * D + d];
            if (tokens[r] >= 0) {
                if (dembed != nullptr) dembed[Index(tokens[r]) * D + d] += g;
            } else if (dinput != nullptr) {
                dinput[Index(r) * D + d] = g;
            }
        }
    }
};

// ---- RMSNorm --------------------------------------------------------------------------------------------

/// Row r: rstd = 1/sqrt(mean(x²) + eps), out = x·rstd·w (CpuModel's arithmetic, the square sum in double).
struct RmsnormForward {
    float* out;
    float* rstd;
    const float* x;
    const float* w;
    int D;
    float eps;
    SPECDEC_HD void operator()(Index r) const {
        const float* xr = x + r * D;
        double s = 0.0;
        for (int i = 0; i < D; ++i) s += double(xr[i]) * xr[i];
        const float inv = 1.0f / ::sqrtf(static_cast<float>(s / D) + eps);
        rstd[r] = inv;
        for (int i = 0; i < D; ++i) out[r * D + i] = xr[i] * inv * w[i];
    }
};

/// Row r: dx += r w dout - r³ x / D · Σ dout w x (the weight's gradient is RmsnormWeightGrad).
struct RmsnormBackwardInput {
    float* dx;
    const float* dout;
    const float* x;
    const float* w;
    const float* rstd;
    int D;
    SPECDEC_HD void operator()(Index r) const {
        const float* xr = x + r * D;
        const float* g = dout + r * D;
        double s = 0.0;
        for (int i = 0; i < D; ++i) s += double(g[i]) * w[i] * xr[i];
        const float inv = rstd[r], c = static_cast<float>(s / D) * inv * inv * inv;
        for (int i = 0; i < D; ++i) dx[r * D + i] += inv * w[i] * g[i] - c * xr[i];
    }
};

/// Column i: dw[i] += Σ_rows dout[r, i] x[r, i] rstd[r].
struct RmsnormWeightGrad {
    float* dw;
    const float* dout;
    const float* x;
    const float* rstd;
    int N, D;
    SPECDEC_HD void operator()(Index i) const {
        float s = 0.0f;
        for (int r = 0; r < N; ++r) s += dout[Index(r) * D + i] * x[Index(r) * D + i] * rstd[r];
        dw[i] += s;
    }
};

// ---- RoPE ---------------------------------------------------------------------------------------------------

/// Pair (r, h, j) of x (N, heads, hd): rotates (x_j, x_{j+hd/2}) by cs (N, hd/2, 2) = (cos, ±sin):
/// a RopeTable's forward rotates, its backward (sin negated) applies the transpose.
struct Rope {
    float* x;
    const float* cs;
    int heads, hd;
    SPECDEC_HD void operator()(Index i) const {
        const int half = hd / 2;
        const Index r = i / (Index(heads) * half), rem = i % (Index(heads) * half);
        const int h = static_cast<int>(rem / half), j = static_cast<int>(rem % half);
        float* head = x + (r * heads + h) * hd;
        const float c = cs[(r * half + j) * 2], s = cs[(r * half + j) * 2 + 1];
        const float x0 = head[j], x1 = head[j + half];
        head[j] = x0 * c - x1 * s;
        head[j + half] = x1 * c + x0 * s;
    }
};

// ---- attention --------------------------------------------------------------------------------------------

/// B sequences of T query rows and Tk key rows (Tk = T for self-attention), H query heads reading kv
/// head h / (H / Hkv), head size hd; mask (T, Tk) shared or (B, T, Tk) per sequence, 1 = query row may
/// attend key column.
struct AttentionGeometry {
    int B, T, Tk, H, Hkv, hd;
    const std::uint8_t* mask;
    bool per_sequence;
    SPECDEC_HD const std::uint8_t* row(int b, int i) const { return mask + (Index(per_sequence ? b : 0) * T + i) * Tk; }
    SPECDEC_HD Index q_at(int b, int i, int h) const { return ((Index(b) * T + i) * H + h) * hd; }
    SPECDEC_HD Index kv_at(int b, int j, int kvh) const { return ((Index(b) * Tk + j) * Hkv + kvh) * hd; }
    SPECDEC_HD Index p_at(int b, int h, int i) const { return ((Index(b) * H + h) * T + i) * Tk; }
    SPECDEC_HD float scale() const { return 1.0f / ::sqrtf(static_cast<float>(hd)); }
    SPECDEC_HD int kv_head(int h) const { return h / (H / Hkv); }

    /// Row task = ((b · H) + h) · T + i: query row i of head h in sequence b.
    struct Row {
        int b, h, i;
    };
    SPECDEC_HD Row row_of(Index task) const {
        return {static_cast<int>(task / (Index(T) * H)), static_cast<int>((task / T) % H), static_cast<int>(task % T)};
    }
    /// Element e of a (B, T, H, hd) tensor (q, the attention's output): sequence, row, head, dimension.
    struct Element {
        int b, i, h, d;
    };
    SPECDEC_HD Element query_element(Index e) const {
        const Index bi = e / (Index(hd) * H);
        return {static_cast<int>(bi / T), static_cast<int>(bi % T), static_cast<int>((e / hd) % H), static_cast<int>(e % hd)};
    }
};

/// Row (b, h, i): probs = softmax(q·kᵀ/√hd) over visible keys, 0 elsewhere (all 0 if none is visible).
struct AttentionProbs {
    float* probs;
    const float* q;
    const float* k;
    AttentionGeometry g;
    SPECDEC_HD void operator()(Index task) const {
        const auto [b, h, i] = g.row_of(task);
        const int kvh = g.kv_head(h);
        const float* qi = q + g.q_at(b, i, h);
        float* p = probs + g.p_at(b, h, i);
        const std::uint8_t* visible = g.row(b, i);
        const float scale = g.scale();
        float mx = -INFINITY;
        for (int j = 0; j < g.Tk; ++j) {
            if (!visible[j]) continue;
            const float* kj = k + g.kv_at(b, j, kvh);
            float s = 0.0f;
            for (int d = 0; d < g.hd; ++d) s += qi[d] * kj[d];
            p[j] = s * scale;
            mx = p[j] > mx ? p[j] : mx;
        }
        if (mx == -INFINITY) {
            for (int j = 0; j < g.Tk; ++j) p[j] = 0.0f;
            return;
        }
        float sum = 0.0f;
        for (int j = 0; j < g.Tk; ++j) sum += (p[j] = visible[j] ? ::expf(p[j] - mx) : 0.0f);
        for (int j = 0; j < g.Tk; ++j) p[j] /= sum;
    }
};

/// Element (b, i, h, d): out (=, or += with `accumulate`) Σ_j w_ij x_j over key rows j of the query's
/// kv head, with w (B, H, T, Tk): the attention's output (w = probs, x = v) and dq (w = dS, x = k).
struct AttentionWeightedRows {
    float* out;
    const float* w;
    const float* x;
    AttentionGeometry g;
    bool accumulate;
    SPECDEC_HD void operator()(Index e) const {
        const auto [b, i, h, d] = g.query_element(e);
        const float* wr = w + g.p_at(b, h, i);
        float s = 0.0f;
        for (int j = 0; j < g.Tk; ++j)
            if (wr[j] != 0.0f) s += wr[j] * x[g.kv_at(b, j, g.kv_head(h)) + d];
        out[e] = accumulate ? out[e] + s : s;
    }
};

/// Row (b, h, i): dS_ij = P_ij (dP_ij - Σ_l P_il dP_il) / √hd with dP_ij = dout_i · v_j, into ds (B, H, T, Tk).
struct AttentionScoreGrad {
    float* ds;
    const float* probs;
    const float* dout;
    const float* v;
    AttentionGeometry g;
    SPECDEC_HD void operator()(Index task) const {
        const auto [b, h, i] = g.row_of(task);
        const int kvh = g.kv_head(h);
        const float* p = probs + g.p_at(b, h, i);
        const float* go = dout + g.q_at(b, i, h);
        float* dsr = ds + g.p_at(b, h, i);
        float dot_sum = 0.0f;
        for (int j = 0; j < g.Tk; ++j) {
            if (p[j] == 0.0f) {
                dsr[j] = 0.0f;
                continue;
            }
            const float* vj = v + g.kv_at(b, j, kvh);
            float dp = 0.0f;
            for (int d = 0; d < g.hd; ++d) dp += go[d] * vj[d];
            dsr[j] = dp;
            dot_sum += p[j] * dp;
        }
        const float scale = g.scale();
        for (int j = 0; j < g.Tk; ++j) dsr[j] = p[j] == 0.0f ? 0.0f : p[j] * (dsr[j] - dot_sum) * scale;
    }
};

/// Element (b, j, kvh, d) of dk, dv (B, Tk, Hkv, hd): dk += Σ_{h in the group} Σ_i dS_ij q_i, dv += Σ_h Σ_i
/// P_ij dout_i over the T query rows i.
struct AttentionKeyValueGrad {
    float* dk;
    float* dv;
    const float* ds;
    const float* probs;
    const float* q;
    const float* dout;
    AttentionGeometry g;
    SPECDEC_HD void operator()(Index e) const {
        const int d = static_cast<int>(e % g.hd), kvh = static_cast<int>((e / g.hd) % g.Hkv);
        const Index bj = e / (Index(g.hd) * g.Hkv);
        const int j = static_cast<int>(bj % g.Tk), b = static_cast<int>(bj / g.Tk), group = g.H / g.Hkv;
        float sk = 0.0f, sv = 0.0f;
        for (int h = kvh * group; h < (kvh + 1) * group; ++h)
            for (int i = 0; i < g.T; ++i) {
                const float p = probs[g.p_at(b, h, i) + j];
                if (p == 0.0f) continue;
                const Index qi = g.q_at(b, i, h) + d;
                sk += ds[g.p_at(b, h, i) + j] * q[qi];
                sv += p * dout[qi];
            }
        dk[e] += sk;
        dv[e] += sv;
    }
};

// ---- SwiGLU ---------------------------------------------------------------------------------------------------

/// out = silu(gate) · up.
struct SwigluForward {
    float* out;
    const float* gate;
    const float* up;
    SPECDEC_HD void operator()(Index i) const { out[i] = gate[i] * sigmoid(gate[i]) * up[i]; }
};

/// dgate += dout · up · σ(g)(1 + g(1 - σ(g))), dup += dout · silu(g).
struct SwigluBackward {
    float* dgate;
    float* dup;
    const float* dout;
    const float* gate;
    const float* up;
    SPECDEC_HD void operator()(Index i) const {
        const float g = gate[i], s = sigmoid(g);
        dgate[i] += dout[i] * up[i] * s * (1.0f + g * (1.0f - s));
        dup[i] += dout[i] * g * s;
    }
};

// ---- losses -----------------------------------------------------------------------------------------------------

/// log Σ_j exp z_j in double (the softmax's denominator, as layers.hpp's log_sum_exp).
SPECDEC_HD double log_sum_exp(const float* z, int V) {
    double mx = -INFINITY;
    for (int j = 0; j < V; ++j) mx = z[j] > mx ? z[j] : mx;
    double s = 0.0;
    for (int j = 0; j < V; ++j) s += ::exp(double(z[j]) - mx);
    return mx + ::log(s);
}

/// Row r (counted where counted[r] != 0, or always when counted is null): loss[r] = -Σ p log softmax(z)
/// (+ Σ p log p with `with_entropy`: KL(p ‖ q)), dz += g ((Σp) q - p); uncounted rows get loss 0.
struct SoftTargetRow {
    float* dz;
    float* loss;
    const float* z;
    const float* p;
    const std::uint8_t* counted;
    int V;
    float g;
    bool with_entropy;
    SPECDEC_HD void operator()(Index r) const {
        if (counted != nullptr && !counted[r]) {
            loss[r] = 0.0f;
            return;
        }
        const float* zr = z + r * V;
        const float* pr = p + r * V;
        const double lse = log_sum_exp(zr, V);
        double l = 0.0, mass = 0.0;
        for (int j = 0; j < V; ++j) {
            mass += pr[j];
            l -= pr[j] * (double(zr[j]) - lse);
            if (with_entropy && pr[j] > 0) l += pr[j] * ::log(double(pr[j]));
        }
        for (int j = 0; j < V; ++j) dz[r * V + j] += static_cast<float>(g * (mass * ::exp(double(zr[j]) - lse) - pr[j]));
        loss[r] = static_cast<float>(l);
    }
};

/// Row r (skipped where target[r] < 0, kIgnoreIndex): loss[r] = log Σ exp z - z_target,
/// dz += g (softmax(z) - onehot(target)); skipped rows get loss 0.
struct HardTargetRow {
    float* dz;
    float* loss;
    const float* z;
    const int* target;
    int V;
    float g;
    SPECDEC_HD void operator()(Index r) const {
        const int t = target[r];
        if (t < 0) {
            loss[r] = 0.0f;
            return;
        }
        const float* zr = z + r * V;
        const double lse = log_sum_exp(zr, V);
        for (int j = 0; j < V; ++j) dz[r * V + j] += static_cast<float>(g * ::exp(double(zr[j]) - lse));
        dz[r * V + t] -= g;
        loss[r] = static_cast<float>(lse - zr[t]);
    }
};

/// Row r: loss[r] = mean over D of SmoothL1_β(pred - target), dpred += g · its derivative; uncounted rows 0.
struct SmoothL1Row {
    float* dpred;
    float* loss;
    const float* pred;
    const float* target;
    const std::uint8_t* counted;
    int D;
    float beta, g;
    SPECDEC_HD void operator()(Index r) const {
        if (counted != nullptr && !counted[r]) {
            loss[r] = 0.0f;
            return;
        }
        double l = 0.0;
        for (int i = 0; i < D; ++i) {
            const Index at = r * D + i;
            const double d = double(pred[at]) - double(target[at]), ad = d < 0 ? -d : d;
            l += ad < beta ? 0.5 * d * d / beta : ad - 0.5 * beta;
            dpred[at] += static_cast<float>(g * (ad < beta ? d / beta : (d > 0 ? 1.0 : -1.0)));
        }
        loss[r] = static_cast<float>(l / D);
    }
};

/// Row r: 1 where argmax z_r == argmax p_r (the first maximum of each, as std::max_element).
struct Top1Agrees {
    float* out;
    const float* z;
    const float* p;
    int V;
    SPECDEC_HD void operator()(Index r) const {
        int az = 0, ap = 0;
        for (int j = 1; j < V; ++j) {
            if (z[r * V + j] > z[r * V + az]) az = j;
            if (p[r * V + j] > p[r * V + ap]) ap = j;
        }
        out[r] = az == ap ? 1.0f : 0.0f;
    }
};

/// Row r: p = softmax(z) over V (a frozen teacher's law, the target of distillation).
struct SoftmaxRow {
    float* p;
    const float* z;
    int V;
    SPECDEC_HD void operator()(Index r) const {
        const double lse = log_sum_exp(z + r * V, V);
        for (int j = 0; j < V; ++j) p[r * V + j] = static_cast<float>(::exp(double(z[r * V + j]) - lse));
    }
};

// ---- AdamW ---------------------------------------------------------------------------------------------------------

/// One AdamW update of element i (the optimizer.hpp arithmetic): decoupled decay `decay` = lr · wd (0 for
/// vectors), bias corrections bias1 = 1 - β1^t, bias2 = 1 - β2^t.
struct AdamWStep {
    float* p;
    float* m;
    float* v;
    const float* grad;
    float beta1, beta2, eps, lr, decay, bias1, bias2;
    SPECDEC_HD void operator()(Index i) const {
        const float g = grad[i];
        m[i] = beta1 * m[i] + (1.0f - beta1) * g;
        v[i] = beta2 * v[i] + (1.0f - beta2) * g * g;
        const float m_hat = m[i] / bias1, v_hat = v[i] / bias2;
        p[i] -= decay * p[i];
        p[i] -= lr * m_hat / (::sqrtf(v_hat) + eps);
    }
};

}  // namespace specdec::train::ops
