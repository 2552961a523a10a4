// TextBridgeProposer (policies/text_bridge.hpp): a drafter with a tokenizer of its own drafts through the
// text. Lossless whatever it drafts (greedy identity, and the law of two tokens at T = 1 beside a planted
// lossy control); and it drafts well where the text maps: a twin of the target behind another numbering
// of the same tokenizer has nearly every draft accepted, and a drafter reading a coarser segmentation of
// the text still has drafts accepted.
#include <algorithm>
#include <filesystem>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"
#include "source_dir.hpp"

namespace test_text_bridge {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

const fs::path kRepo = SPECDEC_SOURCE_DIR;

/// A toy tokenizer over the letters a..f: target id i is letter i; the drafter's ids number the letters
/// in another order and add two-letter tokens, so the two sides never share an id's meaning.
TextCodec letters(const std::vector<std::string>& pieces) {
    return {.decode =
                [pieces](std::span<const int> ids) {
                    std::string s;
                    for (const int id : ids) s += pieces[static_cast<std::size_t>(id)];
                    return s;
                },
            .encode =
                [pieces](std::string_view text) {  // longest piece first
                    std::vector<int> ids;
                    for (std::size_t at = 0; at < text.size();) {
                        int best = -1;
                        for (std::size_t i = 0; i < pieces.size(); ++i)
                            if (text.substr(at, pieces[i].size()) == pieces[i] &&
                                (best < 0 || pieces[i].size() > pieces[static_cast<std::size_t>(best)].size()))
                                best = static_cast<int>(i);
                        if (best < 0) throw std::runtime_error("letters: no piece for the text");
                        ids.push_back(best);
                        at += pieces[static_cast<std::size_t>(best)].size();
                    }
                    return ids;
                },
            .special = [](int) { return false; }};
}
const std::vector<std::string> kTargetPieces{"a", "b", "c", "d", "e", "f"};
const std::vector<std::string> kDrafterPieces{"f", "e", "d", "c", "b", "a", "ab", "cd"};

/// models/tokenizer.json with its ids renumbered by `perm` (id i becomes perm[i]): the same pieces and
/// merges, so the same segmentation under other ids.
Tokenizer renumbered(const std::vector<int>& perm) {
    json::Value root = json::parse(detail::read_text_file(kRepo / "models/tokenizer.json", "test"), "tokenizer.json");
    json::Object& model = root.as_object().find("model")->as_object();
    for (json::Member& m : model.find("vocab")->as_object()) m.value = json::Value(perm[static_cast<std::size_t>(m.value.as_int())]);
    for (json::Value& a : root.as_object().find("added_tokens")->as_array()) {
        json::Object& o = a.as_object();
        o.set("id", perm[static_cast<std::size_t>(o.find("id")->as_int())]);
    }
    return Tokenizer::from_json(json::dump(root), "renumbered tokenizer.json");
}

/// models/tokenizer.json with only its first `n` merges: the same ids, a coarser segmentation.
Tokenizer fewer_merges(std::size_t n) {
    json::Value root = json::parse(detail::read_text_file(kRepo / "models/tokenizer.json", "test"), "tokenizer.json");
    json::Array& merges = root.as_object().find("model")->as_object().find("merges")->as_array();
    merges.resize(std::min(n, merges.size()));
    return Tokenizer::from_json(json::dump(root), "coarser tokenizer.json");
}

/// A drafter that knows one text: after any prefix of `script` (its ids) it predicts the script's next id,
/// elsewhere id 0. A LanguageModel of the bare minimum, so a test can say what each draft must be.
struct ScriptedDrafter {
    std::vector<int> script;
    int vocab = 0;
    std::vector<int> committed{}, pending{};
    std::vector<float> logits{};

