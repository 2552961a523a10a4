// mcsd_study — improved MCSD's measurements that the benchmark harness cannot express (docs/methods/mcsd.md):
//
//   law [T=1] [draws=3000] [prompt]  what target-initialisation's "lossy" costs on the shipped models (target,
//       small drafter): the joint law of the first two generated tokens of improved MCSD (2,4,3,1,1) and of
//       plain sampling, `draws` seeded runs at temperature T after `prompt` (default: the opening of A Tale of
//       Two Cities), against the target's exact law (chi-square, pooled cells)
//   likelihood [prompts=100]  the target's mean log-likelihood per token of 32-token continuations sampled at
//       T = 1, target-initialised vs plain sampling, paired by prompt, with a standard error
//   greedy [prompts=40] [small|mid]  what top seeds cost at T = 0 (the paper's T = 0 runs, §4.2): 64-token
//       continuations of plain greedy decoding and of (2,4,3,1,1) with the target's two most likely tokens as
//       seeds (drafts by top-k and sampled), paired by prompt: how many stay greedy, where they leave it, how
//       many tokens are not the target's argmax after their own prefix, the target's log-likelihood per token
//   decision [small|mid]  trains Type 1 and Type 2 decision models (§3.3) on logged drafting steps, then
//       decodes with the draft-initialised fork (DynamicFork) and with the paper's framework (target-drawn
//       seeds, a chain below each, TargetInitialisedFork), each with and without early stop
//   mask  the prebuilt sliced fork mask (§3.2) vs deriving the mask from parents per forward
//
// Run from the repository root: ./build/release/mcsd_study law | likelihood | decision | mask (scripts/mcsd_experiment.sh
// runs all three). The chi-square statistic, its pooling and the exact law are the test suite's
// (tests/helpers.hpp, which needs Catch2, so the few lines are repeated here).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <span>
#include <utility>
#include <string>
#include <vector>

#include "../report.hpp"
#include "specdec.hpp"

using namespace specdec;

