// EAGLE's, FSPAD's and EDD's drafting on the GPU against the CPU reference: CudaModel fed supplied
// inputs (forward_embeddings, eager and graphed), its committed hidden states through prefill, tree
// commits and truncation, EAGLE's layer without end norms and FSPAD's PAD, CudaFeatureDrafter behind
// FeatureProposer against FeatureDrafter step for step, EDD's drafter as a one-layer CudaModel behind
// EddProposer against CpuModel's, greedy EAGLE-2 and EDD + PCT decoding on the GPU against greedy
// decoding, and bad input. Runs only with a GPU (tests/cuda/main.cpp exits 77 without one).
//
// Error bounds are test_cuda.cu's, normalised by the reference's largest magnitude:
//   kExact  0     the same inputs through the same kernels (token vs supplied embeddings, graphs vs
//                 eager, host vs device inputs), captured inputs (a copy)
//   kModel  3e-2  a CudaModel vs a CpuModel holding the same bf16-rounded matrices; likewise a
//                 CudaFeatureDrafter vs a FeatureDrafter on the same bf16-rounded checkpoint, each over
//                 its own backend's target. There the CPU also rounds every product's input to bf16
//                 (ModelOptions' bf16 weights), as the GPU does: the drafter feeds its own features
//                 forward depth after depth, which compounds a float32 oracle's distance (measured on
//                 the CPU, bf16 products against float32: up to 0.023 for FC, 0.084 for the sampler)
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <vector>

#include "catch.hpp"
#include "cuda/cuda_helpers.hpp"
#include "detail/cuda/feature_drafter.cuh"
#include "detail/cuda/model.cuh"
#include "helpers.hpp"
#include "specdec.hpp"

using namespace specdec;
using namespace specdec::cuda_test;

