// A drafter that reads the target's hidden states (EDD's soft prompt, EAGLE's features) sees those of
// the whole committed text through the loop: the prompt's every prefill chunk at start(), every
// accepted token at observe().
#include <algorithm>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_committed_hidden {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

/// A ModelProposer that, at start() and at every observe(), checks what the target's committed
/// hidden states cover: the text so far minus the pending root.
struct HiddenReader {
    ModelProposer<CpuModel> inner;
    const CpuModel* target;
    std::vector<int> text;   // what the drafter knows is committed, root last
    int n_checked = 0;
    bool all_covered = true;

    int vocab_size() const { return inner.vocab_size(); }
    void start(std::span<const int> prompt) {
        inner.start(prompt);
        text.assign(prompt.begin(), prompt.end());
        check();
    }
    Rows propose(const Tree& tree, std::span<const int> nodes) { return inner.propose(tree, nodes); }
    void observe(const StepOutcome& outcome) {
        inner.observe(outcome);
        for (std::size_t j = 1; j < outcome.path.size(); ++j) text.push_back(outcome.tree[outcome.path[j]].token);
        text.push_back(outcome.next_root);
        check();
    }
    void check() {
        ++n_checked;
        all_covered = all_covered && target->committed_hidden(0).rows() == static_cast<int>(text.size()) - 1 &&
                      target->cache_len() == static_cast<int>(text.size()) - 1;
    }
};

}  // namespace

TEST_CASE("a drafter reads the target's hidden states of the whole committed text, prefill chunks included",
          "[generate][hidden]") {
    const Config cfg = test::tiny_config();
    const Weights wt = random_weights(cfg, 8, 0.4f);
    CpuModel target(cfg, wt), draft(cfg, perturbed(cfg, wt, 0.15f, 108)), fresh(cfg, wt);
    const int L = cfg.num_hidden_layers;
    target.capture_hidden({L - 1, L});  // before the loop prefills: a drafter asks in its constructor
    fresh.capture_hidden({L - 1, L});
    std::vector<int> prompt(70);  // three prefill chunks: 32, 32, 5, and the root
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>((11 * i + 2) % cfg.vocab_size);

    HiddenReader reader{ModelProposer(draft), &target, {}};
    KAryTree builder{.k_config = {2, 2}};
    TreeVerifier verifier;
    GreedyMatch acceptor;
    const Generation g = speculative_generate(target, reader, builder, verifier, acceptor, prompt,
                                              GenerateOptions{.max_new_tokens = 30});
    CHECK(reader.n_checked == g.n_target_calls() + 1);
    CHECK(reader.all_covered);

    // What the drafter can read at the end equals the states of the committed text in one forward.
    REQUIRE(reader.text.size() == prompt.size() + g.tokens.size());
    const std::span<const int> committed = std::span(reader.text).first(reader.text.size() - 1);
    fresh.forward(Tree::chain(committed), 0);
    for (int c = 0; c < 2; ++c) {
        const Rows kept = target.committed_hidden(c), want = fresh.hidden(c);
        REQUIRE(kept.rows() == static_cast<int>(committed.size()));
        float worst = 0.0f;
        for (std::size_t i = 0; i < kept.data.size(); ++i) worst = std::max(worst, std::abs(kept.data[i] - want.data[i]));
        CHECK(worst < 1e-5f);
    }
}

}  // namespace test_committed_hidden
