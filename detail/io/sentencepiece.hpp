// specdec/detail/io/sentencepiece.hpp — SentencePiece's tokenizer.model (its protobuf), as Llama-2 and
// Mistral ship it: BPE with byte fallback, run by Llama2cTokenizer.
// SPDX-License-Identifier: MIT
#pragma once

// A tokenizer.model is a serialized sentencepiece ModelProto (sentencepiece_model.proto): the pieces
// (string, score, type), the TrainerSpec (model type, byte fallback, special ids) and the NormalizerSpec.
// For a BPE model, SentencePiece's encoder (bpe_model.cc) is run.c's algorithm, which Llama2cTokenizer
// runs: a "▁" prefix, characters or their bytes, then merge the adjacent pair whose concatenation is the
// piece of highest score, leftmost first. llama.cpp's converter reads the same fields into a GGUF's
// tokenizer.ggml.* (its "llama" kind). What that encoder does not do is refused here, by field and value:
// a Unigram model, a normalizer other than identity, whitespace collapsing, user-defined pieces (which
// SentencePiece cuts out of the text before BPE), special ids other than Llama's.

#include <filesystem>

#include "../core/compiled.hpp"
#include "llama2c.hpp"
#if SPECDEC_BODIES
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/error.hpp"
#include "checkpoint.hpp"
#include "json.hpp"
#endif

namespace specdec {

/// Reads SentencePiece's tokenizer.model. Throws a specdec::error naming the file, the field and the
/// value for a file that is not a ModelProto or a model the SentencePiece-style encoder cannot run.
SPECDEC_INLINE Llama2cTokenizer load_sentencepiece_model(const std::filesystem::path& path);

#if SPECDEC_BODIES

namespace detail {

/// Protobuf's wire format (protobuf.dev, "Encoding"): fields as (number << 3 | wire type) varint keys,
/// then a varint, a fixed 64- or 32-bit value, or a length-prefixed run of bytes.
class ProtoReader {
public:
    ProtoReader(std::string_view bytes, std::string origin) : p_(bytes), origin_(std::move(origin)) {}

    bool done() const { return at_ == p_.size(); }
    /// The next field's number and wire type.
    std::pair<std::uint32_t, int> key() {
        const std::uint64_t k = varint("a field key");
        const std::uint64_t number = k >> 3;
        if (number == 0 || number > 536870911) fail("holds field number " + std::to_string(number));
        return {static_cast<std::uint32_t>(number), static_cast<int>(k & 7)};
    }
    std::uint64_t varint(const char* what) {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (at_ == p_.size()) fail(std::string("ends inside ") + what);
            const auto b = static_cast<unsigned char>(p_[at_++]);
            v |= static_cast<std::uint64_t>(b & 0x7f) << shift;
            if ((b & 0x80) == 0) return v;
        }
        fail(std::string("holds a varint longer than 10 bytes in ") + what);
    }
    std::string_view bytes(const char* what) {
        const std::uint64_t n = varint(what);
        if (n > p_.size() - at_)
            fail(std::string(what) + " declares " + std::to_string(n) + " bytes where " + std::to_string(p_.size() - at_) + " remain");
        const std::string_view out = p_.substr(at_, static_cast<std::size_t>(n));
        at_ += static_cast<std::size_t>(n);
        return out;
    }
    float fixed32_float(const char* what) {
        if (p_.size() - at_ < 4) fail(std::string("ends inside ") + what);
        std::uint32_t u = 0;
        for (int i = 0; i < 4; ++i) u |= static_cast<std::uint32_t>(static_cast<unsigned char>(p_[at_ + i])) << (8 * i);
        at_ += 4;
        float f;
        std::memcpy(&f, &u, 4);
        return f;
    }
    /// Skips a field this reader does not use.
    void skip(int wire, std::uint32_t number) {
        switch (wire) {
            case 0: varint("a varint field"); return;
            case 1: advance(8, number); return;
            case 2: bytes("a length-delimited field"); return;
            case 5: advance(4, number); return;
            default: fail("holds field " + std::to_string(number) + " of wire type " + std::to_string(wire) + " (groups are not read)");
        }
    }
    /// A field of the expected wire type, or an error naming it.
    void expect(int wire, int want, const char* field) {
        if (wire != want)
            fail("field '" + std::string(field) + "' has wire type " + std::to_string(wire) + ", not " + std::to_string(want));
    }
    [[noreturn]] void fail(const std::string& what) const {
        detail::fail("sentencepiece", origin_ + ": " + what + " (at byte " + std::to_string(at_) + ")");
    }

private:
    void advance(std::size_t n, std::uint32_t number) {
        if (p_.size() - at_ < n) fail("ends inside field " + std::to_string(number));
        at_ += n;
    }
    std::string_view p_;
    std::size_t at_ = 0;
    std::string origin_;
};

}  // namespace detail

