// specdec/detail/io/vocab_compat.hpp — whether a drafter's vocabulary can speak for a target's: identical, a prefix, or refused.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <string_view>

#include "../core/compiled.hpp"
#include "../core/error.hpp"
#include "tokenizer.hpp"

// Speculative decoding compares the drafter's token ids with the target's, so an id must mean the same
// piece in both. Two relations are allowed:
//   identical — same pieces, same size;
//   prefix    — the drafter's pieces are the target's first ids, and the target has more after them
//               (an extended or padded tail: Llama-2 chat variants add tokens, many checkpoints pad
//               the embedding to a multiple of 64 or 128).
// The lossless rule for a prefix: the drafter never proposes an id >= its size — its distribution
// q is padded with zeros (logits -inf) up to the target's V by PaddedVocabProposer
// (policies/padded_vocab.hpp). Speculative sampling (Leviathan et al. 2023, §2.3; Chen et al. 2023,
// Algorithm 2) then accepts x with min(1, p(x)/q(x)) and resamples from norm(max(0, p - q)) on
// rejection: on the tail q = 0, so the residual carries the target's whole tail mass p(tail), and
// the output law is exactly p. Greedy matching is exact too (the target's argmax may be a tail id:
// it is the bonus token). A tail id the target emits reaches the drafter's input as a substitute id
// (the drafter cannot embed it): that changes only what the drafter proposes next, never the output.
// Anything else (a differing piece at a shared id, a drafter larger than its target) is refused
// listing the first differing ids and their pieces: decoding with it would be silent garbage.

namespace specdec {

enum class VocabRelation {
    kIdentical,    // same size, same pieces
    kDraftPrefix,  // the drafter's vocabulary is the target's first draft_size ids
};

struct VocabCompatibility {
    VocabRelation relation = VocabRelation::kIdentical;
    int target_size = 0;  // V of the target
    int draft_size = 0;   // V of the drafter (<= target_size)
};

/// Compares the tokenizers piece by piece (id_to_token). Throws a [specdec.vocab] error listing up to
/// five differing ids with both pieces when a shared id differs, or when the drafter has ids the
/// target lacks.
SPECDEC_INLINE VocabCompatibility check_vocab_compatible(const Tokenizer& target, const Tokenizer& draft);

/// A vocabulary's piece of an id in [0, its size), as bytes that outlive the call.
using PieceOf = std::function<std::string_view(int id)>;

/// The same for any two vocabularies given by their sizes and pieces (a llama2.c tokenizer.bin, a
/// GGUF file's token list, or a Tokenizer: the overload above calls this one), with the same errors.
SPECDEC_INLINE VocabCompatibility check_vocab_compatible(int target_size, const PieceOf& target_piece, int draft_size,
                                                         const PieceOf& draft_piece);

/// The same for the models' vocabulary sizes (their embedding rows), which may exceed the tokenizer's
/// (padding): the drafter's V may not exceed the target's; smaller is a prefix.
SPECDEC_INLINE VocabCompatibility check_vocab_compatible(int target_vocab_size, int draft_vocab_size);

#if SPECDEC_BODIES

namespace detail {

/// A token's bytes for an error message: printable ASCII as is, other bytes as \xNN, in quotes.
inline std::string quoted_piece(std::string_view piece) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string s = "'";
    for (const char ch : piece.substr(0, 32)) {
        const auto b = static_cast<unsigned char>(ch);
        if (b >= 0x20 && b < 0x7F && b != '\\' && b != '\'') {
            s += ch;
        } else {
            s += "\\x";
            s += kHex[b >> 4];
            s += kHex[b & 15];
        }
    }
    return s + (piece.size() > 32 ? "...'" : "'");
}

}  // namespace detail

SPECDEC_INLINE VocabCompatibility check_vocab_compatible(int target_vocab_size, int draft_vocab_size) {
    detail::require(target_vocab_size > 0 && draft_vocab_size > 0, "vocab", [&] {
        return "vocabulary sizes must be > 0: target " + std::to_string(target_vocab_size) + ", drafter " +
               std::to_string(draft_vocab_size);
    });
    detail::require(draft_vocab_size <= target_vocab_size, "vocab", [&] {
        return "the drafter's vocabulary of " + std::to_string(draft_vocab_size) + " exceeds the target's " +
               std::to_string(target_vocab_size) + ": the drafter could propose ids the target does not have";
    });
    return {draft_vocab_size == target_vocab_size ? VocabRelation::kIdentical : VocabRelation::kDraftPrefix,
            target_vocab_size, draft_vocab_size};
}

SPECDEC_INLINE VocabCompatibility check_vocab_compatible(int Vt, const PieceOf& target_piece, int Vd,
                                                         const PieceOf& draft_piece) {
    const int shared = std::min(Vt, Vd);
    std::string differing;
    int n_differing = 0;
    for (int id = 0; id < shared; ++id) {
        if (target_piece(id) == draft_piece(id)) continue;
        if (++n_differing <= 5)
            differing += (n_differing > 1 ? "; " : "") + std::string("id ") + std::to_string(id) + ": target " +
                         detail::quoted_piece(target_piece(id)) + ", drafter " + detail::quoted_piece(draft_piece(id));
    }
    detail::require(n_differing == 0, "vocab", [&] {
        return "the drafter's tokenizer differs from the target's at " + std::to_string(n_differing) + " of the " +
               std::to_string(shared) + " ids they share (" + differing + (n_differing > 5 ? "; ..." : "") +
               "): a drafter must share the target's tokenizer";
    });
    detail::require(Vd <= Vt, "vocab", [&] {
        std::string extra;
        for (int id = Vt; id < std::min(Vd, Vt + 5); ++id)
            extra += (id > Vt ? ", " : "") + std::to_string(id) + " " + detail::quoted_piece(draft_piece(id));
        return "the drafter's tokenizer has " + std::to_string(Vd) + " tokens, the target's " + std::to_string(Vt) +
               ": ids the target does not have (" + extra + (Vd > Vt + 5 ? ", ..." : "") + ")";
    });
    return check_vocab_compatible(Vt, Vd);
}

SPECDEC_INLINE VocabCompatibility check_vocab_compatible(const Tokenizer& target, const Tokenizer& draft) {
    return check_vocab_compatible(
        target.vocab_size(), [&](int id) -> std::string_view { return target.id_to_token(id); },  //
        draft.vocab_size(), [&](int id) -> std::string_view { return draft.id_to_token(id); });
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
