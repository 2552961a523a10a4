// 11 — Improved multi-candidate speculative decoding (improved-mcsd.txt) as compositions of policies.
//
// Teaches: four drafts of one drafter, each a short composition — vanilla SD (a chain of 4), MCSD's
// draft-initialised k-config tree (4,2,2,1) sampled without replacement and verified losslessly by
// MultiDraftSampling, the paper's target-initialised candidates (2,4,3,1,1): two seeds drawn from the
// target's law at the bonus position, a (4,3,1,1) tree below each, all verified in one forward, the
// seed with the longest accepted drafts kept — LOSSY, so its acceptor runs only with allow_lossy — and
// the dynamic fork of W chains. The loop makes target-initialisation possible without a special case:
// the acceptor defers its bonus (AcceptResult::bonus_law) and the next builder draws its roots from it.
//
// Modes (run from the repository root; models/target with models/small, or models/mid as argv[2]):
//   ./build/release/11_mcsd [show] [small|mid]       the four compositions on 6 held-out prompts, T = 0.7
//   ./build/release/11_mcsd quality [small|mid] [N]  what "lossy" costs: TV and KL of the first token, N draws per prompt,
//                                                     and the target's log-likelihood of 64-token continuations
//   ./build/release/11_mcsd decision [small|mid]     trains Type 1 and Type 2 decision models on logged drafting
//                                                     steps, then runs a fork with and without early stop
//   ./build/release/11_mcsd mask                     the prebuilt sliced fork mask vs deriving the mask per forward
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>

#include "report.hpp"
#include "specdec.hpp"

using namespace specdec;

