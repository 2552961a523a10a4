// A program outside the library checks a new acceptor with specdec::check, using only the installed
// package: the correct chain acceptor must be reported lossless (with its control caught), a planted
// wrong one (no residual after a rejection) not. Exits 1 if either verdict is wrong.
#include <specdec.hpp>

#include <algorithm>
#include <cstdint>
#include <iostream>
#include <span>
#include <vector>

using namespace specdec;

/// Speculative sampling for a chain, written from Leviathan et al. 2023, Alg. 1: accept the draft x
/// with probability min(1, p(x)/q(x)), else draw from norm(max(0, p - q)); the coins at the documented
/// coordinates (docs/writing_a_policy.md). `residual = false` plants the classic bug: draw from p.
struct MyChainAcceptor {
    bool residual = true;
    AcceptResult accept(const Tree& tree, Rows logits, const StepContext& ctx) const {
        if (ctx.sampling.greedy()) return greedy_walk(tree, logits);
        std::vector<float> p(logits.cols);
        AcceptResult r{{0}, 0};
        int node = 0;
        for (;;) {
            processed_probs(logits.row(node), ctx.sampling, p);
            const std::vector<int> kids = tree.children(node);
            if (kids.empty()) break;
            require(kids.size() == 1 && tree.has_child_dist(node), "acceptor",
                    [] { return std::string("MyChainAcceptor needs a chain of sampled drafts"); });
            const int x = tree[kids[0]].token;
            const std::span<const float> q = tree.child_dist(node);
            if (ctx.rng.uniform(static_cast<std::uint32_t>(node), 0) < p[x] / q[x]) {
                r.path.push_back(node = kids[0]);
                continue;
            }
            if (residual)
                for (int t = 0; t < logits.cols; ++t) p[t] = std::max(0.0f, p[t] - q[t]);
            break;
        }
        r.bonus = sample_index(p, ctx.rng.uniform(static_cast<std::uint32_t>(node), kBonusCoin));
        return r;
    }
};

int main() try {
    // A tiny random target over 6 tokens and a drafter near it: the law of two tokens has 36 cells.
    const Config cfg{.hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 2, .num_attention_heads = 4,
                     .num_key_value_heads = 2, .vocab_size = 6, .max_position_embeddings = 64};
    const Weights w = random_weights(cfg, 2024, 0.3f);
    CpuModel target(cfg, w), draft(cfg, perturbed(cfg, w, 0.8f, 77));
    const auto with = [&](MyChainAcceptor acceptor) {
        return [&draft, acceptor] { return check::Composition{ModelProposer(draft), Chain{.gamma = 3}, acceptor}; };
    };
    const std::vector<std::vector<int>> prompts{{1, 4, 2}};
    const Sampling sampling{.temperature = 1.0f};

    const check::Report good = check::check_lossless(target, with(MyChainAcceptor{}), prompts, sampling, 2000);
    std::cout << "correct acceptor:\n" << good;
    const check::Report bad = check::check_lossless(target, with(MyChainAcceptor{.residual = false}), prompts, sampling, 2000);
    std::cout << "acceptor without the residual (planted bug):\n" << bad;

    const bool right = good.ok() && !bad.lossless() && bad.powered();
    std::cout << "consumer: check_lossless " << (right ? "told the correct acceptor from the wrong one" : "gave a WRONG verdict")
              << "\n";
    return right ? 0 : 1;
} catch (const specdec::error& e) {
    std::cerr << e.what() << "\n";
    return 1;
}