namespace {

// The grader of the first two tokens is the library's public one (specdec::check, detail/check/lossless.hpp).

/// The law mode's default prompt: a well-known opening whose continuation the target predicts with few
/// likely tokens, so each cell of the two-token law holds enough draws to show a shift.
const char* const kLawPrompt = "It was the best of times, it was the worst of times,";

struct Models {
    ThreadPool pool{1};
    CpuModel target, draft;
    Tokenizer tok = Tokenizer::load("models/target/tokenizer.json");
    // The target verifies a whole vocabulary's worth of nodes once (the exact two-token law: V + 1).
    std::string drafter;
    explicit Models(const std::string& d) : target(load("models/target", 4200)), draft(load("models/" + d, 256)), drafter(d) {}
    CpuModel load(const std::string& dir, int max_tree_nodes) {
        Checkpoint c = load_checkpoint(dir);
        return CpuModel(c.config, std::move(c.weights),
                        ModelOptions{.max_tree_nodes = max_tree_nodes, .weight_format = WeightFormat::kF32, .pool = &pool});
    }
};

/// The first two tokens' joint law at temperature T over `draws` seeded runs (§3.1's loss shows first
/// where a step keeps one seed of two), against the exact law, beside plain sampling's.
int law(Models& m, float T, int draws, const std::string& text) {
    ModelProposer proposer(m.draft);
    TreeVerifier verifier;
    TargetInitialisedTree ti{.n_seeds = 2, .k_config = {4, 3, 1, 1}};
    LossyTargetInitialisedSampling lossy{.allow_lossy = true};
    const std::vector<int> prompt = m.tok.encode(text);
    const Sampling s{.temperature = T};
    check::Counts plain, seeded;
    for (int seed = 0; seed < draws; ++seed) {
        // Long enough that the first step drafts its full depth (4), as the suite's sampled_two_tokens.
        const GenerateOptions o{.max_new_tokens = 5, .sampling = s, .seed = static_cast<std::uint64_t>(seed)};
        const Generation a = autoregressive_generate(m.target, prompt, GenerateOptions{.max_new_tokens = 2, .sampling = s, .seed = o.seed});
        ++plain[{a.tokens[0], a.tokens[1]}];
        const Generation b = speculative_generate(m.target, proposer, ti, verifier, lossy, prompt, o);
        ++seeded[{b.tokens[0], b.tokens[1]}];
        if ((seed + 1) % 250 == 0) std::fprintf(stderr, "%d draws\n", seed + 1);
    }
    const check::Law exact = check::exact_two_token_law(m.target, prompt, s);
    std::printf("first two tokens' joint law at T = %.1f, %d seeded runs, after \"%s\" (%zu tokens)\n", T, draws,
                text.c_str(), prompt.size());
    std::printf("%-34s %10s %5s %9s %7s\n", "method", "chi-square", "dof", "critical", "TV");
    for (const auto& [name, counts] : {std::pair{"plain sampling (exact)", &plain}, std::pair{"target-initialised (2,4,3,1,1)", &seeded}}) {
        const check::ChiSquare chi = check::chi_square(*counts, exact, draws);
        std::printf("%-34s %10.1f %5d %9.1f %7.3f\n", name, chi.statistic, chi.dof, check::chi_square_critical(chi.dof),
                    check::total_variation(*counts, exact, draws));
    }
    std::printf("(critical: the chi-square's p = 0.001 point; cells with expected count < 5 pooled into one)\n");
    return 0;
}

/// The target's mean log-likelihood per token of 32-token continuations sampled at T = 1, one per
/// prompt and method, paired by prompt (same seed), so the prompt's own difficulty cancels.
int likelihood(Models& m, int n_prompts) {
    ModelProposer proposer(m.draft);
    TreeVerifier verifier;
    TargetInitialisedTree ti{.n_seeds = 2, .k_config = {4, 3, 1, 1}};
    LossyTargetInitialisedSampling lossy{.allow_lossy = true};
    const Sampling s{.temperature = 1.0f};
    const auto prompts = example::read_prompts("data/prompts.jsonl", n_prompts);
    const int len = 32;
    std::vector<double> diff;
    double sum_plain = 0, sum_ti = 0;
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const std::vector<int> p = m.tok.encode(prompts[i].text);
        const GenerateOptions o{.max_new_tokens = len, .sampling = s, .seed = 1000 + i};
        const Generation a = autoregressive_generate(m.target, p, o);
        const Generation b = speculative_generate(m.target, proposer, ti, verifier, lossy, p, o);
        const double la = log_likelihood(m.target, p, a.tokens, s) / len, lb = log_likelihood(m.target, p, b.tokens, s) / len;
        sum_plain += la, sum_ti += lb;
        diff.push_back(lb - la);
    }
    const double n = static_cast<double>(diff.size());
    double mean = 0, var = 0;
    for (double d : diff) mean += d / n;
    for (double d : diff) var += (d - mean) * (d - mean) / (n - 1);
    std::printf("target's log-likelihood per token (T = 1) of %d-token continuations sampled at T = 1, %zu prompts:\n", len,
                prompts.size());
    std::printf("  plain sampling %.4f   target-initialised (2,4,3,1,1) %.4f   difference %+.4f +- %.4f (standard error)\n",
                sum_plain / n, sum_ti / n, mean, std::sqrt(var / n));
    return 0;
}