namespace {

/// Acceptance as improved MCSD defines it (Table 2): longest accepted draft / maximum draft length, per step.
double mcsd_acceptance(const Generation& g) {
    double sum = 0;
    int n = 0;
    for (const StepRecord& s : g.steps)
        if (s.depth > 0) sum += static_cast<double>(s.n_accepted) / s.depth, ++n;
    return n ? sum / n : 0.0;
}

struct Models {
    ThreadPool pool{1};
    CpuModel target, draft;
    Tokenizer tok = Tokenizer::load("models/target/tokenizer.json");
    explicit Models(const std::string& drafter)
        : target(load("models/target")), draft(load("models/" + drafter)) {}
    CpuModel load(const std::string& dir) {
        Checkpoint c = load_checkpoint(dir);
        return CpuModel(c.config, std::move(c.weights), ModelOptions{.weight_format = WeightFormat::kF32, .pool = &pool});
    }
};

int show(Models& m) {
    // ---- the compositions ----------------------------------------------------------------------------
    ModelProposer proposer(m.draft);
    TreeVerifier verifier;
    Chain sd{.gamma = 4};                                                   // vanilla SD
    McsdTree mcsd{.k_config = {4, 2, 2, 1}};                                // MCSD (lossless)
    TargetInitialisedTree target_init{.n_seeds = 2, .k_config = {4, 3, 1, 1}};  // improved MCSD (2,4,3,1,1)
    DynamicFork<> fork{.width = 16, .max_depth = 4};                        // the dynamic configuration's fork
    SpeculativeSampling chain_acceptor;
    MultiDraftSampling tree_acceptor;
    LossyTargetInitialisedSampling lossy{.allow_lossy = true};             // opted in: it is lossy
    // ---------------------------------------------------------------------------------------------------
    const GenerateOptions opts{.max_new_tokens = 64, .sampling = {.temperature = 0.7f}, .seed = 3};
    const auto prompts = example::read_prompts("data/prompts.jsonl", 6);
    std::printf("%-34s %6s %10s %8s %7s\n", "T = 0.7, 6 prompts x 64 tokens", "tau", "acceptance", "nodes", "tok/s");
    const auto run = [&](const char* name, auto&& generate) {
        double acc = 0, secs = 0;
        long tokens = 0, steps = 0, nodes = 0;
        for (const example::Prompt& p : prompts) {
            const std::vector<int> prompt = m.tok.encode(p.text);
            Generation g;
            secs += example::seconds([&] { g = generate(prompt); });
            acc += mcsd_acceptance(g);
            tokens += static_cast<long>(g.tokens.size());
            steps += g.n_target_calls();
            for (const StepRecord& s : g.steps) nodes += s.n_drafted;
        }
        std::printf("%-34s %6.2f %10.2f %8.1f %7.0f\n", name, double(tokens) / steps, acc / prompts.size(),
                    double(nodes) / steps, tokens / secs);
    };
    run("plain sampling", [&](const std::vector<int>& p) { return autoregressive_generate(m.target, p, opts); });
    run("SD, chain of 4", [&](const std::vector<int>& p) {
        return speculative_generate(m.target, proposer, sd, verifier, chain_acceptor, p, opts);
    });
    run("MCSD (4,2,2,1)", [&](const std::vector<int>& p) {
        return speculative_generate(m.target, proposer, mcsd, verifier, tree_acceptor, p, opts);
    });
    run("target-initialised (2,4,3,1,1) LOSSY", [&](const std::vector<int>& p) {
        return speculative_generate(m.target, proposer, target_init, verifier, lossy, p, opts);
    });
    run("fork W = 16, D = 4", [&](const std::vector<int>& p) {
        return speculative_generate(m.target, proposer, fork, verifier, tree_acceptor, p, opts);
    });
    return 0;
}

/// TV and KL of the first generated token's law (n draws per prompt) against the target's exact law,
/// next to the same distance for n draws from the exact law itself (the noise floor); then the
/// target's log-likelihood per token of 64-token continuations, plain sampling vs each method.
int quality(Models& m, int n) {
    const Sampling s{.temperature = 0.7f};
    const Sampling score{.temperature = 1.0f};  // the likelihood is the target's own law (T = 1)
    ModelProposer proposer(m.draft);
    TreeVerifier verifier;
    TargetInitialisedTree ti{.n_seeds = 2, .k_config = {4, 3, 1, 1}};
    McsdTree mcsd;
    MultiDraftSampling multi;
    LossyTargetInitialisedSampling lossy{.allow_lossy = true};
    const auto prompts = example::read_prompts("data/prompts.jsonl", 4);
    std::printf("first generated token, T = 0.7, %d draws per prompt\n", n);
    std::printf("%-8s %10s %10s %10s %10s %10s\n", "prompt", "TV TI", "TV MCSD", "TV floor", "KL TI", "KL MCSD");
    double sum_ti = 0, sum_mcsd = 0, sum_floor = 0;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const std::vector<int> prompt = m.tok.encode(prompts[i].text);
        const std::vector<float> p = next_token_distribution(m.target, prompt, s);
        std::map<int, double> exact;
        for (int t = 0; t < static_cast<int>(p.size()); ++t)
            if (p[t] > 0) exact[t] = p[t];
        std::map<int, int> c_ti, c_mcsd, c_floor;
        const GenerateOptions o{.max_new_tokens = 5, .sampling = s};
        for (int k = 0; k < n; ++k) {
            GenerateOptions ok = o;
            ok.seed = static_cast<std::uint64_t>(k);
            ++c_ti[speculative_generate(m.target, proposer, ti, verifier, lossy, prompt, ok).tokens[0]];
            ++c_mcsd[speculative_generate(m.target, proposer, mcsd, verifier, multi, prompt, ok).tokens[0]];
        }
        std::mt19937_64 gen(i);
        std::discrete_distribution<int> law(p.begin(), p.end());
        for (int k = 0; k < n; ++k) ++c_floor[law(gen)];
        const double tv_ti = total_variation(c_ti, exact, n), tv_mcsd = total_variation(c_mcsd, exact, n);
        const double tv_floor = total_variation(c_floor, exact, n);
        sum_ti += tv_ti, sum_mcsd += tv_mcsd, sum_floor += tv_floor;
        std::printf("%-8zu %10.3f %10.3f %10.3f %10.3f %10.3f\n", i, tv_ti, tv_mcsd, tv_floor,
                    kl_divergence(c_ti, exact, n), kl_divergence(c_mcsd, exact, n));
    }
    const double np = static_cast<double>(prompts.size());
    std::printf("%-8s %10.3f %10.3f %10.3f\n\n", "mean", sum_ti / np, sum_mcsd / np, sum_floor / np);

