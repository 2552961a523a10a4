// specdec/detail/io/nfc.hpp — Unicode Normalization Form C (UAX #15), the normalizer of Qwen's tokenizer.json.
// SPDX-License-Identifier: MIT
//
// NFC = canonical decomposition, canonical ordering of combining marks, then canonical composition
// (UAX #15 §1.3; the algorithms are the Unicode Standard's §3.11 and §3.12). The tables are
// Unicode 15.0's (nfc_tables.hpp, generated); HF tokenizers use the Rust unicode-normalization crate
// and transformers.js uses String.prototype.normalize, whose Unicode versions may be newer: text with
// code points assigned after 15.0 may normalize differently there (docs/formats.md).
#pragma once

#include <string>
#include <string_view>

#include "../core/compiled.hpp"
#include "json.hpp"

namespace specdec::detail {

/// The NFC form of UTF-8 `text`. A byte that is not part of well-formed UTF-8 passes through
/// unchanged and blocks composition across it (HF's strings cannot hold one; specdec's tokenizers
/// encode any bytes). Text already in NFC (all of ASCII and Latin-1, most text) is returned as is
/// after one quick-check pass (UAX #15 §9).
SPECDEC_INLINE std::string nfc(std::string_view text);

/// The Unicode version of the tables.
SPECDEC_INLINE std::string_view nfc_unicode_version();

}  // namespace specdec::detail

#if SPECDEC_BODIES
#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "nfc_tables.hpp"

namespace specdec::detail {

namespace nfc_impl {

// Hangul syllables (Unicode §3.12): S = SBase + (L * VCount + V) * TCount + T.
inline constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
inline constexpr char32_t kLCount = 19, kVCount = 21, kTCount = 28, kSCount = kLCount * kVCount * kTCount;
// A byte outside well-formed UTF-8 is carried as kRawByte + byte: class 0, no decomposition, composes with nothing.
inline constexpr char32_t kRawByte = 0x110000;

inline unsigned char combining_class(char32_t c) {
    if (c < 0x300) return 0;
    const auto& t = nfc_tables::kCombiningClasses;
    auto it = std::upper_bound(std::begin(t), std::end(t), c, [](char32_t x, const nfc_tables::ClassRange& r) { return x < r.first; });
    return it != std::begin(t) && c <= std::prev(it)->last ? std::prev(it)->ccc : 0;
}

inline bool quick_check_not_yes(char32_t c) {
    const auto& t = nfc_tables::kNfcQuickCheck;
    auto it = std::upper_bound(std::begin(t), std::end(t), c, [](char32_t x, const nfc_tables::Range& r) { return x < r.first; });
    return it != std::begin(t) && c <= std::prev(it)->last;
}

/// Appends the full canonical decomposition of c.
inline void decompose(char32_t c, std::vector<char32_t>& out) {
    if (c >= kSBase && c < kSBase + kSCount) {
        const char32_t s = c - kSBase;
        out.push_back(kLBase + s / (kVCount * kTCount));
        out.push_back(kVBase + (s % (kVCount * kTCount)) / kTCount);
        if (s % kTCount) out.push_back(kTBase + s % kTCount);
        return;
    }
    const auto& t = nfc_tables::kCanonicalDecompositions;
    auto it = std::lower_bound(std::begin(t), std::end(t), c, [](const nfc_tables::Decomposition& d, char32_t x) { return d.code_point < x; });
    if (it == std::end(t) || it->code_point != c) {
        out.push_back(c);
        return;
    }
    decompose(it->first, out);  // one level per table entry; at most four characters in all
    if (it->second) decompose(it->second, out);
}

/// The primary composite of (first, second), or 0 if none.
inline char32_t compose(char32_t first, char32_t second) {
    if (first >= kLBase && first < kLBase + kLCount && second >= kVBase && second < kVBase + kVCount)
        return kSBase + ((first - kLBase) * kVCount + (second - kVBase)) * kTCount;
    if (first >= kSBase && first < kSBase + kSCount && (first - kSBase) % kTCount == 0 && second > kTBase &&
        second < kTBase + kTCount)
        return first + (second - kTBase);
    const auto& t = nfc_tables::kCanonicalCompositions;
    auto it = std::lower_bound(std::begin(t), std::end(t), std::pair{first, second}, [](const nfc_tables::Composition& c, const auto& key) {
        return c.first != key.first ? c.first < key.first : c.second < key.second;
    });
    return it != std::end(t) && it->first == first && it->second == second ? it->composite : 0;
}

}  // namespace nfc_impl

SPECDEC_INLINE std::string_view nfc_unicode_version() { return nfc_tables::kUnicodeVersion; }

SPECDEC_INLINE std::string nfc(std::string_view text) {
    using namespace nfc_impl;
    // Quick check: no code point that is NFC_QC No/Maybe or a combining mark means NFC already.
    bool changed_possible = false;
    for (std::size_t i = 0; i < text.size() && !changed_possible;) {
        if (static_cast<unsigned char>(text[i]) < 0xCC) {  // below U+0300 (lead bytes up to 0xCB)
            ++i;
            continue;
        }
        const Utf8Char u = decode_utf8(text, i);
        if (u.length == 0) {
            ++i;
            continue;
        }
        changed_possible = combining_class(u.cp) != 0 || quick_check_not_yes(u.cp);
        i += u.length;
    }
    if (!changed_possible) return std::string(text);

    // Decompose, then put each run of combining marks in canonical order (a stable sort by class).
    std::vector<char32_t> chars;
    chars.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const Utf8Char u = decode_utf8(text, i);
        if (u.length == 0) {
            chars.push_back(kRawByte + static_cast<unsigned char>(text[i]));
            ++i;
            continue;
        }
        decompose(u.cp, chars);
        i += u.length;
    }
    std::vector<unsigned char> classes(chars.size());
    for (std::size_t k = 0; k < chars.size(); ++k) classes[k] = chars[k] >= kRawByte ? 0 : combining_class(chars[k]);
    for (std::size_t k = 1; k < chars.size(); ++k)  // insertion sort: runs of marks are short
        for (std::size_t j = k; j > 0 && classes[j] != 0 && classes[j - 1] > classes[j]; --j) {
            std::swap(chars[j], chars[j - 1]);
            std::swap(classes[j], classes[j - 1]);
        }

    // Compose: each character joins the last starter unless a character between them has a class
    // equal to or above its own (it is "blocked"), or it is a starter not adjacent to that starter.
    std::size_t n_out = 0;
    std::size_t starter = SIZE_MAX;  // position of the last starter in the output
    int last_class = -1;             // class of the last character written after it (-1: none)
    for (std::size_t k = 0; k < chars.size(); ++k) {
        const char32_t c = chars[k];
        const int cls = classes[k];
        if (starter != SIZE_MAX && c < kRawByte && (last_class < 0 || (last_class < cls))) {
            if (const char32_t composite = compose(chars[starter], c)) {
                chars[starter] = composite;
                continue;
            }
        }
        if (cls == 0) {
            starter = c < kRawByte ? n_out : SIZE_MAX;
            last_class = -1;
        } else {
            last_class = cls;
        }
        chars[n_out] = c;
        classes[n_out] = static_cast<unsigned char>(cls);
        ++n_out;
    }

    std::string out;
    out.reserve(text.size());
    for (std::size_t k = 0; k < n_out; ++k) {
        if (chars[k] >= kRawByte) out += static_cast<char>(chars[k] - kRawByte);
        else append_utf8(out, chars[k]);
    }
    return out;
}

}  // namespace specdec::detail
#endif  // SPECDEC_BODIES