SPECDEC_INLINE Llama2cTokenizer load_sentencepiece_model(const std::filesystem::path& path) {
    const std::string file = detail::read_text_file(path, "sentencepiece");
    const std::string name = path.string();
    // ModelProto: 1 pieces, 2 trainer_spec, 3 normalizer_spec. SentencePiece: 1 piece, 2 score, 3 type.
    enum PieceType { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5, kByte = 6 };
    std::vector<std::string> pieces;
    std::vector<float> scores;
    std::vector<int> types;
    // TrainerSpec: 3 model_type (1 unigram, 2 BPE, 3 word, 4 char), 35 byte_fallback, 40..42 unk/bos/eos id.
    std::int64_t model_type = 1, unk_id = 0, bos_id = 1, eos_id = 2;
    bool byte_fallback = false;
    // NormalizerSpec: 1 name, 2 precompiled_charsmap, 3 add_dummy_prefix, 4 remove_extra_whitespaces,
    // 5 escape_whitespaces; the defaults are the proto's.
    std::string normalizer = "nmt_nfkc";
    std::size_t charsmap = 0;
    bool dummy_prefix = true, collapse_spaces = true, escape_spaces = true;

    detail::ProtoReader model(file, name);
    while (!model.done()) {
        const auto [field, wire] = model.key();
        if (field == 1) {
            model.expect(wire, 2, "pieces");
            detail::ProtoReader piece(model.bytes("a piece"), name + " piece " + std::to_string(pieces.size()));
            std::string text;
            float score = 0.0f;
            std::uint64_t type = kNormal;
            while (!piece.done()) {
                const auto [f, w] = piece.key();
                if (f == 1) piece.expect(w, 2, "piece"), text = std::string(piece.bytes("the piece"));
                else if (f == 2) piece.expect(w, 5, "score"), score = piece.fixed32_float("the score");
                else if (f == 3) piece.expect(w, 0, "type"), type = piece.varint("the type");
                else piece.skip(w, f);
            }
            if (type < kNormal || type > kByte) piece.fail("has type " + std::to_string(type));
            pieces.push_back(std::move(text));
            scores.push_back(score);
            types.push_back(static_cast<int>(type));
        } else if (field == 2 || field == 3) {
            model.expect(wire, 2, field == 2 ? "trainer_spec" : "normalizer_spec");
            detail::ProtoReader spec(model.bytes("a spec"), name + (field == 2 ? " trainer_spec" : " normalizer_spec"));
            while (!spec.done()) {
                const std::pair<std::uint32_t, int> key = spec.key();
                const std::uint32_t f = key.first;
                const int w = key.second;  // not a structured binding: a lambda captures it (Clang 14)
                const auto number = [&](const char* what) {
                    spec.expect(w, 0, what);
                    return static_cast<std::int64_t>(spec.varint(what));  // int32 -1 is ten bytes of two's complement
                };
                if (field == 2 && f == 3) model_type = number("model_type");
                else if (field == 2 && f == 35) byte_fallback = number("byte_fallback") != 0;
                else if (field == 2 && f == 40) unk_id = number("unk_id");
                else if (field == 2 && f == 41) bos_id = number("bos_id");
                else if (field == 2 && f == 42) eos_id = number("eos_id");
                else if (field == 3 && f == 1) spec.expect(w, 2, "name"), normalizer = std::string(spec.bytes("the name"));
                else if (field == 3 && f == 2) spec.expect(w, 2, "precompiled_charsmap"), charsmap = spec.bytes("the charsmap").size();
                else if (field == 3 && f == 3) dummy_prefix = number("add_dummy_prefix") != 0;
                else if (field == 3 && f == 4) collapse_spaces = number("remove_extra_whitespaces") != 0;
                else if (field == 3 && f == 5) escape_spaces = number("escape_whitespaces") != 0;
                else spec.skip(w, f);
            }
        } else {
            model.skip(wire, field);
        }
    }

    const auto bad = [&](const std::string& what) { detail::fail("sentencepiece", name + ": " + what); };
    if (pieces.size() < 259) bad("holds " + std::to_string(pieces.size()) + " pieces; a BPE model with byte fallback has at least 259");
    if (model_type != 2)
        bad("trainer_spec.model_type is " + std::to_string(model_type) + (model_type == 1 ? " (Unigram)" : "") +
            "; specdec runs SentencePiece's BPE (2) only");
    if (!byte_fallback) bad("trainer_spec.byte_fallback is false; specdec's encoder falls back to the bytes <0x00>..<0xFF>");
    if (unk_id != 0 || bos_id != 1 || eos_id != 2)
        bad("trainer_spec has unk_id " + std::to_string(unk_id) + ", bos_id " + std::to_string(bos_id) + ", eos_id " +
            std::to_string(eos_id) + "; specdec's SentencePiece encoder needs Llama's 0, 1, 2");
    if (normalizer != "identity" || charsmap != 0)
        bad("normalizer_spec.name is '" + normalizer + "'" + (charsmap ? " with a precompiled_charsmap" : "") +
            "; specdec runs the identity normalizer only (as Llama-2's and Mistral's models)");
    if (!dummy_prefix) bad("normalizer_spec.add_dummy_prefix is false; specdec's encoder always adds the \"\xE2\x96\x81\" prefix");
    if (collapse_spaces) bad("normalizer_spec.remove_extra_whitespaces is true; specdec's encoder keeps every space");
    if (!escape_spaces) bad("normalizer_spec.escape_whitespaces is false; specdec's encoder spells spaces as \"\xE2\x96\x81\"");
    for (std::size_t i = 0; i < pieces.size(); ++i) {
        if (types[i] == kUserDefined)
            bad("piece " + std::to_string(i) + " '" + pieces[i] +
                "' is user-defined, which SentencePiece cuts out of the text before BPE and specdec's encoder does not");
        const bool want_byte = i >= 3 && i < 259;
        if (want_byte != (types[i] == kByte) ||
            (want_byte && pieces[i] != "<0x" + detail::hex_byte(static_cast<unsigned char>(i - 3)).substr(2) + ">"))
            bad("piece " + std::to_string(i) + " is '" + pieces[i] + "' of type " + std::to_string(types[i]) +
                "; specdec needs the byte pieces <0x00>..<0xFF> (type 6) at ids 3..258 and no other");
    }
    if (types[0] != kUnknown || types[1] != kControl || types[2] != kControl)
        bad("pieces 0, 1, 2 have types " + std::to_string(types[0]) + ", " + std::to_string(types[1]) + ", " +
            std::to_string(types[2]) + "; <unk> (2), <s> and </s> (3) expected");
    for (std::string& p : pieces) p = detail::spm_spaces_as_blanks(p);  // Llama2cTokenizer spells "▁" as " "
    Llama2cTokenizer t = Llama2cTokenizer::from_vocab(std::move(pieces), std::move(scores));
    t.set_sentencepiece_spaces(true);
    return t;
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
