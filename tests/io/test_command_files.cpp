// The specdec command's file handling (examples/cli): converting the shipped target HF -> llama2.c -> HF
// and HF -> GGUF -> HF keeps its logits bit for bit, formats are told apart by path, a broken GGUF is
// refused by name; a GGUF's tokenizer becomes the folder's file; and the text stream prints whole
// UTF-8 characters only, however tokens split them.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "catch.hpp"
#include "source_dir.hpp"
#include "examples/cli/generate.hpp"
#include "examples/cli/model_files.hpp"
#include "examples/cli/text_stream.hpp"
#include "helpers.hpp"

namespace test_command_files {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

/// The logits of every position of `text`, as one chain.
std::vector<float> chain_logits(const Checkpoint& ck, const std::vector<int>& text) {
    CpuModel m(ck.config, Weights(ck.weights));
    const Rows r = m.forward(Tree::chain(text));
    std::vector<float> out;
    for (int i = 0; i < r.rows(); ++i) out.insert(out.end(), r.row(i).begin(), r.row(i).end());
    return out;
}

}  // namespace

TEST_CASE("convert takes the shipped target HF -> llama2.c -> HF with identical logits", "[io][command]") {
    const fs::path target = fs::path(SPECDEC_SOURCE_DIR) / "models/target";
    if (!fs::exists(target / "model.safetensors")) {
        WARN("models/target is absent: skipped");
        return;
    }
    const fs::path dir = fs::temp_directory_path() / "specdec_test_command_convert";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const cli::LoadedModel hf = cli::load_model(target);
    REQUIRE(hf.format == cli::ModelFormat::kHfFolder);
    REQUIRE(hf.vocab.present());

    cli::save_model(hf, dir / "target.bin", cli::format_of(dir / "target.bin", true), "f32");
    const cli::LoadedModel bin = cli::load_model(dir / "target.bin", target / "tokenizer.json");
    CHECK(bin.format == cli::ModelFormat::kLlama2c);
    cli::save_model(bin, dir / "back", cli::format_of(dir / "back", true), "f32");
    const cli::LoadedModel back = cli::load_model(dir / "back");
    CHECK(back.tokenizer_path == dir / "back" / "tokenizer.json");  // the tokenizer travels with the model

    const std::vector<int> text = hf.vocab.encode_prompt("It was the best of times, it was the worst of times");
    REQUIRE(text.size() > 5);
    const std::vector<float> want = chain_logits(hf.checkpoint, text);
    CHECK(chain_logits(bin.checkpoint, text) == want);   // bit for bit: bf16 -> f32 -> f32, rows permuted and back
    CHECK(chain_logits(back.checkpoint, text) == want);
    CHECK(test::same_bits(back.checkpoint.weights, hf.checkpoint.weights, hf.checkpoint.config));

    // HF -> GGUF (f32: the bf16 weights widen exactly) -> HF, the tokenizer inside the file.
    cli::save_model(hf, dir / "target.gguf", cli::format_of(dir / "target.gguf", true), "f32");
    const cli::LoadedModel gguf = cli::load_model(dir / "target.gguf");
    CHECK(gguf.format == cli::ModelFormat::kGguf);
    REQUIRE(gguf.vocab.present());
    CHECK(gguf.vocab.encode_prompt("It was the best of times, it was the worst of times") == text);
    CHECK(chain_logits(gguf.checkpoint, text) == want);
    CHECK_THROWS_WITH(cli::save_model(hf, dir / "x.gguf", cli::ModelFormat::kGguf, "q4_k"),
                      Catch::Contains("[specdec.cli]") && Catch::Contains("q4_k"));
    fs::remove_all(dir);
}