namespace {

bool same_bits(std::span<const float> a, std::span<const float> b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

/// A CpuModel that rounds each product's input to bf16, as CudaModel does (the same numbers on any CPU).
const ModelOptions kBf16Products{.weight_format = WeightFormat::kBF16, .bf16_inputs = true};

/// Targets: head_dim 8 (GQA 2) and 64 (GQA 2), `layers` deep.
Config target_config(int which, int layers = 2) {
    Config c = which == 0 ? test::tiny_config(true)
                          : Config{.hidden_size = 256, .intermediate_size = 512, .num_hidden_layers = 2,
                                   .num_attention_heads = 4, .num_key_value_heads = 2, .vocab_size = 1000,
                                   .max_position_embeddings = 512};
    c.num_hidden_layers = layers;
    return c;
}

std::vector<int> tokens_of(int n, int vocab, int salt) {
    std::vector<int> t(n);
    for (int i = 0; i < n; ++i) t[i] = (i * 7 + salt * 13 + i * i + 1) % vocab;
    return t;
}

/// The path to the deepest node of `tree` whose path is not the chain 0, 1, 2, ...: commit must move
/// rows, not keep them in place.
std::vector<int> moving_path(const Tree& tree) {
    std::vector<int> best;
    for (int i = 0; i < tree.size(); ++i) {
        std::vector<int> p = tree.path_to(i);
        bool moves = false;
        for (std::size_t j = 0; j < p.size(); ++j) moves = moves || p[j] != static_cast<int>(j);
        if (moves && p.size() > best.size()) best = std::move(p);
    }
    REQUIRE(best.size() >= 3);
    return best;
}

/// A drafter checkpoint whose matrices are bf16 already (what CudaFeatureDrafter computes with); the
/// norms and the FC bias stay float32, as on the GPU.
FeatureCheckpoint bf16_drafter(FeatureCheckpoint ck) {
    ck.weights = bf16_matrices(ck.config, std::move(ck.weights));
    for (std::vector<float>* t : {&ck.connector_weights.fc, &ck.connector_weights.gate, &ck.connector_weights.up,
                                  &ck.connector_weights.down})
        *t = rounded(*t);
    return ck;
}

/// The drafter kinds: EAGLE's FC without a bias (the drafters trained here), EAGLE's own layout (FC with
/// a bias, the layer without its end norms: the checkpoints SGLang and vLLM serve), FSPAD's Feature
/// Sampler with PAD.
struct Kind {
    const char* name;
    Connector connector;
    bool pad, eagle_layout;
};

FeatureCheckpoint drafter_of(const Kind& k, const Config& tc, const Weights& tw, std::uint64_t seed, float std_dev) {
    FeatureCheckpoint ck = initial_feature_drafter(tc, tw, k.connector, k.pad, seed, std_dev);
    if (k.eagle_layout) {
        ck.config.identity_end_norms = true;
        ck.connector_weights.fc_bias.resize(static_cast<std::size_t>(tc.hidden_size));
        for (std::size_t i = 0; i < ck.connector_weights.fc_bias.size(); ++i)
            ck.connector_weights.fc_bias[i] = 0.05f * static_cast<float>(i % 5) - 0.1f;
    }
    return ck;
}

/// A CPU and a GPU pair side by side: both targets prefill `text` but its last token (the pending root)
/// and both proposers start on it; then two speculative steps in EAGLE-2's order: the root, then three
/// children, then three grandchildren, each a new propose (`check(tree, nodes)` compares the proposers'
/// rows); the targets verify and keep root -> 2 -> 5 (not the first nodes: the drafters' rows must
/// move), and the bonus token becomes the next root.
template <class Check, class CpuTarget, class GpuTarget, class CpuProposer, class GpuProposer>
void two_steps(std::vector<int>& text, int V, CpuTarget& cpu_target, GpuTarget& gpu_target, CpuProposer& cpu,
               GpuProposer& gpu, Check&& check) {
    const std::vector<int> prompt(text.begin(), text.end() - 1);
    detail::prefill(cpu_target, prompt);
    detail::prefill(gpu_target, prompt);
    cpu.start(text);
    gpu.start(text);
    for (int step = 0; step < 2; ++step) {
        INFO("step " << step);
        Tree tree;
        tree.add_root(text.back());
        check(tree, std::vector<int>{0});
        for (int j = 0; j < 3; ++j) tree.add((text.back() + 5 * j + step + 1) % V, 0);
        check(tree, std::vector<int>{1, 2, 3});
        tree.add((7 * step + 3) % V, 2);
        tree.add((7 * step + 4) % V, 2);
        tree.add((7 * step + 5) % V, 3);
        check(tree, std::vector<int>{4, 5, 6});
        REQUIRE(gpu.n_calls() == cpu.n_calls());

        const std::vector<int> path{0, 2, 5};
        const int bonus = (11 * step + 2) % V;
        cpu_target.forward(tree, 0);
        cpu_target.commit(path);
        gpu_target.forward(tree, 0);
        gpu_target.commit(path);
        const StepOutcome outcome{.tree = tree, .path = path, .next_root = bonus};
        cpu.observe(outcome);
        gpu.observe(outcome);
        for (std::size_t i = 1; i < path.size(); ++i) text.push_back(tree[path[i]].token);
        text.push_back(bonus);
    }
}

}  // namespace

// ---------------------------------------------------------------------------------------------------
// CudaModel fed supplied inputs

TEST_CASE("CudaModel's forward_embeddings of the embedding rows gives forward's logits bit for bit",
          "[cuda][eagle]") {
    const int which = GENERATE(0, 1);
    const Config cfg = target_config(which);
    const Weights w = bf16_matrices(cfg, random_weights(cfg, 21 + which, model_scale(cfg)));
    CudaContext ctx;
    CudaModel gpu(cfg, w, ctx);
    CpuModel cpu(cfg, w);
    const int D = cfg.hidden_size;
    detail::prefill(gpu, tokens_of(30, cfg.vocab_size, which));
    detail::prefill(cpu, tokens_of(30, cfg.vocab_size, which));
    const Tree tree = random_tree(12, cfg.vocab_size, 3 + which);
    const int n = tree.size();
    INFO("config " << which);

    // The bf16 embedding rows widened: exactly what the GPU's gather writes into the residual stream.
    std::vector<float> embedded;
    for (int i = 0; i < n; ++i) {
        const auto row = w.embed.begin() + static_cast<std::ptrdiff_t>(tree[i].token) * D;
        embedded.insert(embedded.end(), row, row + D);
    }
    const std::vector<float> by_token = copy_rows(gpu.forward(tree, 0));
    const std::vector<float> by_host = copy_rows(gpu.forward_embeddings(tree, 0, Rows{embedded, D}));
    const auto d_embedded = to_device<float>(embedded);
    const std::vector<float> by_device = copy_rows(gpu.forward_embeddings(tree, 0, d_embedded.get()));
    CHECK(same_bits(by_host, by_token));
    CHECK(same_bits(by_device, by_token));

    // Random inputs: CpuModel::forward_embeddings is the oracle; the host and device paths agree bit for bit.
    const std::vector<float> inputs = normal(static_cast<std::size_t>(n) * D, 40 + which);
    const std::vector<float> want = copy_rows(cpu.forward_embeddings(tree, 0, Rows{inputs, D}));
    const std::vector<float> got = copy_rows(gpu.forward_embeddings(tree, 0, Rows{inputs, D}));
    CHECK(normalized_error(got, want) < kModel);
    CHECK(normalized_error(got, by_token) > kModel);  // the inputs were read, not the tokens' embeddings
    const auto d_inputs = to_device<float>(inputs);
    CHECK(same_bits(copy_rows(gpu.forward_embeddings(tree, 0, d_inputs.get())), got));

    SECTION("growing the tree with forward_embeddings(tree, first) gives the same rows") {
        Tree grown;
        std::vector<float> rows;
        int first = 0;
        for (int i = 0; i < n; ++i) {
            grown.add(tree[i].token, tree[i].parent);
            if (i % 5 == 4 || i + 1 == n) {
                const std::span<const float> part(inputs.data() + static_cast<std::size_t>(first) * D,
                                                  static_cast<std::size_t>(grown.size() - first) * D);
                const std::vector<float> out = copy_rows(gpu.forward_embeddings(grown, first, Rows{part, D}));
                rows.insert(rows.end(), out.begin(), out.end());
                first = grown.size();
            }
        }
        CHECK(normalized_error(rows, want) < kModel);
    }
}

TEST_CASE("CUDA graphs keyed by tree size and input kind: token and supplied forwards interleaved equal eager",
          "[cuda][eagle][graphs]") {
    const Config cfg = target_config(GENERATE(0, 1));
    const Weights w = bf16_matrices(cfg, random_weights(cfg, 6, 0.3f));
    const int D = cfg.hidden_size;
    CudaContext ctx;
    CudaModel eager(cfg, w, ctx), graphed(cfg, w, ctx, CudaModelOptions{.graphs = CudaGraphs::kOn});
    for (auto* m : {&eager, &graphed}) detail::prefill(*m, std::vector<int>{1, 2, 3, 4, 5, 6, 7});
    // Each size runs by token and by supplied inputs (host, then device: one graph serves both, the
    // upload sits outside it) three times at growing cache lengths: the first of each key captures,
    // the rest replay. A graph replayed for the other kind would embed the tokens, or skip them.
    for (int round = 0; round < 3; ++round)
        for (int N : {1, 4, 9}) {
            INFO("round " << round << ", N " << N);
            const Tree tree = random_tree(N, cfg.vocab_size, 100 + round * 10 + N);
            const std::vector<float> inputs = normal(static_cast<std::size_t>(N) * D, 200 + round * 10 + N);
            const auto d_inputs = to_device<float>(inputs);
            const std::vector<float> a = copy_rows(eager.forward(tree, 0)), b = copy_rows(graphed.forward(tree, 0));
            CHECK(same_bits(a, b));
            const std::vector<float> c = copy_rows(eager.forward_embeddings(tree, 0, Rows{inputs, D}));
            const std::vector<float> d = copy_rows(graphed.forward_embeddings(tree, 0, Rows{inputs, D}));
            CHECK(same_bits(c, d));
            CHECK(!same_bits(c, a));
            const std::vector<float> e = copy_rows(graphed.forward(tree, 0));
            CHECK(same_bits(e, a));
            const std::vector<float> f = copy_rows(graphed.forward_embeddings(tree, 0, d_inputs.get()));
            CHECK(same_bits(f, c));
            // Both models' last forward was supplied with the same inputs: the committed KV rows agree.
            const std::vector<int> path = tree.path_to(N - 1);
            eager.commit(path);
            graphed.commit(path);
        }
}

// ---------------------------------------------------------------------------------------------------
// Committed hidden states (ExposesCommittedHidden)

TEST_CASE("CudaModel's committed hidden states of two layers follow prefill, tree commits and truncation as CpuModel's",
          "[cuda][eagle]") {
    const int which = GENERATE(0, 1);
    const Config cfg = target_config(which, 4);
    const int L = cfg.num_hidden_layers;
    const Weights w = bf16_matrices(cfg, random_weights(cfg, 51 + which, model_scale(cfg)));
    CpuModel cpu(cfg, w);
    CudaContext ctx;
    CudaModel gpu(cfg, w, ctx);
    // L as a drafter's constructor sets it, L - 3 added beside it (an EDD reader's), both before the text.
    cpu.capture_hidden({L});
    gpu.capture_hidden({L});
    const int edd = gpu.add_hidden_layer(L - 3);
    REQUIRE(cpu.add_hidden_layer(L - 3) == edd);
    REQUIRE(gpu.hidden_index(L) == 0);
    REQUIRE(gpu.hidden_index(L - 3) == edd);
    INFO("config " << which);

    // Reads the GPU's host copy after every change (it is fetched incrementally: a stale row shows).
    const auto check_same = [&](const char* when) {
        INFO(when);
        REQUIRE(gpu.cache_len() == cpu.cache_len());
        for (int i : {0, edd}) {
            INFO("captured layer " << (i == 0 ? L : L - 3));
            const std::vector<float> got = copy_rows(gpu.committed_hidden(i)), want = copy_rows(cpu.committed_hidden(i));
            REQUIRE(got.size() == static_cast<std::size_t>(cpu.cache_len()) * cfg.hidden_size);
            CHECK(normalized_error(got, want) < kModel);
        }
    };
    const auto both = [&](auto&& step) {
        step(cpu);
        step(gpu);
    };

    const std::vector<int> prefix = tokens_of(19, cfg.vocab_size, which);
    for (std::size_t at = 0; at < prefix.size(); at += 7) {  // a prefill in three chunks
        const auto part = std::span<const int>(prefix).subspan(at, std::min<std::size_t>(7, prefix.size() - at));
        both([&](auto& m) { detail::prefill(m, part); });
        check_same("after a prefill chunk");
    }

    for (const auto& [nodes, seed] : {std::pair{14, 61}, std::pair{11, 71}}) {  // two trees, each committing a moving path
        const Tree tree = random_tree(nodes, cfg.vocab_size, seed + which);
        const std::vector<int> path = moving_path(tree);
        both([&](auto& m) {
            m.forward(tree, 0);
            m.commit(path);
        });
        check_same(nodes == 14 ? "after the first tree's commit" : "after the second tree's commit");
    }

    // Back past the second tree's rows into the first's, then other tokens in their place.
    const int keep = static_cast<int>(prefix.size()) + 1;
    both([&](auto& m) {
        m.truncate(keep);
        detail::prefill(m, tokens_of(6, cfg.vocab_size, which + 5));
    });
    check_same("after truncating and forwarding other tokens");

    SECTION("a layer added after the text was forwarded is refused until the model is reset") {
        const int late = gpu.add_hidden_layer(L - 1);
        CHECK_THROWS_WITH(gpu.committed_hidden(late),
                          Catch::Contains("[specdec.cuda.model]") &&
                              Catch::Contains("capture_hidden was called after " + std::to_string(gpu.cache_len()) + " tokens") &&
                              Catch::Contains("layer " + std::to_string(L - 1)));
        CHECK_THROWS_WITH(gpu.hidden_index(L - 2),
                          Catch::Contains("[specdec.cuda.model]") && Catch::Contains("layer " + std::to_string(L - 2) + " is not captured"));
        CHECK_THROWS_WITH(gpu.hidden(late), Catch::Contains("[specdec.cuda.model]") && Catch::Contains("captured in the last forward"));
        gpu.reset();
        cpu.reset();
        REQUIRE(cpu.add_hidden_layer(L - 1) == late);
        both([&](auto& m) { detail::prefill(m, prefix); });
        const std::vector<float> got = copy_rows(gpu.committed_hidden(late)), want = copy_rows(cpu.committed_hidden(late));
        CHECK(normalized_error(got, want) < kModel);
        check_same("after the reset and a new prefill");
    }
}

// ---------------------------------------------------------------------------------------------------
// The drafter's layer: EAGLE's without end norms, FSPAD's PAD

TEST_CASE("a one-layer CudaModel without end norms (EAGLE) or with PAD (FSPAD) matches CpuModel", "[cuda][eagle]") {
    const bool pad = GENERATE(false, true);
    const int which = GENERATE(0, 1);
    const Config tc = target_config(which);
    Config c = feature_drafter_config(tc, pad);
    c.identity_end_norms = !pad;
    const Weights w = bf16_matrices(c, random_weights(c, 81 + which, model_scale(c)));
    const int D = c.hidden_size;
    CpuModel cpu(c, w);
    CudaContext ctx;
    CudaModel gpu(c, w, ctx);
    cpu.capture_hidden({0, 1});
    gpu.capture_hidden({0, 1});
    INFO((pad ? "PAD" : "no end norms") << ", config " << which);

    // The drafter's committed rows: a chain of supplied inputs, committed whole (CudaFeatureDrafter::append).
    const int T = 20;
    const std::vector<float> history = normal(static_cast<std::size_t>(T) * D, 90 + which);
    std::vector<int> all(T);
    std::iota(all.begin(), all.end(), 0);
    const Tree chain = Tree::chain(tokens_of(T, c.vocab_size, which));
    const std::vector<float> chain_want = copy_rows(cpu.forward_embeddings(chain, 0, Rows{history, D}));
    CHECK(normalized_error(copy_rows(gpu.forward_embeddings(chain, 0, Rows{history, D})), chain_want) < kModel);
    cpu.commit(all);
    gpu.commit(all);

    const Tree tree = random_tree(12, c.vocab_size, 92 + which);
    const std::vector<float> inputs = normal(static_cast<std::size_t>(tree.size()) * D, 93 + which);
    const std::vector<float> want = copy_rows(cpu.forward_embeddings(tree, 0, Rows{inputs, D}));
    const std::vector<float> got = copy_rows(gpu.forward_embeddings(tree, 0, Rows{inputs, D}));
    CHECK(normalized_error(got, want) < kModel);
    CHECK(copy_rows(gpu.hidden(0)) == inputs);  // state 0: the supplied inputs as given
    // State 1 = L: the layer's output (no end norms), or PAD's feature branch through the final norm.
    CHECK(normalized_error(copy_rows(gpu.hidden(1)), copy_rows(cpu.hidden(1))) < kModel);

    const std::vector<int> path = moving_path(tree);
    cpu.commit(path);
    gpu.commit(path);
    CHECK(normalized_error(copy_rows(gpu.committed_hidden(1)), copy_rows(cpu.committed_hidden(1))) < kModel);
}

// ---------------------------------------------------------------------------------------------------
// CudaFeatureDrafter behind FeatureProposer

TEST_CASE("FeatureProposer over CudaModel and CudaFeatureDrafter proposes the CPU's logits, step after step",
          "[cuda][eagle]") {
    const Kind k = GENERATE(Kind{"EAGLE (FC)", Connector::kFc, false, false},
                            Kind{"EAGLE layout (FC + bias, no end norms)", Connector::kFc, false, true},
                            Kind{"FSPAD (Feature Sampler + PAD)", Connector::kSampler, true, false});
    const int which = GENERATE(0, 1);
    // With graphs, the drafter's layer replays its graph as the tree grows a depth at a time (first > 0).
    const CudaGraphs graphs = GENERATE(CudaGraphs::kOff, CudaGraphs::kOn);
    const Config tc = target_config(which);
    const int V = tc.vocab_size;
    const Weights tw = bf16_matrices(tc, random_weights(tc, 101 + which, model_scale(tc)));
    FeatureCheckpoint raw = drafter_of(k, tc, tw, 111 + which, model_scale(tc));
    // The sampler's gate reads e, whose entries are model_scale small; at that scale the gate leaves
    // the drafts ill-conditioned (bf16 products moved them by 0.084 on the CPU, by 0.024 with the gate
    // sqrt(D) larger).
    for (float& x : raw.connector_weights.gate) x *= std::sqrt(static_cast<float>(tc.hidden_size));
    const FeatureCheckpoint ck = bf16_drafter(std::move(raw));
    CAPTURE(k.name, which, graphs == CudaGraphs::kOn);
    CpuModel cpu_target(tc, tw, kBf16Products);
    CudaContext ctx;
    CudaModel gpu_target(tc, tw, ctx, CudaModelOptions{.graphs = graphs});
    FeatureDrafter cpu_drafter(ck, kBf16Products);
    CudaFeatureDrafter gpu_drafter(ck, ctx, CudaModelOptions{.graphs = graphs});
    FeatureProposer<CpuModel> cpu(cpu_target, cpu_drafter);
    FeatureProposer<CudaModel, CudaFeatureDrafter> gpu(gpu_target, gpu_drafter);

    std::vector<int> text = tokens_of(13, V, which);  // the last one is the pending root
    // Both proposers' rows for `nodes` of `tree` (grown since the last call), compared with their features.
    const auto propose = [&](const Tree& tree, const std::vector<int>& nodes) {
        const std::vector<float> want = copy_rows(cpu.propose(tree, nodes)), got = copy_rows(gpu.propose(tree, nodes));
        CHECK(normalized_error(got, want) < kModel);
        CHECK(normalized_error(copy_rows(gpu.node_features()), copy_rows(cpu.node_features())) < kModel);
    };

    two_steps(text, V, cpu_target, gpu_target, cpu, gpu, propose);
    CHECK(gpu.n_calls() == 6);
    // The last step's catch-up fed the accepted rows from the target's features, on both sides.
    CHECK(gpu.rows_fed() == cpu.rows_fed());
    CHECK(gpu_drafter.model.cache_len() == cpu_drafter.model.cache_len());
    // Every committed row but the root's at the last step's start: 12 + 3 target rows, less one.
    CHECK(gpu.rows_fed() == 14);
}

// ---------------------------------------------------------------------------------------------------
// Decoding

TEST_CASE("greedy EAGLE-2 with CudaFeatureDrafter equals greedy decoding of the CudaModel target",
          "[cuda][eagle][generate]") {
    const Kind k = GENERATE(Kind{"EAGLE (FC)", Connector::kFc, false, false},
                            Kind{"EAGLE layout (FC + bias, no end norms)", Connector::kFc, false, true},
                            Kind{"FSPAD (Feature Sampler + PAD)", Connector::kSampler, true, false});
    const std::uint64_t seed = GENERATE(1u, 2u, 3u);
    CAPTURE(k.name, seed);
    // test_feature_drafter.cpp's lossless setting: three layers, 16 tokens, a random drafter of scale
    // 0.4, so acceptance is partial.
    const Config tc = [] {
        Config c = test::tiny_config(true, 16);
        c.num_hidden_layers = 3;
        return c;
    }();
    const Weights tw = bf16_matrices(tc, random_weights(tc, seed, 0.4f));
    const FeatureCheckpoint ck = drafter_of(k, tc, tw, seed + 50, 0.4f);
    CudaContext ctx;
    CudaModel target(tc, tw, ctx);
    TreeVerifier verifier;
    GreedyMatch greedy;

    SECTION("EAGLE-2's tree, full or half budget; the drafter's layer replays CUDA graphs for seed 3") {
        CudaFeatureDrafter drafter(ck, ctx, CudaModelOptions{.graphs = seed == 3 ? CudaGraphs::kOn : CudaGraphs::kOff});
        FeatureProposer<CudaModel, CudaFeatureDrafter> proposer(target, drafter);
        const std::vector<int> prompt = tokens_of(6, tc.vocab_size, static_cast<int>(seed));
        const GenerateOptions gen{.max_new_tokens = 40, .seed = seed};
        const Generation plain = autoregressive_generate(target, prompt, gen);
        Eagle2Tree tree = seed % 2 == 0 ? Eagle2Tree::half_budget() : Eagle2Tree{};
        const Generation spec = speculative_generate(target, proposer, tree, verifier, greedy, prompt, gen);
        check_greedy_equal(tc, tw, prompt, plain.tokens, spec.tokens);
        CHECK(spec.n_target_calls() < plain.n_target_calls());  // drafts were accepted: the check is not vacuous
        int rejected = 0;
        for (const StepRecord& s : spec.steps) rejected += s.n_accepted < s.depth;
        CHECK(rejected > 0);
    }
    SECTION("a prompt longer than the drafter's max_tree_nodes: the catch-up appends it in chunks") {
        CudaFeatureDrafter drafter(ck, ctx, CudaModelOptions{.max_tree_nodes = 16});
        FeatureProposer<CudaModel, CudaFeatureDrafter> proposer(target, drafter);
        const std::vector<int> prompt = tokens_of(45, tc.vocab_size, static_cast<int>(seed));
        const GenerateOptions gen{.max_new_tokens = 30, .seed = seed};
        const Generation plain = autoregressive_generate(target, prompt, gen);
        Eagle2Tree tree{.total_tokens = 12, .depth = 4, .top_k = 3};  // at most 1 + 3·3 = 10 nodes scored per step
        const Generation spec = speculative_generate(target, proposer, tree, verifier, greedy, prompt, gen);
        check_greedy_equal(tc, tw, prompt, plain.tokens, spec.tokens);
        CHECK(proposer.rows_fed() >= static_cast<int>(prompt.size()) - 1);  // 44 rows or more, through 16-row chunks
    }
}

// ---------------------------------------------------------------------------------------------------
// EDD's drafter on the GPU: a one-layer CudaModel fed the target's states (EddProposer<CudaModel, CudaModel>)

TEST_CASE("EddProposer with a CudaModel drafter proposes the CPU's logits, step after step", "[cuda][edd]") {
    const int which = GENERATE(0, 1);
    const Config tc = target_config(which, 4), dc = edd_drafter_config(tc);
    const int V = tc.vocab_size, layer = edd_hidden_layer(tc);
    const Weights tw = bf16_matrices(tc, random_weights(tc, 131 + which, model_scale(tc)));
    const Weights dw = bf16_matrices(dc, train::edd_initial_weights(dc, tw, 141 + which, model_scale(dc)));
    CAPTURE(which);
    CpuModel cpu_target(tc, tw, kBf16Products), cpu_drafter(dc, dw, kBf16Products);
    CudaContext ctx;
    CudaModel gpu_target(tc, tw, ctx), gpu_drafter(dc, dw, ctx);
    EddProposer cpu(cpu_target, cpu_drafter, layer);
    EddProposer gpu(gpu_target, gpu_drafter, layer);

    std::vector<int> text = tokens_of(13, V, which + 2);  // the last one is the pending root
    const auto propose = [&](const Tree& tree, const std::vector<int>& nodes) {
        CHECK(normalized_error(copy_rows(gpu.propose(tree, nodes)), copy_rows(cpu.propose(tree, nodes))) < kModel);
    };
    // The first propose of a step carries the catch-up chain of the target's new states (the whole
    // prompt's at step 0), the tree hanging from its end.
    two_steps(text, V, cpu_target, gpu_target, cpu, gpu, propose);
    CHECK(gpu.states_fed() == cpu.states_fed());
    CHECK(gpu_drafter.cache_len() == cpu_drafter.cache_len());
    CHECK(gpu.n_calls() == cpu.n_calls());
}

TEST_CASE("greedy EDD + PCT with a CudaModel drafter equals greedy decoding of the CudaModel target",
          "[cuda][edd][generate]") {
    const std::uint64_t seed = GENERATE(1u, 2u, 3u);
    CAPTURE(seed);
    const Config tc = [] {
        Config c = test::tiny_config(true, 16);
        c.num_hidden_layers = 4;
        return c;
    }();
    const Config dc = edd_drafter_config(tc);
    const Weights tw = bf16_matrices(tc, random_weights(tc, seed, 0.4f));
    CudaContext ctx;
    CudaModel target(tc, tw, ctx), drafter(dc, train::edd_initial_weights(dc, tw, seed + 50, 0.4f), ctx);
    EddProposer proposer(target, drafter, edd_hidden_layer(tc));
    const std::vector<int> prompt = tokens_of(6, tc.vocab_size, static_cast<int>(seed));
    const GenerateOptions gen{.max_new_tokens = 40, .seed = seed};
    const Generation plain = autoregressive_generate(target, prompt, gen);
    PrunedCandidateTree pct{.expand_threshold = 0.05f};
    TreeVerifier verifier;
    GreedyMatch greedy;
    const Generation spec = speculative_generate(target, proposer, pct, verifier, greedy, prompt, gen);
    check_greedy_equal(tc, tw, prompt, plain.tokens, spec.tokens);
    int rejected = 0;
    for (const StepRecord& s : spec.steps) rejected += s.n_accepted < s.depth;
    CHECK(rejected > 0);
    CHECK(proposer.states_fed() > static_cast<int>(prompt.size()));
}

// ---------------------------------------------------------------------------------------------------
// Bad input

TEST_CASE("CudaFeatureDrafter and CudaModel refuse too many nodes and wrong feature sizes, naming the numbers",
          "[cuda][eagle][errors]") {
    const Config tc = target_config(0);  // hidden 32, vocab 64
    const int D = tc.hidden_size;
    const Weights tw = random_weights(tc, 121, 0.3f);
    CudaContext ctx;
    CudaFeatureDrafter drafter(initial_feature_drafter(tc, tw, Connector::kFc, false, 122, 0.3f), ctx,
                               CudaModelOptions{.max_tree_nodes = 8});
    const Tree nine = random_tree(9, tc.vocab_size, 1), three = random_tree(3, tc.vocab_size, 2);
    const std::vector<float> f9(9u * D, 0.1f), f2(2u * D, 0.1f), f3(3u * D, 0.1f);

    CHECK_THROWS_WITH(drafter.score(nine, 0, f9), Catch::Contains("[specdec.cuda.eagle]") &&
                                                      Catch::Contains("score: 9 nodes") &&
                                                      Catch::Contains("max_tree_nodes = 8"));
    CHECK_THROWS_WITH(drafter.score(three, 0, f2),
                      Catch::Contains("[specdec.cuda.eagle]") && Catch::Contains("64 feature values for 3 rows of 32"));
    CHECK_THROWS_WITH(drafter.append(std::vector<int>{1, 2, 3}, f2),
                      Catch::Contains("[specdec.cuda.eagle]") && Catch::Contains("append: 64 feature values for 3 rows of 32"));
    CHECK_NOTHROW(drafter.score(three, 0, f3));  // the refusals left the drafter usable
    CHECK(drafter.features().rows() == 3);

    CudaModel model(tc, tw, ctx, CudaModelOptions{.max_tree_nodes = 8});
    CHECK_THROWS_WITH(model.forward_embeddings(three, 0, Rows{f2, D}),
                      Catch::Contains("[specdec.cuda.model]") &&
                          Catch::Contains("inputs are (2, 32), expected (N - first, hidden_size) = (3, 32)"));
    // A tree past max_tree_nodes is refused before its inputs are staged (the staging buffer holds 8 rows).
    CHECK_THROWS_WITH(model.forward_embeddings(nine, 0, Rows{f9, D}),
                      Catch::Contains("[specdec.cuda.model]") && Catch::Contains("tree of 9 nodes does not fit") &&
                          Catch::Contains("max_tree_nodes is 8"));

    Config wide = tc;
    wide.hidden_size = 64;
    CudaModel other(wide, random_weights(wide, 123, 0.3f), ctx);
    CHECK_THROWS_WITH((FeatureProposer<CudaModel, CudaFeatureDrafter>(other, drafter)),
                      Catch::Contains("[specdec.eagle]") && Catch::Contains("feature size (hidden_size) 32 differs from the target's 64"));
}
