// Vocabulary compatibility between a target and its drafter: identical passes, a drafter whose
// vocabulary is a prefix of the target's passes (and decodes losslessly through PaddedVocabProposer),
// anything else is refused naming the first differing ids and their pieces.
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_vocab_compat {  // a unity build compiles several test files as one

using namespace specdec;

namespace {

const std::string kCorpus =
    "the cat sat on the mat. the dog sat on the log. a cat and a dog sat together on the mat and the log, "
    "then the cat ran and the dog ran after the cat.";

/// A drafter of `vocab` ids whose rows are the target's first ones, perturbed: it agrees with the
/// target often, never proposes the target's tail ids, and cannot embed them.
struct PrefixDrafter {
    Config cfg;
    CpuModel model;
    PrefixDrafter(const Config& target, const Weights& w, int vocab)
        : cfg(with_vocab(target, vocab)), model(cfg, truncated(perturbed(target, w, 0.5f, 9), vocab)) {}
    static Config with_vocab(Config c, int vocab) {
        c.vocab_size = vocab;
        return c;
    }
    Weights truncated(Weights w, int vocab) const {
        const std::size_t keep = static_cast<std::size_t>(vocab) * cfg.hidden_size;
        w.embed.resize(keep);
        if (!w.lm_head.empty()) w.lm_head.resize(keep);
        return w;
    }
};

}  // namespace

TEST_CASE("tokenizers with the same pieces are identical, and a drafter's shorter prefix is allowed", "[vocab]") {
    // kCorpus allows 290 tokens: 257 base ids and 33 merges.
    const Tokenizer target = Tokenizer::train(kCorpus, 280), same = Tokenizer::train(kCorpus, 280);
    const Tokenizer shorter = Tokenizer::train(kCorpus, 270);
    REQUIRE(target.vocab_size() == 280);
    REQUIRE(shorter.vocab_size() == 270);
    const VocabCompatibility a = check_vocab_compatible(target, same);
    CHECK(a.relation == VocabRelation::kIdentical);
    CHECK(a.draft_size == 280);
    const VocabCompatibility b = check_vocab_compatible(target, shorter);
    CHECK(b.relation == VocabRelation::kDraftPrefix);
    CHECK(b.target_size == 280);
    CHECK(b.draft_size == 270);
    // Model sizes (embedding rows, padded past the tokenizer): the same rule.
    CHECK(check_vocab_compatible(32064, 32000).relation == VocabRelation::kDraftPrefix);
    CHECK(check_vocab_compatible(32000, 32000).relation == VocabRelation::kIdentical);
}

TEST_CASE("a drafter whose pieces differ, or that has ids the target lacks, is refused listing them", "[vocab][errors]") {
    const Tokenizer target = Tokenizer::train(kCorpus, 280);
    SECTION("another corpus: the merges (hence the pieces) differ from some id on") {
        const Tokenizer other = Tokenizer::train("zebras quizzically juxtapose vexing wombats; " + kCorpus, 280);
        CHECK_THROWS_WITH(check_vocab_compatible(target, other),
                          Catch::StartsWith("[specdec.vocab] the drafter's tokenizer differs from the target's at ") &&
                              Catch::Contains("ids they share (id ") && Catch::Contains(": target '") &&
                              Catch::Contains(", drafter '") && Catch::Contains("must share the target's tokenizer"));
    }
    SECTION("a larger drafter: its extra ids are listed") {
        const Tokenizer larger = Tokenizer::train(kCorpus, 285), smaller = Tokenizer::train(kCorpus, 280);
        REQUIRE(larger.vocab_size() == 285);
        CHECK_THROWS_WITH(check_vocab_compatible(smaller, larger),
                          Catch::Contains("the drafter's tokenizer has 285 tokens, the target's 280") &&
                              Catch::Contains("ids the target does not have (280 '"));
        CHECK_THROWS_WITH(check_vocab_compatible(32000, 32064),
                          Catch::Contains("the drafter's vocabulary of 32064 exceeds the target's 32000"));
    }
    SECTION("a piece with bytes that do not print is shown escaped") {
        const Tokenizer special = Tokenizer::train(kCorpus, 280, {"<|x\n|>"});
        CHECK_THROWS_WITH(check_vocab_compatible(target, special), Catch::Contains("drafter '<|x\\x0A|>'"));
    }
}

TEST_CASE("a prefix drafter padded to the target's vocabulary decodes greedy text token for token",
          "[vocab][lossless]") {
    // Target V = 64; the drafter knows the first 48 ids. Its padded rows are -inf on 48..63: it never
    // proposes them, and when the target emits one the drafter reads the substitute instead.
    const Config cfg = test::tiny_config();
    const Weights w = random_weights(cfg, 31, 0.3f);
    CpuModel target(cfg, w);
    PrefixDrafter small(cfg, w, 48);
    ModelProposer inner(small.model);
    PaddedVocabProposer proposer(inner, cfg.vocab_size);
    CHECK(proposer.vocab_size() == 64);
    const std::vector<int> prompt{3, 50, 7, 60};  // tail ids in the prompt too
    const GenerateOptions greedy{.max_new_tokens = 40, .seed = 1};
    const Generation plain = autoregressive_generate(target, prompt, greedy);
    Chain builder{.gamma = 4};
    TreeVerifier verifier;
    GreedyMatch match;
    const Generation g = speculative_generate(target, proposer, builder, verifier, match, prompt, greedy);
    CHECK(g.tokens == plain.tokens);
    int tail = 0;
    for (int t : plain.tokens) tail += t >= 48;
    CHECK(tail > 0);  // the target's tail ids were emitted (and fed to the drafter as the substitute)
    CHECK(g.tau() > 1.0);  // the drafter's proposals were accepted, not only the bonus tokens
    SECTION("without the adapter the loop refuses the pair, naming both sizes") {
        CHECK_THROWS_WITH(speculative_generate(target, inner, builder, verifier, match, prompt, greedy),
                          Catch::Contains("48") && Catch::Contains("64"));
    }
}

TEST_CASE("a prefix drafter padded to the target's vocabulary keeps the target's sampled law",
          "[vocab][lossless][sampling][slow]") {
    // Target V = 6, drafter V = 4: the target's mass on ids 4 and 5 must come out of the residual.
    const Config cfg = test::tiny_config(true, 6);
    const Weights w = random_weights(cfg, 2024, 0.3f);
    CpuModel target(cfg, w);
    PrefixDrafter small(cfg, w, 4);
    ModelProposer inner(small.model);
    PaddedVocabProposer proposer(inner, 6);
    const Sampling s{.temperature = 1.0f};
    const std::vector<int> prompt{1, 4, 2};
    constexpr int kRuns = 2000;
    const auto expected = test::exact_two_tokens(target, prompt, s);
    double tail_mass = 0.0;
    for (const auto& [pair, p] : expected) tail_mass += (pair.first >= 4 || pair.second >= 4) ? p : 0.0;
    CHECK(tail_mass > 0.05);  // the check has something to find
    const auto observed = test::sampled_two_tokens(target, proposer, Chain{.gamma = 3}, SpeculativeSampling{}, prompt, s, kRuns);
    const test::ChiSquare r = test::chi_square(observed, expected, kRuns);
    REQUIRE(r.dof >= 8);
    CAPTURE(r.statistic, r.dof);
    CHECK(r.statistic < test::chi_square_critical(r.dof));
}

}  // namespace test_vocab_compat