TEST_CASE("convert GGUF -> HF folder writes the GGUF's tokenizer, so the folder encodes as the GGUF did",
          "[io][command][gguf]") {
    const fs::path dir = fs::temp_directory_path() / "specdec_test_command_gguf_tokenizer";
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string text = "It was the best of times";
    SECTION("a byte-level (\"gpt2\") tokenizer becomes tokenizer.json") {
        const fs::path target = fs::path(SPECDEC_SOURCE_DIR) / "models/small";
        if (!fs::exists(target / "model.safetensors")) {
            WARN("models/small is absent: skipped");
            return;
        }
        cli::save_model(cli::load_model(target), dir / "small.gguf", cli::ModelFormat::kGguf, "f32");
        const cli::LoadedModel gguf = cli::load_model(dir / "small.gguf");
        REQUIRE(gguf.vocab.in_gguf());
        REQUIRE(gguf.tokenizer_path.empty());
        const std::string wrote = cli::save_model(gguf, dir / "folder", cli::ModelFormat::kHfFolder, "f32");
        CHECK(wrote.find("tokenizer.json") != std::string::npos);
        const cli::LoadedModel folder = cli::load_model(dir / "folder");
        CHECK(folder.tokenizer_path == dir / "folder" / "tokenizer.json");
        REQUIRE(folder.vocab.present());
        CHECK_FALSE(folder.vocab.in_gguf());
        CHECK(folder.vocab.size() == gguf.vocab.size());
        CHECK(folder.vocab.encode_prompt(text) == gguf.vocab.encode_prompt(text));
        CHECK(folder.vocab.eos() == gguf.vocab.eos());
    }
    SECTION("a SentencePiece (\"llama\") tokenizer, scores and no merges, becomes llama2.c's tokenizer.bin") {
        std::vector<std::string> pieces = {"<unk>", "<s>", "</s>"};
        for (int b = 0; b < 256; ++b) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "<0x%02X>", b);
            pieces.push_back(buf);
        }
        for (const char* p : {" ", " It", " was", " the", " best", " of", " times", "t", "e", "s"}) pieces.push_back(p);
        std::vector<float> scores(pieces.size());
        for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = -static_cast<float>(i);
        const GgufTokenizer spm(Llama2cTokenizer::from_vocab(pieces, scores));
        Config c = test::tiny_config(true, static_cast<int>(pieces.size()));
        save_gguf(dir / "spm.gguf", c, random_weights(c, 5, 0.3f), &spm, GgufSaveType::kF32);
        const cli::LoadedModel gguf = cli::load_model(dir / "spm.gguf");
        REQUIRE(gguf.vocab.in_gguf());
        const std::string wrote = cli::save_model(gguf, dir / "folder", cli::ModelFormat::kHfFolder, "f32");
        CHECK(wrote.find("tokenizer.bin") != std::string::npos);
        CHECK_FALSE(fs::exists(dir / "folder" / "tokenizer.json"));
        const cli::LoadedModel folder = cli::load_model(dir / "folder");
        CHECK(folder.tokenizer_path == dir / "folder" / "tokenizer.bin");
        REQUIRE(folder.vocab.present());
        CHECK(folder.vocab.encode_prompt(text) == gguf.vocab.encode_prompt(text));
        CHECK(folder.vocab.encode_prompt(text).front() == Llama2cTokenizer::kBos);  // run.c's encode(text, 1, 0)
    }
    fs::remove_all(dir);
}

TEST_CASE("the command accepts a drafter whose vocabulary is a prefix of the target's and decodes its greedy text",
          "[io][command][vocab]") {
    // The shipped drafter cut to its first 4000 ids (embedding rows and tokenizer pieces) against the
    // shipped target's 4096: check_vocabularies says prefix, and run_method pads the drafter's rows
    // (PaddedVocabProposer), so sd and tree print exactly the target's greedy text.
    const fs::path root(SPECDEC_SOURCE_DIR);
    if (!fs::exists(root / "models/target/model.safetensors") || !fs::exists(root / "models/small/model.safetensors")) {
        WARN("models/target or models/small is absent: skipped");
        return;
    }
    const cli::LoadedModel target = cli::load_model(root / "models/target");
    cli::LoadedModel small = cli::load_model(root / "models/small");
    constexpr int kDraftVocab = 4000;
    REQUIRE(target.checkpoint.config.vocab_size == 4096);
    Config dc = small.checkpoint.config;
    dc.vocab_size = kDraftVocab;
    Weights dw = std::move(small.checkpoint.weights);
    REQUIRE(dw.lm_head.empty());  // tied: the embedding is the head
    dw.embed.resize(static_cast<std::size_t>(kDraftVocab) * dc.hidden_size);
    std::vector<std::string> pieces;
    for (int id = 0; id < kDraftVocab; ++id) pieces.push_back(target.vocab.spelling(id));
    const cli::Vocab prefix(Llama2cTokenizer::from_vocab(pieces, std::vector<float>(pieces.size(), 0.0f)));

    const VocabCompatibility vc = cli::generating::check_vocabularies(target, kDraftVocab, "prefix_drafter", prefix, "pieces");
    CHECK(vc.relation == VocabRelation::kDraftPrefix);
    CHECK(vc.draft_size == kDraftVocab);

    bench::Models models;
    models.target = std::make_unique<CpuModel>(target.checkpoint.config, Weights(target.checkpoint.weights));
    models.drafters["draft"] = std::make_unique<CpuModel>(dc, std::move(dw));
    const std::vector<int> prompt = target.vocab.encode_prompt("It was the best of times, it was the worst of times,");
    const GenerateOptions greedy{.max_new_tokens = 40};
    const Generation plain = autoregressive_generate(*models.target, prompt, greedy);
    bench::MethodSpec sd, tree, cs;
    sd.name = "sd", sd.kind = bench::MethodKind::kChain, sd.drafter = "draft", sd.gamma = 4;
    tree.name = "tree", tree.kind = bench::MethodKind::kTree, tree.drafter = "draft", tree.k_config = {2, 2, 1};
    for (const bench::MethodSpec& m : {sd, tree}) {
        CAPTURE(m.name);
        const bench::Run run = bench::run_method(m, models, prompt, greedy);
        CHECK(run.g.tokens == plain.tokens);
        CHECK(run.g.tau() > 1.0);  // the padded drafter's proposals were accepted
    }
    cs.name = "cs", cs.kind = bench::MethodKind::kCascade, cs.drafters = {"draft", bench::kMaxGramName};
    cs.k_matrix = {{2, 3}, {0, 10}};
    CHECK_THROWS_WITH(bench::run_method(cs, models, prompt, greedy),
                      Catch::Contains("[specdec.bench]") && Catch::Contains("vocab_size 4000, the target 4096"));

    {  // a drafter whose pieces differ is refused with the library's message, the first differing id named
        std::swap(pieces[49], pieces[50]);
        const cli::Vocab swapped(Llama2cTokenizer::from_vocab(pieces, std::vector<float>(pieces.size(), 0.0f)));
        CHECK_THROWS_WITH(cli::generating::check_vocabularies(target, kDraftVocab, "swapped_drafter", swapped, "pieces"),
                          Catch::StartsWith("[specdec.vocab] the drafter's tokenizer differs from the target's at 2 of the 4000 ids") &&
                              Catch::Contains("(id 49: target 'Q', drafter 'R'; id 50: target 'R', drafter 'Q')") &&
                              Catch::Contains("swapped_drafter"));
    }
    {  // a smaller drafter without a tokenizer is refused: nothing shows it is a prefix
        CHECK_THROWS_WITH(cli::generating::check_vocabularies(target, kDraftVocab, "bare_drafter", cli::Vocab{}, ""),
                          Catch::StartsWith("[specdec.vocab]") && Catch::Contains("--draft-tokenizer") && Catch::Contains("bare_drafter"));
        CHECK(cli::generating::check_vocabularies(target, 4096, "bare_drafter", cli::Vocab{}, "").relation == VocabRelation::kIdentical);
    }
    {  // a drafter larger than the target is refused
        CHECK_THROWS_WITH(cli::generating::check_vocabularies(target, 5000, "big_drafter", cli::Vocab{}, ""),
                          Catch::Contains("the drafter's vocabulary of 5000 exceeds the target's 4096"));
    }
}

