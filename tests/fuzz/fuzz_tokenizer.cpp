// tests/fuzz/fuzz_tokenizer.cpp — arbitrary bytes as tokenizer.json: Tokenizer::from_json, then encode
// of fixed texts (byte-level BPE promises decode(encode(s)) == s for any bytes it can encode, or NFC(s)
// where the file has the NFC normalizer; the
// SentencePiece kind maps "▁" to a space and may use unk, so it promises ids in the vocab), decode
// of id sequences drawn from the input (out-of-range ones included), the id accessors, and a
// to_json/from_json round trip. Run through scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include <algorithm>
#include <array>
#include <climits>
#include <optional>
#include <vector>

#include "detail/io/tokenizer.hpp"
#include "fuzz_common.hpp"

namespace {

constexpr char kBytes[] = "\x00\x01\xFF\xFE invalid \xC3 utf-8 \xED\xA0\x80";  // NUL, stray bytes, a surrogate

constexpr std::array<std::string_view, 10> kTexts = {
    "",
    "It was the best of times, it was the worst of times,",
    "  leading spaces\n\ttabs and\r\nnewlines   ",
    "don't can't we'll I'm 1234567 3.14 x=y+z;",
    "h\xC3\xA9llo w\xC3\xB6rld \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82",  // UTF-8
    "<|endoftext|>a<|endoftext|><|endoftext|>b",
    std::string_view(kBytes, sizeof kBytes - 1),
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "\xE2\x80\x83\xC2\xA0 unicode spaces \xE3\x80\x80!",
    "cafe\xCC\x81 A\xCC\x8A\xCC\x81 \xE1\x84\x80\xE1\x85\xA1 \xEF\xA4\x80",  // not NFC: marks, jamo, a singleton
};

/// Encodes `text` if the vocab can; what encodes must decode back to the same bytes.
std::optional<std::vector<int>> encode_round_trip(const specdec::Tokenizer& tok, std::string_view text) {
    std::vector<int> ids;
    try {
        ids = tok.encode(text);
    } catch (const specdec::error&) {
        return std::nullopt;  // a vocab without some byte token refuses, naming the byte
    }
    for (int id : ids) FUZZ_CHECK(id >= 0 && id < tok.vocab_size(), "encode returns ids in the vocab");
    if (tok.kind() == specdec::TokenizerKind::kByteLevel) {
        const std::string back = tok.decode(ids);
        FUZZ_CHECK(back == text || back == specdec::detail::nfc(text), "decode(encode(s)) == s, or NFC(s)");
    }
    else (void)tok.decode(ids);
    std::vector<int> framed = tok.encode_with_special(text);
    FUZZ_CHECK(ids.empty() || std::search(framed.begin(), framed.end(), ids.begin(), ids.end()) != framed.end(),
               "encode_with_special(s) holds encode(s)");
    if (tok.bos_id()) FUZZ_CHECK(framed.front() == *tok.bos_id(), "encode_with_special starts with bos_id()");
    return ids;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    std::optional<specdec::Tokenizer> tok;
    try {
        tok = specdec::Tokenizer::from_json(text, "fuzz_tokenizer.json");
    } catch (const specdec::error&) {
        return 0;
    }
    const int V = tok->vocab_size();
    FUZZ_CHECK(V > 0, "a loaded tokenizer has a vocab");

    std::vector<std::optional<std::vector<int>>> encoded;
    for (std::string_view s : kTexts) encoded.push_back(encode_round_trip(*tok, s));

    // Arbitrary ids: the input's first bytes as int32 (huge and negative ones), then small ones around
    // the vocab's ends. Decoding may refuse them, only with specdec::error.
    std::vector<int> ids;
    for (std::size_t i = 0; i + 4 <= std::min<std::size_t>(size, 64); i += 4) {
        int v;
        std::memcpy(&v, data + i, 4);
        ids.push_back(v);
    }
    for (int v : {-1, 0, V - 1, V, V + 1, INT_MAX, INT_MIN}) ids.push_back(v);
    for (int id : ids) {
        const std::span<const int> one(&id, 1);
        try {
            const std::string s = tok->decode(one);
            FUZZ_CHECK(id >= 0 && id < V, "decode accepts only ids in the vocab");
            if (tok->kind() == specdec::TokenizerKind::kByteLevel) FUZZ_CHECK(s == tok->id_to_token(id), "decode of one id is its token");
            else FUZZ_CHECK(tok->id_to_token(id).ends_with(s), "decode of one id is its token, less leading spaces");
            (void)tok->is_special(id);
        } catch (const specdec::error&) {
        }
    }
    try {
        (void)tok->decode(ids);
    } catch (const specdec::error&) {
    }
    try {
        (void)tok->eos_id();
    } catch (const specdec::error&) {
    }
    for (int id = 0; id < std::min(V, 512); ++id) {
        const std::optional<int> back = tok->token_to_id(tok->id_to_token(id));
        FUZZ_CHECK(back.has_value(), "every token has an id");
    }

    // What to_json writes, from_json must read back to a tokenizer that encodes alike. (to_json may
    // refuse, with specdec::error, a vocab where an added token's content spells a BPE token.)
    std::string written;
    try {
        written = tok->to_json();
    } catch (const specdec::error&) {
        return 0;
    }
    const specdec::Tokenizer again = specdec::Tokenizer::from_json(written, "to_json");
    FUZZ_CHECK(again.vocab_size() == V, "to_json keeps the vocab size");
    for (std::size_t i = 0; i < kTexts.size(); ++i) {
        std::optional<std::vector<int>> ids2;
        try {
            ids2 = again.encode(kTexts[i]);
        } catch (const specdec::error&) {
        }
        FUZZ_CHECK(ids2 == encoded[i], "the re-read tokenizer encodes as the original");
    }
    return 0;
}