    int vocab_size() const { return vocab; }
    int cache_len() const { return static_cast<int>(committed.size()); }
    int context_size() const { return 1 << 20; }
    Rows forward(const Tree& tree, int first) {
        pending.clear();
        logits.assign(static_cast<std::size_t>(tree.size() - first) * vocab, 0.0f);
        for (int i = first; i < tree.size(); ++i) {
            std::vector<int> text = committed;
            for (const int node : tree.path_to(i)) text.push_back(tree[node].token);
            const bool on_script = text.size() < script.size() && std::equal(text.begin(), text.end(), script.begin());
            logits[static_cast<std::size_t>(i - first) * vocab + (on_script ? script[text.size()] : 0)] = 1.0f;
            pending.push_back(tree[i].token);
        }
        return Rows{logits, vocab};
    }
    void commit(std::span<const int> path) {
        for (const int node : path) committed.push_back(pending[static_cast<std::size_t>(node)]);
    }
    void truncate(int n) { committed.resize(static_cast<std::size_t>(n)); }
    void reset() { committed.clear(); }
};

std::vector<std::vector<int>> held_out_prompts(const Tokenizer& tok, int n) {
    const std::vector<std::string> texts{"It was the best of times, it was the worst of times,",
                                         "The old man looked at the sea and said that",
                                         "She opened the door of the house, and"};
    std::vector<std::vector<int>> out;
    for (int i = 0; i < n; ++i) out.push_back(tok.encode(texts[static_cast<std::size_t>(i) % texts.size()]));
    return out;
}

}  // namespace

TEST_CASE("drafting through the text keeps the target's greedy text and its law at T = 1", "[text_bridge][lossless][sampling]") {
    constexpr int V = 6;
    const Config tc = test::tiny_config(true, V);
    CpuModel target(tc, random_weights(tc, 7, 0.3f));  // spread-out laws
    const Config dc = test::tiny_config(true, static_cast<int>(kDrafterPieces.size()));
    CpuModel drafter(dc, random_weights(dc, 8, 0.5f));
    const auto make = [&] {
        return check::Composition{TextBridgeProposer(drafter, letters(kTargetPieces), letters(kDrafterPieces), V, 3),
                                  Chain{.gamma = 3}, SpeculativeSampling{}};
    };
    const std::vector<std::vector<int>> prompts{{0, 3, 1}, {5, 2, 2, 4}};
    const check::Report t1 = check::check_lossless(target, make, prompts, Sampling{.temperature = 1.0f}, 3000);
    INFO(t1.to_string());
    CHECK(t1.lossless());
    CHECK(t1.powered());  // drafts were made, and keeping them all is caught: the check had power
    const check::Report greedy = check::check_lossless(target, make, prompts, Sampling{}, 8);
    INFO(greedy.to_string());
    CHECK(greedy.lossless());
}

TEST_CASE("a drafter that knows the text drafts the target's own tokens of it, SentencePiece-style", "[text_bridge]") {
    // Mistral's tokenizer prepends a space to whatever it encodes, so the new text cannot be encoded
    // alone: the bridge must align it on the text before it.
    const Tokenizer tok = Tokenizer::load(kRepo / "tests/data/tokenizers/mistral.tokenizer.json");
    const std::string text = "It was the best of times, it was the worst of times, it was the age of wisdom, "
                             "it was the age of foolishness";
    const std::vector<int> ids = tok.encode(text);
    ScriptedDrafter drafter{.script = tok.encode_with_special(text), .vocab = tok.vocab_size()};
    REQUIRE(drafter.script.size() == ids.size() + 1);  // <s> first
    TextBridgeProposer bridge(drafter, text_codec(tok), text_codec(tok, true), tok.vocab_size(), 6);
    const Sampling greedy;
    int exact = 0, cuts = 0;
    for (std::size_t k = 2; k + 4 <= ids.size(); ++k) {
        const std::vector<int> prefix(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k));
        if (tok.encode(tok.decode(prefix)) != prefix) continue;  // a cut inside a word: its text re-encodes otherwise
        ++cuts;
        StepContext ctx{greedy, StepRng{}, prefix, 2};
        bridge.start(prefix);
        std::vector<int> got;
        for (const DraftToken& d : bridge.draft({}, 4, ctx)) got.push_back(d.token);
        const std::vector<int> want(ids.begin() + static_cast<std::ptrdiff_t>(k), ids.begin() + static_cast<std::ptrdiff_t>(k) + 4);
        INFO("after \"" << tok.decode(prefix) << "\"");
        CHECK(got == want);
        exact += got == want;
    }
    CHECK(cuts > 20);
    CHECK(exact == cuts);
}