TEST_CASE("a path's format follows its kind, and a file that is no GGUF is refused naming it", "[io][command][errors]") {
    const fs::path dir = fs::temp_directory_path() / "specdec_test_command_formats";
    fs::remove_all(dir);
    fs::create_directories(dir / "folder.bin");
    CHECK_THROWS_WITH(cli::format_of(dir / "folder.bin"), Catch::Contains("without config.json"));
    std::ofstream(dir / "folder.bin" / "config.json") << "{}";
    CHECK(cli::format_of(dir / "folder.bin") == cli::ModelFormat::kHfFolder);  // a folder, whatever its name
    CHECK(cli::format_of(dir / "new.bin", true) == cli::ModelFormat::kLlama2c);
    CHECK(cli::format_of(dir / "new", true) == cli::ModelFormat::kHfFolder);
    CHECK(cli::format_of(dir / "m.gguf") == cli::ModelFormat::kGguf);
    CHECK_THROWS_WITH(cli::format_of(dir / "missing"), Catch::Contains("[specdec.cli]") && Catch::Contains("no such file"));
    std::ofstream(dir / "m.gguf") << "not a gguf file";
    CHECK_THROWS_WITH(cli::load_model(dir / "m.gguf"), Catch::Contains("[specdec.gguf]") && Catch::Contains("m.gguf"));
    fs::remove_all(dir);
}

TEST_CASE("the text stream prints whole UTF-8 characters only, however tokens split them", "[io][command]") {
    std::FILE* sink = std::tmpfile();
    REQUIRE(sink != nullptr);
    cli::TextStream s(sink, false);
    const std::string euro = "\xE2\x82\xAC", emoji = "\xF0\x9F\x98\x80";  // U+20AC, U+1F600
    s.add("a", false);
    s.add(euro.substr(0, 1), true);
    CHECK(s.plain_text() == "a");          // half a character waits
    s.add(euro.substr(1, 1), true);
    CHECK(s.plain_text() == "a");
    s.add(euro.substr(2) + emoji.substr(0, 2), false);
    CHECK(s.plain_text() == "a" + euro);   // the euro is whole, the emoji is not yet
    s.add(emoji.substr(2) + " b", false);
    CHECK(s.plain_text() == "a" + euro + emoji + " b");
    s.add("\xFF", false);                  // never valid: replaced at once
    s.add("\xC3", false);                  // a lead byte, then the end
    s.finish();
    CHECK(s.plain_text() == "a" + euro + emoji + " b\xEF\xBF\xBD\xEF\xBF\xBD");
    std::fclose(sink);
}

TEST_CASE("the text stream colours each character by the token of its first byte", "[io][command]") {
    std::FILE* sink = std::tmpfile();
    REQUIRE(sink != nullptr);
    cli::TextStream s(sink, true);
    s.add("ab", true);
    s.add("c", false);
    s.finish();
    std::rewind(sink);
    char buf[64] = {};
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, sink);
    CHECK(std::string(buf, n) == "\x1b[32mab\x1b[0mc");
    std::fclose(sink);
}

}  // namespace test_command_files
