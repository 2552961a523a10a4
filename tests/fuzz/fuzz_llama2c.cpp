// tests/fuzz/fuzz_llama2c.cpp — llama2.c files from one input: the first 4 bytes (little-endian) are the
// length of a model .bin, the rest is a tokenizer.bin (fuzz_common.hpp's split). A model that loads must
// validate, survive save_llama2c and load_llama2c bit for bit, and run one forward (unless CpuModel
// refuses its context with specdec::error); a tokenizer that loads
// must encode fixed texts to ids in its vocabulary (or refuse with specdec::error), decode any ids, and
// survive save and load. Run through scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "detail/io/llama2c.hpp"
#include "detail/model/cpu_model.hpp"
#include "fuzz_common.hpp"

namespace {

constexpr char kBytes[] = "\x00\x01\xFF\xFE stray \x80\x80\x80\x80\x80 \xC3 utf-8";  // NUL, stray continuation bytes

constexpr std::array<std::string_view, 5> kTexts = {
    "",
    "Once upon a time, there was a little girl named Lily.",
    "h\xC3\xA9llo w\xC3\xB6rld \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82",
    std::string_view(kBytes, sizeof kBytes - 1),
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
};

bool same_bits(const specdec::Weights& a, const specdec::Weights& b, const specdec::Config& c) {
    std::vector<const std::vector<float>*> xs, ys;
    specdec::for_each_tensor(a, c, [&](const std::string&, const std::vector<float>& t, std::size_t) { xs.push_back(&t); });
    specdec::for_each_tensor(b, c, [&](const std::string&, const std::vector<float>& t, std::size_t) { ys.push_back(&t); });
    for (std::size_t i = 0; i < xs.size(); ++i)
        if (xs[i]->size() != ys[i]->size() || std::memcmp(xs[i]->data(), ys[i]->data(), xs[i]->size() * 4) != 0) return false;
    return xs.size() == ys.size();
}

void fuzz_model(const std::filesystem::path& dir) {
    std::optional<specdec::Checkpoint> ck;
    try {
        ck = specdec::load_llama2c(dir / "model.bin");
    } catch (const specdec::error&) {
        return;
    }
    // Outside a try: what loads is a valid model of the config it came with, and saves as both versions.
    ck->config.validate();
    specdec::validate(ck->weights, ck->config);
    // Version 0 stores RoPE tables of seq_len rows, which a version 1 header may declare near 2^31 without
    // holding them: that round trip only for contexts a version 0 file of the fuzzer's size could hold.
    const bool small_context = std::int64_t{ck->config.max_position_embeddings} * ck->config.head_dim() <= 65536;
    for (auto version : {specdec::Llama2cVersion::kLegacy, specdec::Llama2cVersion::kFloat32}) {
        if (version == specdec::Llama2cVersion::kLegacy && !small_context) continue;
        specdec::save_llama2c(dir / "again.bin", ck->config, ck->weights, version);
        const specdec::Checkpoint back = specdec::load_llama2c(dir / "again.bin");
        FUZZ_CHECK(same_bits(back.weights, ck->weights, ck->config), "save_llama2c then load_llama2c is exact");
    }
    std::optional<specdec::CpuModel> built;
    try {
        built.emplace(ck->config, std::move(ck->weights));
    } catch (const specdec::error&) {
        return;  // seq_len so near 2^31 that the KV rows (+ max_tree_nodes) outgrow an int: refused, naming it
    }
    specdec::CpuModel& model = *built;
    const int V = model.vocab_size();
    std::vector<int> tokens = {0, V - 1, V / 2};
    tokens.resize(static_cast<std::size_t>(std::min(3, model.context_size())));
    const specdec::Rows logits = model.forward(specdec::Tree::chain(tokens), 0);
    FUZZ_CHECK(logits.rows() == static_cast<int>(tokens.size()) && logits.cols == V, "one row of logits per token");
}

void fuzz_tokenizer(const std::filesystem::path& dir, std::span<const std::uint8_t> raw) {
    std::optional<specdec::Llama2cTokenizer> tok;
    try {
        tok = specdec::Llama2cTokenizer::load(dir / "tokenizer.bin");
    } catch (const specdec::error&) {
        return;
    }
    const int V = tok->vocab_size();
    FUZZ_CHECK(V > 0, "a loaded tokenizer has a vocabulary");
    tok->save(dir / "tokenizer_again.bin");
    const specdec::Llama2cTokenizer back = specdec::Llama2cTokenizer::load(dir / "tokenizer_again.bin");
    FUZZ_CHECK(back.vocab_size() == V && back.max_token_length() == tok->max_token_length(), "save then load keeps the vocab");
    for (std::string_view text : kTexts) {
        for (bool bos : {false, true}) {
            std::vector<int> ids;
            try {
                ids = tok->encode(text, bos, bos);
            } catch (const specdec::error&) {
                continue;  // no " " token, or a byte whose fallback id is past the vocabulary
            }
            for (int id : ids) FUZZ_CHECK(id >= 0 && id < V, "encode returns ids in the vocabulary");
            FUZZ_CHECK(back.encode(text, bos, bos) == ids, "the saved tokenizer encodes the same");
            (void)tok->decode(ids);
        }
    }
    // Arbitrary ids from the input's bytes, as int32 and as small ones: decode refuses only with specdec::error.
    std::vector<int> ids;
    for (std::size_t i = 0; i + 4 <= raw.size() && ids.size() < 64; i += 4) {
        std::int32_t v = 0;
        std::memcpy(&v, raw.data() + i, 4);
        ids.push_back(v);
        ids.push_back(static_cast<int>(raw[i]) % (V + 2) - 1);
    }
    try {
        (void)tok->decode(ids);
    } catch (const specdec::error&) {
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::filesystem::path& dir = fuzz::scratch_dir("llama2c");
    const fuzz::TwoParts parts = fuzz::split(data, size);
    fuzz::write_file(dir / "model.bin", parts.first);
    fuzz::write_file(dir / "tokenizer.bin", parts.second);
    fuzz_model(dir);
    fuzz_tokenizer(dir, parts.second);
    return 0;
}