    const auto held_out = example::read_prompts("data/prompts.jsonl", 20);
    double ll_plain = 0, ll_ti = 0, ll_mcsd = 0;
    long tokens = 0;
    for (std::size_t i = 0; i < held_out.size(); ++i) {
        const std::vector<int> prompt = m.tok.encode(held_out[i].text);
        for (std::uint64_t seed = 0; seed < 3; ++seed) {
            const GenerateOptions o{.max_new_tokens = 64, .sampling = s, .seed = seed};
            const Generation plain = autoregressive_generate(m.target, prompt, o);
            const Generation a = speculative_generate(m.target, proposer, ti, verifier, lossy, prompt, o);
            const Generation b = speculative_generate(m.target, proposer, mcsd, verifier, multi, prompt, o);
            ll_plain += log_likelihood(m.target, prompt, plain.tokens, score);
            ll_ti += log_likelihood(m.target, prompt, a.tokens, score);
            ll_mcsd += log_likelihood(m.target, prompt, b.tokens, score);
            tokens += 64;
        }
    }
    std::printf("target log-likelihood per token (T = 1) of T = 0.7 continuations, %zu prompts x 3 seeds x 64 tokens:\n",
                held_out.size());
    std::printf("  plain sampling %.4f   MCSD (lossless) %.4f   target-initialised (2,4,3,1,1) %.4f\n", ll_plain / tokens,
                ll_mcsd / tokens, ll_ti / tokens);
    return 0;
}

/// Decision models (§3.3): log drafting steps on 40 held-out prompts' continuations, train Type 1 (hidden
/// state, 3 layers) and Type 2 (entropy + top-4 of q, 2 layers), then decode 20 other prompts with a
/// fork of 4 chains, depth 8, with and without the 0.4 rule.
int decision(Models& m) {
    const Sampling s{.temperature = 0.7f};
    m.draft.capture_hidden({m.draft.config().num_hidden_layers});
    const auto prompts = example::read_prompts("data/prompts.jsonl", 60);
    std::vector<std::vector<int>> texts;
    for (int i = 0; i < 40; ++i) {
        std::vector<int> t = m.tok.encode(prompts[i].text);
        const Generation g = autoregressive_generate(m.target, t, GenerateOptions{.max_new_tokens = 64, .sampling = s, .seed = 5});
        t.insert(t.end(), g.tokens.begin(), g.tokens.end());
        texts.push_back(std::move(t));
    }
    const std::vector<DecisionSample> data = log_drafting_steps(m.target, m.draft, texts, s, 4, 7);
    double mean_acc = 0;
    for (const DecisionSample& d : data) mean_acc += d.acceptance;
    std::printf("%zu logged drafting steps, mean min(1, p/q) = %.3f\n", data.size(), mean_acc / data.size());
    DecisionModel type1({.input = DecisionInput::kDraftHidden, .n_in = m.draft.config().hidden_size, .hidden = 64, .n_layers = 3}, 1);
    DecisionModel type2({.input = DecisionInput::kDraftLaw, .n_in = 5, .hidden = 32, .n_layers = 2, .top_k = 4}, 2);
    for (DecisionModel* d : {&type1, &type2}) {
        const auto curve = train::train_decision_model(*d, data, {.epochs = 30, .batch = 64, .lr = 2e-3f});
        std::printf("Type %d: binary cross-entropy %.4f -> %.4f over 30 epochs\n", d == &type1 ? 1 : 2, curve.front(), curve.back());
    }

    ModelProposer proposer(m.draft);
    TreeVerifier verifier;
    MultiDraftSampling acceptor;
    DynamicFork<> fixed{.width = 4, .max_depth = 8};
    DynamicFork<DecisionStop<CpuModel>> stop1{.width = 4, .max_depth = 8, .stop = {&type1, &m.draft, 0.4f}};
    DynamicFork<DecisionStop<CpuModel>> stop2{.width = 4, .max_depth = 8, .stop = {&type2, nullptr, 0.4f}};
    std::printf("\nfork W = 4, D = 8, T = 0.7, 20 other prompts x 64 tokens\n%-22s %6s %8s %8s %7s %8s\n", "early stop", "tau",
                "depth", "nodes", "tok/s", "speedup");
    double t_plain = 0;
    for (int i = 40; i < 60; ++i) {
        const std::vector<int> prompt = m.tok.encode(prompts[i].text);
        t_plain += example::seconds([&] { autoregressive_generate(m.target, prompt, GenerateOptions{.max_new_tokens = 64, .sampling = s}); });
    }
    const auto run = [&](const char* name, auto& builder) {
        long tokens = 0, steps = 0, nodes = 0, depth = 0;
        double secs = 0;
        for (int i = 40; i < 60; ++i) {
            const std::vector<int> prompt = m.tok.encode(prompts[i].text);
            Generation g;
            secs += example::seconds([&] {
                g = speculative_generate(m.target, proposer, builder, verifier, acceptor, prompt,
                                         GenerateOptions{.max_new_tokens = 64, .sampling = s, .seed = static_cast<std::uint64_t>(i)});
            });
            tokens += static_cast<long>(g.tokens.size());
            steps += g.n_target_calls();
            for (const StepRecord& r : g.steps) nodes += r.n_drafted, depth += r.depth;
        }
        std::printf("%-22s %6.2f %8.2f %8.1f %7.0f %7.2fx\n", name, double(tokens) / steps, double(depth) / steps,
                    double(nodes) / steps, tokens / secs, t_plain / secs);
    };
    run("none (depth 8)", fixed);
    run("Type 1 (hidden state)", stop1);
    run("Type 2 (q's entropy)", stop2);
    return 0;
}