TEST_CASE("a twin of the target behind another numbering of its tokenizer has nearly every draft accepted", "[text_bridge]") {
    Checkpoint t = load_checkpoint(kRepo / "models/small");  // the small model as the target: fast
    const Tokenizer tok = Tokenizer::load(kRepo / "models/tokenizer.json");
    const int V = t.config.vocab_size, D = t.config.hidden_size;
    std::vector<int> perm(static_cast<std::size_t>(V));
    std::iota(perm.begin(), perm.end(), 0);
    std::reverse(perm.begin(), perm.end());
    const Tokenizer twin_tok = renumbered(perm);
    Weights twin_w = t.weights;  // row i of the embedding (tied: also the head) moves to perm[i]
    REQUIRE(t.config.tie_word_embeddings);
    for (int i = 0; i < V; ++i)
        std::copy_n(&t.weights.embed[static_cast<std::size_t>(i) * D], D, &twin_w.embed[static_cast<std::size_t>(perm[i]) * D]);
    CpuModel target(t.config, t.weights), twin(t.config, twin_w);
    REQUIRE(twin_tok.encode("the sea") != tok.encode("the sea"));  // the ids differ

    const GenerateOptions opts{.max_new_tokens = 32};
    for (const std::vector<int>& prompt : held_out_prompts(tok, 3)) {
        TextBridgeProposer bridge(twin, text_codec(tok), text_codec(twin_tok, true), V, 4);
        const Generation plain = autoregressive_generate(target, prompt, opts);
        const Generation g = speculative_generate(target, bridge, Chain{.gamma = 4}, TreeVerifier{}, GreedyMatch{}, prompt, opts);
        CHECK(g.tokens == plain.tokens);
        // The twin's greedy text is the target's, so its drafts miss only where the target's own tokens
        // are not what its tokenizer would make of their text (then the alignment finds nothing to add).
        CAPTURE(tok.decode(g.tokens), g.tau());
        CHECK(g.tau() > 4.0);  // of at most 5 = gamma + 1 (4.57 on each prompt when written)
    }
}

TEST_CASE("a drafter reading a coarser segmentation of the text still drafts tokens the target accepts", "[text_bridge]") {
    Checkpoint t = load_checkpoint(kRepo / "models/small");
    const Tokenizer tok = Tokenizer::load(kRepo / "models/tokenizer.json");
    const Tokenizer coarse = fewer_merges(300);  // of 3839: words split into more, smaller pieces
    REQUIRE(coarse.encode("It was the best of times").size() > tok.encode("It was the best of times").size());
    CpuModel target(t.config, t.weights), drafter(t.config, t.weights);  // the same model, fed the coarse ids
    const GenerateOptions opts{.max_new_tokens = 32};
    double tau = 0;
    const std::vector<std::vector<int>> prompts = held_out_prompts(tok, 3);
    for (const std::vector<int>& prompt : prompts) {
        TextBridgeProposer bridge(drafter, text_codec(tok), text_codec(coarse, true), t.config.vocab_size, 4);
        const Generation plain = autoregressive_generate(target, prompt, opts);
        const Generation g = speculative_generate(target, bridge, Chain{.gamma = 4}, TreeVerifier{}, GreedyMatch{}, prompt, opts);
        CHECK(g.tokens == plain.tokens);
        CHECK(bridge.n_calls() > 0);
        tau += g.tau() / static_cast<double>(prompts.size());
    }
    CAPTURE(tau);
    CHECK(tau > 1.8);  // drafts made through the re-segmented text were accepted (2.50 when written)
}

TEST_CASE("a TextBridgeProposer that cannot work is refused by name", "[text_bridge][errors]") {
    const Config dc = test::tiny_config(true, 8);
    CpuModel drafter(dc, random_weights(dc, 1));
    TextCodec broken = letters(kTargetPieces);
    broken.special = nullptr;
    CHECK_THROWS_WITH(TextBridgeProposer(drafter, broken, letters(kDrafterPieces), 6),
                      Catch::Contains("TextBridgeProposer: a TextCodec with an empty function"));
    CHECK_THROWS_WITH(TextBridgeProposer(drafter, letters(kTargetPieces), letters(kDrafterPieces), 0),
                      Catch::Contains("target_vocab 0"));
    CHECK_THROWS_WITH(TextBridgeProposer(drafter, letters(kTargetPieces), letters(kDrafterPieces), 6, 0),
                      Catch::Contains("max_draft 0"));
    static_assert(DraftsTokens<TextBridgeProposer<CpuModel>>);
}

}  // namespace test_text_bridge