/// Top seeds at T = 0: the outputs against plain greedy decoding, paired by prompt. Greedy decoding
/// maximises each next token, not the text's likelihood, so the likelihood can move either way; the
/// off-greedy count is the direct measure of the loss.
int greedy(Models& m, int n_prompts) {
    ModelProposer proposer(m.draft);
    TreeVerifier verifier;
    LossyTargetInitialisedSampling lossy{.allow_lossy = true};
    const Sampling t1{.temperature = 1.0f};
    const auto prompts = example::read_prompts("data/prompts.jsonl", n_prompts);
    const int len = 64;
    struct Variant {
        const char* name;
        TargetInitialisedTree builder;
        int identical = 0;
        long off_greedy = 0, first_departure = 0, tokens = 0;
        std::vector<double> diff{};
    };
    std::vector<Variant> variants{
        {"one seed, top-k drafts (exact)", {.n_seeds = 2, .k_config = {4, 3, 1, 1}, .draw_at_t0 = DrawPolicy::kTopK}},
        {"2 top seeds, top-k drafts", {.n_seeds = 2, .k_config = {4, 3, 1, 1}, .top_seeds_at_t0 = true, .draw_at_t0 = DrawPolicy::kTopK}},
        {"2 top seeds, sampled drafts", {.n_seeds = 2, .k_config = {4, 3, 1, 1}, .top_seeds_at_t0 = true}},
    };
    double ll_plain = 0;
    const GenerateOptions o{.max_new_tokens = len};
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        const std::vector<int> p = m.tok.encode(prompts[i].text);
        const Generation a = autoregressive_generate(m.target, p, o);
        const double la = log_likelihood(m.target, p, a.tokens, t1) / len;
        ll_plain += la;
        for (Variant& v : variants) {
            const Generation b = speculative_generate(m.target, proposer, v.builder, verifier, lossy, p, o);
            v.identical += b.tokens == a.tokens;
            std::size_t k = 0;
            while (k < a.tokens.size() && a.tokens[k] == b.tokens[k]) ++k;
            v.first_departure += static_cast<long>(k);
            // Off-greedy: tokens that are not the target's argmax after the output's own prefix.
            std::vector<int> text = p;
            text.insert(text.end(), b.tokens.begin(), b.tokens.end() - 1);
            m.target.reset();
            prefill(m.target, std::span<const int>(text).first(text.size() - len));
            const Rows scored = m.target.forward(Tree::chain(std::vector<int>(text.end() - len, text.end())), 0);
            m.target.reset();
            for (int j = 0; j < len; ++j) v.off_greedy += argmax(scored.row(j)) != b.tokens[static_cast<std::size_t>(j)];
            v.tokens += len;
            v.diff.push_back(log_likelihood(m.target, p, b.tokens, t1) / len - la);
        }
        std::fprintf(stderr, "%zu/%zu prompts\n", i + 1, prompts.size());
    }
    const double n = static_cast<double>(prompts.size());
    std::printf("T = 0, %zu prompts x %d tokens, drafter %s; (2,4,3,1,1) against plain greedy decoding, paired by prompt\n",
                prompts.size(), len, m.drafter.c_str());
    std::printf("%-32s %9s %15s %12s %28s\n", "variant", "identical", "first departure", "off-greedy", "log-lik/token (T = 1) vs plain");
    std::printf("%-32s %9s %15s %12s %28.4f\n", "plain greedy", "-", "-", "-", ll_plain / n);
    for (const Variant& v : variants) {
        double mean = 0, var = 0;
        for (double d : v.diff) mean += d / n;
        for (double d : v.diff) var += (d - mean) * (d - mean) / (n - 1);
        std::printf("%-32s %5d/%-3zu %15.1f %11.2f%% %+19.4f +- %.4f\n", v.name, v.identical, prompts.size(),
                    v.first_departure / n, 100.0 * v.off_greedy / v.tokens, mean, std::sqrt(var / n));
    }
    std::printf("(first departure: mean index of the first token that differs from plain greedy, %d if none; off-greedy: tokens\n"
                " that are not the target's argmax after the output's own prefix; +- is a standard error)\n", len);
    return 0;
}