/// The sliced mask (§3.2): a view into the mask built once, against deriving the fork's mask from its
/// parents (what the CPU model and CUDA kernels do per forward), against the target's forward itself.
int mask(Models& m) {
    const int W = 16, D = 4, reps = 20000;
    const ForkMask built(W, D);
    std::vector<std::vector<int>> chains(W, std::vector<int>(D));
    for (int c = 0; c < W; ++c)
        for (int d = 0; d < D; ++d) chains[c][d] = 100 + 7 * c + d;
    std::printf("fork W = %d, D = %d: mean over depths s = 1..%d, %d repeats\n", W, D, D, reps);
    for (int s = 1; s <= D; ++s) {
        std::vector<std::vector<int>> cut(W);
        for (int c = 0; c < W; ++c) cut[c].assign(chains[c].begin(), chains[c].begin() + s);
        const Tree tree = fork_tree(5, cut);
        const int words = detail::mask_words(tree.size());
        std::vector<std::uint32_t> bits(static_cast<std::size_t>(tree.size()) * words);
        long sink = 0;
        const double derive = example::seconds([&] {
            for (int r = 0; r < reps; ++r) {
                detail::ancestor_masks(tree, 0, words, bits);
                sink += bits[r % bits.size()];
            }
        }) / reps;
        const double slice = example::seconds([&] {
            for (int r = 0; r < reps; ++r) sink += built.slice(s).n;
        }) / reps;
        const std::vector<int> prompt = m.tok.encode("It was the best of times, it was the worst of times,");
        m.target.reset();
        prefill(m.target, std::span<const int>(prompt).first(prompt.size() - 1));
        double forward = 1e9;
        for (int r = 0; r < 5; ++r) forward = std::min(forward, example::seconds([&] { (void)m.target.forward(tree, 0); }));
        std::printf("  s = %d (%3d nodes): derive mask %.3f us, slice %.4f us, target forward %.2f ms (%ld)\n", s,
                    tree.size(), 1e6 * derive, 1e6 * slice, 1e3 * forward, sink % 2);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) try {
    const std::string mode = argc > 1 ? argv[1] : "show";
    const std::string drafter = argc > 2 ? argv[2] : "small";
    if (drafter != "small" && drafter != "mid") detail::fail("demo", "drafter '" + drafter + "': expected small or mid");
    Models m(drafter);
    if (mode == "show") return show(m);
    if (mode == "quality") return quality(m, argc > 3 ? std::atoi(argv[3]) : 1000);
    if (mode == "decision") return decision(m);
    if (mode == "mask") return mask(m);
    detail::fail("demo", "unknown mode '" + mode + "': expected show, quality, decision or mask");
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
// Run: ./build/release/11_mcsd (about a minute); scripts/mcsd_experiment.sh runs every mode and the benchmark.
// Prints, per composition, tau, the acceptance (longest accepted / maximum draft length), draft nodes per
// step and tokens/s; target-initialisation accepts the most and is the one that is not lossless.