/// Decision models (§3.3): log drafting steps on 40 held-out prompts' continuations, train Type 1 (hidden
/// state, 3 layers) and Type 2 (entropy + top-4 of q, 2 layers), then decode 20 other prompts with a fork
/// of 4 chains, depth up to 8, with and without the 0.4 rule — the draft-initialised fork (lossless) and the
/// paper's framework, two target-drawn seeds with a chain below each (lossy).
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
    LossyTargetInitialisedSampling lossy{.allow_lossy = true};
    using Stop = DecisionStop<CpuModel>;
    const Stop rule1{&type1, &m.draft, 0.4f}, rule2{&type2, nullptr, 0.4f};
    DynamicFork<> fixed{.width = 4, .max_depth = 8};
    DynamicFork<Stop> stop1{.width = 4, .max_depth = 8, .stop = rule1}, stop2{.width = 4, .max_depth = 8, .stop = rule2};
    TargetInitialisedFork<> seeded{.width = 2, .max_depth = 8};
    TargetInitialisedFork<Stop> seeded1{.width = 2, .max_depth = 8, .stop = rule1}, seeded2{.width = 2, .max_depth = 8, .stop = rule2};
    std::printf("\nT = 0.7, 20 other prompts x 64 tokens; acceptance = alpha_longest (summarize); %s, 1 thread\n"
                "speedup: plain decoding timed beside each prompt's run (same seed), after one untimed run of each\n"
                "%-40s %6s %6s %8s %8s %7s\n",
                example::machine_name().c_str(), "fork, depth <= 8", "tau", "accept", "depth", "nodes", "speedup");
    const auto run = [&](const char* name, auto& builder, auto& acc) {
        Generation pooled;
        double secs = 0, t_plain = 0;
        for (int i = 39; i < 60; ++i) {  // prompt 39: the untimed warm-up of both
            const std::vector<int> prompt = m.tok.encode(prompts[i].text);
            const GenerateOptions opts{.max_new_tokens = 64, .sampling = s, .seed = static_cast<std::uint64_t>(i)};
            const double plain = example::seconds([&] { autoregressive_generate(m.target, prompt, opts); });
            Generation g;
            const double spec = example::seconds([&] { g = speculative_generate(m.target, proposer, builder, verifier, acc, prompt, opts); });
            if (i < 40) continue;
            t_plain += plain;
            secs += spec;
            pooled.tokens.insert(pooled.tokens.end(), g.tokens.begin(), g.tokens.end());
            pooled.steps.insert(pooled.steps.end(), g.steps.begin(), g.steps.end());
        }
        const Summary u = summarize(pooled);
        double depth = 0;
        for (const StepRecord& r : pooled.steps) depth += r.depth;
        std::printf("%-40s %6.2f %6.2f %8.2f %8.1f %6.2fx\n", name, u.tau, u.alpha_longest, depth / pooled.steps.size(),
                    u.nodes_per_step, t_plain / secs);
    };
    run("4 drafted chains, no stop", fixed, acceptor);
    run("4 drafted chains, Type 1 (hidden state)", stop1, acceptor);
    run("4 drafted chains, Type 2 (q's entropy)", stop2, acceptor);
    run("2 seeds + chains, no stop (LOSSY)", seeded, lossy);
    run("2 seeds + chains, Type 1 (LOSSY)", seeded1, lossy);
    run("2 seeds + chains, Type 2 (LOSSY)", seeded2, lossy);
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

int positive(const char* arg, const char* what) {
    const int v = std::atoi(arg);
    if (v < 2) detail::fail("demo", std::string(what) + " = '" + arg + "': expected an integer >= 2");
    return v;
}

}  // namespace

int main(int argc, char** argv) try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "law") {
        Models m("small");
        const float T = argc > 2 ? static_cast<float>(std::atof(argv[2])) : 1.0f;
        if (!(T > 0.0f)) detail::fail("demo", std::string("T = '") + argv[2] + "': expected a temperature > 0 (the law is sampled)");
        return law(m, T, argc > 3 ? positive(argv[3], "draws") : 3000, argc > 4 ? argv[4] : kLawPrompt);
    }
    if (mode == "likelihood") {
        Models m("small");
        return likelihood(m, argc > 2 ? positive(argv[2], "prompts") : 100);
    }
    if (mode == "greedy") {
        const std::string drafter = argc > 3 ? argv[3] : "small";
        if (drafter != "small" && drafter != "mid") detail::fail("demo", "drafter '" + drafter + "': expected small or mid");
        Models m(drafter);
        return greedy(m, argc > 2 ? positive(argv[2], "prompts") : 40);
    }
    if (mode == "decision") {
        const std::string drafter = argc > 2 ? argv[2] : "small";
        if (drafter != "small" && drafter != "mid") detail::fail("demo", "drafter '" + drafter + "': expected small or mid");
        Models m(drafter);
        return decision(m);
    }
    if (mode == "mask") {
        Models m("small");
        return mask(m);
    }
    detail::fail("demo", "mode '" + mode + "': expected law, likelihood, greedy, decision or mask (usage at the top of examples/bench/mcsd_study.cpp)");
} catch (const specdec::error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
