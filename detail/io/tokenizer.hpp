// specdec/detail/io/tokenizer.hpp — byte-level and SentencePiece-style BPE, reading and writing HuggingFace tokenizer.json.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <array>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <limits>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "../core/compiled.hpp"
#include "../core/error.hpp"
#include "../core/text_codec.hpp"
#include "file_bytes.hpp"
#include "json.hpp"
#include "nfc.hpp"
#if SPECDEC_BODIES  // only the bodies read and write files
#include <fstream>
#endif

// Byte-level BPE as in GPT-2 (Radford et al. 2019, §2.2) and HF tokenizers' ByteLevel + BPE:
//   1. added (special) tokens are cut out of the text first, matched literally, leftmost-longest;
//   2. the rest is split into pre-tokens by the GPT-2 pattern
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//      or by Llama-3's or Qwen2's (for_each_pretoken_llama3), as the file's Split says, after the
//      NFC normalizer where the file has one (Qwen's);
//   3. each pre-token starts as its bytes (the base vocab holds all 256) and merges are applied
//      lowest rank first, leftmost first among equal ranks (HF's order).
// Tokens are byte strings inside the library; only tokenizer.json spells them in the GPT-2
// bytes_to_unicode alphabet ("Ġthe" for " the").
//
// SentencePiece-style BPE (Kudo & Richardson 2018, as HF converts Llama-2's tokenizer.model) shares
// steps 1 and 3, but spaces become "▁" with one "▁" prepended, there is no pre-tokenizer, symbols
// start as characters, and a character outside the vocab falls back to its bytes as <0xNN> tokens.
// docs/formats.md lists what each kind reads and what is exact.

namespace specdec::detail {

/// The byte-level pre-tokenizer patterns a tokenizer.json may name (its Split pattern decides):
/// GPT-2's, Llama-3's, and Qwen2's (Llama-3's with single digits; Qwen2, Qwen2.5 and Qwen3 share it).
enum class SplitPattern { kGpt2, kLlama3, kQwen2 };

}  // namespace specdec::detail

// The helpers of the bodies below: inline, seen in every mode (tests/io/test_tokenizer.cpp calls the
// pre-tokenizers and the byte-level alphabet directly).

namespace specdec::detail {

// ---------------------------------------------------------------------------------------------
// The GPT-2 byte <-> unicode alphabet

/// Printable bytes map to themselves; the other 68 (controls, space, 0x7F-0xA0, 0xAD) map to
/// U+0100.. in byte order, so every token is a printable, whitespace-free JSON string.
constexpr std::array<char32_t, 256> make_byte_to_code_point() {
    std::array<char32_t, 256> table{};
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        table[static_cast<std::size_t>(b)] = printable ? static_cast<char32_t>(b) : next++;
    }
    return table;
}

inline constexpr std::array<char32_t, 256> kByteToCodePoint = make_byte_to_code_point();
inline constexpr char32_t kByteLevelEnd = 256 + 68;  // code points of the alphabet are all below this

constexpr std::array<int, kByteLevelEnd> make_code_point_to_byte() {
    std::array<int, kByteLevelEnd> table{};
    for (auto& t : table) t = -1;
    for (int b = 0; b < 256; ++b) table[kByteToCodePoint[static_cast<std::size_t>(b)]] = b;
    return table;
}

inline constexpr std::array<int, kByteLevelEnd> kCodePointToByte = make_code_point_to_byte();

/// Raw bytes → the byte-level spelling used in tokenizer.json.
inline std::string byte_level_encode(std::string_view raw) {
    std::string out;
    out.reserve(raw.size() * 2);
    for (char c : raw) append_utf8(out, kByteToCodePoint[static_cast<unsigned char>(c)]);
    return out;
}

/// The byte-level spelling → raw bytes; nullopt if a character is outside the alphabet.
inline std::optional<std::string> byte_level_decode(std::string_view spelled) {
    std::string out;
    for (std::size_t i = 0; i < spelled.size();) {
        const Utf8Char u = decode_utf8(spelled, i);
        if (u.length == 0 || u.cp >= kByteLevelEnd || kCodePointToByte[u.cp] < 0) return std::nullopt;
        out += static_cast<char>(kCodePointToByte[u.cp]);
        i += u.length;
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// Character classes for the GPT-2 pattern

struct CodePointRange {
    char32_t first;
    char32_t last;
};

// \p{L} and \p{N} above ASCII: every code point of general category L* / N* in Unicode 14
// (Python 3.11's unicodedata), as ranges, where runs of unassigned code points between two
// members are folded into the range so that the table stays short. The approximation: code
// points assigned after Unicode 14, and unassigned ones inside a folded run, may be classed
// differently from HF's regex engine; that only moves pre-token boundaries, never what decodes.
//   regenerate: for cp in 0x80..0x10FFFF, group category(chr(cp))[0] == 'L' (or 'N'), folding 'Cn' gaps.
inline constexpr CodePointRange kLetterRanges[] = {
    {0xAA, 0xAA}, {0xB5, 0xB5}, {0xBA, 0xBA}, {0xC0, 0xD6}, {0xD8, 0xF6}, {0xF8, 0x2C1}, {0x2C6, 0x2D1},
    {0x2E0, 0x2E4}, {0x2EC, 0x2EC}, {0x2EE, 0x2EE}, {0x370, 0x374}, {0x376, 0x37D}, {0x37F, 0x37F},
    {0x386, 0x386}, {0x388, 0x3F5}, {0x3F7, 0x481}, {0x48A, 0x559}, {0x560, 0x588}, {0x5D0, 0x5F2},
    {0x620, 0x64A}, {0x66E, 0x66F}, {0x671, 0x6D3}, {0x6D5, 0x6D5}, {0x6E5, 0x6E6}, {0x6EE, 0x6EF},
    {0x6FA, 0x6FC}, {0x6FF, 0x6FF}, {0x710, 0x710}, {0x712, 0x72F}, {0x74D, 0x7A5}, {0x7B1, 0x7B1},
    {0x7CA, 0x7EA}, {0x7F4, 0x7F5}, {0x7FA, 0x7FA}, {0x800, 0x815}, {0x81A, 0x81A}, {0x824, 0x824},
    {0x828, 0x828}, {0x840, 0x858}, {0x860, 0x887}, {0x889, 0x88E}, {0x8A0, 0x8C9}, {0x904, 0x939},
    {0x93D, 0x93D}, {0x950, 0x950}, {0x958, 0x961}, {0x971, 0x980}, {0x985, 0x9B9}, {0x9BD, 0x9BD},
    {0x9CE, 0x9CE}, {0x9DC, 0x9E1}, {0x9F0, 0x9F1}, {0x9FC, 0x9FC}, {0xA05, 0xA39}, {0xA59, 0xA5E},
    {0xA72, 0xA74}, {0xA85, 0xAB9}, {0xABD, 0xABD}, {0xAD0, 0xAE1}, {0xAF9, 0xAF9}, {0xB05, 0xB39},
    {0xB3D, 0xB3D}, {0xB5C, 0xB61}, {0xB71, 0xB71}, {0xB83, 0xBB9}, {0xBD0, 0xBD0}, {0xC05, 0xC39},
    {0xC3D, 0xC3D}, {0xC58, 0xC61}, {0xC80, 0xC80}, {0xC85, 0xCB9}, {0xCBD, 0xCBD}, {0xCDD, 0xCE1},
    {0xCF1, 0xCF2}, {0xD04, 0xD3A}, {0xD3D, 0xD3D}, {0xD4E, 0xD4E}, {0xD54, 0xD56}, {0xD5F, 0xD61},
    {0xD7A, 0xD7F}, {0xD85, 0xDC6}, {0xE01, 0xE30}, {0xE32, 0xE33}, {0xE40, 0xE46}, {0xE81, 0xEB0},
    {0xEB2, 0xEB3}, {0xEBD, 0xEC6}, {0xEDC, 0xF00}, {0xF40, 0xF6C}, {0xF88, 0xF8C}, {0x1000, 0x102A},
    {0x103F, 0x103F}, {0x1050, 0x1055}, {0x105A, 0x105D}, {0x1061, 0x1061}, {0x1065, 0x1066}, {0x106E, 0x1070},
    {0x1075, 0x1081}, {0x108E, 0x108E}, {0x10A0, 0x10FA}, {0x10FC, 0x135A}, {0x1380, 0x138F}, {0x13A0, 0x13FD},
    {0x1401, 0x166C}, {0x166F, 0x167F}, {0x1681, 0x169A}, {0x16A0, 0x16EA}, {0x16F1, 0x1711}, {0x171F, 0x1731},
    {0x1740, 0x1751}, {0x1760, 0x1770}, {0x1780, 0x17B3}, {0x17D7, 0x17D7}, {0x17DC, 0x17DC}, {0x1820, 0x1884},
    {0x1887, 0x18A8}, {0x18AA, 0x191E}, {0x1950, 0x19C9}, {0x1A00, 0x1A16}, {0x1A20, 0x1A54}, {0x1AA7, 0x1AA7},
    {0x1B05, 0x1B33}, {0x1B45, 0x1B4C}, {0x1B83, 0x1BA0}, {0x1BAE, 0x1BAF}, {0x1BBA, 0x1BE5}, {0x1C00, 0x1C23},
    {0x1C4D, 0x1C4F}, {0x1C5A, 0x1C7D}, {0x1C80, 0x1CBF}, {0x1CE9, 0x1CEC}, {0x1CEE, 0x1CF3}, {0x1CF5, 0x1CF6},
    {0x1CFA, 0x1DBF}, {0x1E00, 0x1FBC}, {0x1FBE, 0x1FBE}, {0x1FC2, 0x1FCC}, {0x1FD0, 0x1FDB}, {0x1FE0, 0x1FEC},
    {0x1FF2, 0x1FFC}, {0x2071, 0x2071}, {0x207F, 0x207F}, {0x2090, 0x209C}, {0x2102, 0x2102}, {0x2107, 0x2107},
    {0x210A, 0x2113}, {0x2115, 0x2115}, {0x2119, 0x211D}, {0x2124, 0x2124}, {0x2126, 0x2126}, {0x2128, 0x2128},
    {0x212A, 0x212D}, {0x212F, 0x2139}, {0x213C, 0x213F}, {0x2145, 0x2149}, {0x214E, 0x214E}, {0x2183, 0x2184},
    {0x2C00, 0x2CE4}, {0x2CEB, 0x2CEE}, {0x2CF2, 0x2CF3}, {0x2D00, 0x2D6F}, {0x2D80, 0x2DDE}, {0x2E2F, 0x2E2F},
    {0x3005, 0x3006}, {0x3031, 0x3035}, {0x303B, 0x303C}, {0x3041, 0x3096}, {0x309D, 0x309F}, {0x30A1, 0x30FA},
    {0x30FC, 0x318E}, {0x31A0, 0x31BF}, {0x31F0, 0x31FF}, {0x3400, 0x4DBF}, {0x4E00, 0xA48C}, {0xA4D0, 0xA4FD},
    {0xA500, 0xA60C}, {0xA610, 0xA61F}, {0xA62A, 0xA66E}, {0xA67F, 0xA69D}, {0xA6A0, 0xA6E5}, {0xA717, 0xA71F},
    {0xA722, 0xA788}, {0xA78B, 0xA801}, {0xA803, 0xA805}, {0xA807, 0xA80A}, {0xA80C, 0xA822}, {0xA840, 0xA873},
    {0xA882, 0xA8B3}, {0xA8F2, 0xA8F7}, {0xA8FB, 0xA8FB}, {0xA8FD, 0xA8FE}, {0xA90A, 0xA925}, {0xA930, 0xA946},
    {0xA960, 0xA97C}, {0xA984, 0xA9B2}, {0xA9CF, 0xA9CF}, {0xA9E0, 0xA9E4}, {0xA9E6, 0xA9EF}, {0xA9FA, 0xAA28},
    {0xAA40, 0xAA42}, {0xAA44, 0xAA4B}, {0xAA60, 0xAA76}, {0xAA7A, 0xAA7A}, {0xAA7E, 0xAAAF}, {0xAAB1, 0xAAB1},
    {0xAAB5, 0xAAB6}, {0xAAB9, 0xAABD}, {0xAAC0, 0xAAC0}, {0xAAC2, 0xAADD}, {0xAAE0, 0xAAEA}, {0xAAF2, 0xAAF4},
    {0xAB01, 0xAB5A}, {0xAB5C, 0xAB69}, {0xAB70, 0xABE2}, {0xAC00, 0xD7FB}, {0xF900, 0xFB1D}, {0xFB1F, 0xFB28},
    {0xFB2A, 0xFBB1}, {0xFBD3, 0xFD3D}, {0xFD50, 0xFDC7}, {0xFDF0, 0xFDFB}, {0xFE70, 0xFEFC}, {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A}, {0xFF66, 0xFFDC}, {0x10000, 0x100FA}, {0x10280, 0x102D0}, {0x10300, 0x1031F},
    {0x1032D, 0x10340}, {0x10342, 0x10349}, {0x10350, 0x10375}, {0x10380, 0x1039D}, {0x103A0, 0x103CF},
    {0x10400, 0x1049D}, {0x104B0, 0x10563}, {0x10570, 0x10855}, {0x10860, 0x10876}, {0x10880, 0x1089E},
    {0x108E0, 0x108F5}, {0x10900, 0x10915}, {0x10920, 0x10939}, {0x10980, 0x109B7}, {0x109BE, 0x109BF},
    {0x10A00, 0x10A00}, {0x10A10, 0x10A35}, {0x10A60, 0x10A7C}, {0x10A80, 0x10A9C}, {0x10AC0, 0x10AC7},
    {0x10AC9, 0x10AE4}, {0x10B00, 0x10B35}, {0x10B40, 0x10B55}, {0x10B60, 0x10B72}, {0x10B80, 0x10B91},
    {0x10C00, 0x10CF2}, {0x10D00, 0x10D23}, {0x10E80, 0x10EA9}, {0x10EB0, 0x10F1C}, {0x10F27, 0x10F45},
    {0x10F70, 0x10F81}, {0x10FB0, 0x10FC4}, {0x10FE0, 0x10FF6}, {0x11003, 0x11037}, {0x11071, 0x11072},
    {0x11075, 0x11075}, {0x11083, 0x110AF}, {0x110D0, 0x110E8}, {0x11103, 0x11126}, {0x11144, 0x11144},
    {0x11147, 0x11172}, {0x11176, 0x11176}, {0x11183, 0x111B2}, {0x111C1, 0x111C4}, {0x111DA, 0x111DA},
    {0x111DC, 0x111DC}, {0x11200, 0x1122B}, {0x11280, 0x112A8}, {0x112B0, 0x112DE}, {0x11305, 0x11339},
    {0x1133D, 0x1133D}, {0x11350, 0x11350}, {0x1135D, 0x11361}, {0x11400, 0x11434}, {0x11447, 0x1144A},
    {0x1145F, 0x114AF}, {0x114C4, 0x114C5}, {0x114C7, 0x114C7}, {0x11580, 0x115AE}, {0x115D8, 0x115DB},
    {0x11600, 0x1162F}, {0x11644, 0x11644}, {0x11680, 0x116AA}, {0x116B8, 0x116B8}, {0x11700, 0x1171A},
    {0x11740, 0x1182B}, {0x118A0, 0x118DF}, {0x118FF, 0x1192F}, {0x1193F, 0x1193F}, {0x11941, 0x11941},
    {0x119A0, 0x119D0}, {0x119E1, 0x119E1}, {0x119E3, 0x119E3}, {0x11A00, 0x11A00}, {0x11A0B, 0x11A32},
    {0x11A3A, 0x11A3A}, {0x11A50, 0x11A50}, {0x11A5C, 0x11A89}, {0x11A9D, 0x11A9D}, {0x11AB0, 0x11C2E},
    {0x11C40, 0x11C40}, {0x11C72, 0x11C8F}, {0x11D00, 0x11D30}, {0x11D46, 0x11D46}, {0x11D60, 0x11D89},
    {0x11D98, 0x11D98}, {0x11EE0, 0x11EF2}, {0x11FB0, 0x11FB0}, {0x12000, 0x12399}, {0x12480, 0x12FF0},
    {0x13000, 0x1342E}, {0x14400, 0x16A5E}, {0x16A70, 0x16ABE}, {0x16AD0, 0x16AED}, {0x16B00, 0x16B2F},
    {0x16B40, 0x16B43}, {0x16B63, 0x16E7F}, {0x16F00, 0x16F4A}, {0x16F50, 0x16F50}, {0x16F93, 0x16FE1},
    {0x16FE3, 0x16FE3}, {0x17000, 0x1BC99}, {0x1D400, 0x1D6C0}, {0x1D6C2, 0x1D6DA}, {0x1D6DC, 0x1D6FA},
    {0x1D6FC, 0x1D714}, {0x1D716, 0x1D734}, {0x1D736, 0x1D74E}, {0x1D750, 0x1D76E}, {0x1D770, 0x1D788},
    {0x1D78A, 0x1D7A8}, {0x1D7AA, 0x1D7C2}, {0x1D7C4, 0x1D7CB}, {0x1DF00, 0x1DF1E}, {0x1E100, 0x1E12C},
    {0x1E137, 0x1E13D}, {0x1E14E, 0x1E14E}, {0x1E290, 0x1E2AD}, {0x1E2C0, 0x1E2EB}, {0x1E7E0, 0x1E8C4},
    {0x1E900, 0x1E943}, {0x1E94B, 0x1E94B}, {0x1EE00, 0x1EEBB}, {0x20000, 0x3134A},
};

inline constexpr CodePointRange kNumberRanges[] = {
    {0xB2, 0xB3}, {0xB9, 0xB9}, {0xBC, 0xBE}, {0x660, 0x669}, {0x6F0, 0x6F9}, {0x7C0, 0x7C9}, {0x966, 0x96F},
    {0x9E6, 0x9EF}, {0x9F4, 0x9F9}, {0xA66, 0xA6F}, {0xAE6, 0xAEF}, {0xB66, 0xB6F}, {0xB72, 0xB77},
    {0xBE6, 0xBF2}, {0xC66, 0xC6F}, {0xC78, 0xC7E}, {0xCE6, 0xCEF}, {0xD58, 0xD5E}, {0xD66, 0xD78},
    {0xDE6, 0xDEF}, {0xE50, 0xE59}, {0xED0, 0xED9}, {0xF20, 0xF33}, {0x1040, 0x1049}, {0x1090, 0x1099},
    {0x1369, 0x137C}, {0x16EE, 0x16F0}, {0x17E0, 0x17F9}, {0x1810, 0x1819}, {0x1946, 0x194F}, {0x19D0, 0x19DA},
    {0x1A80, 0x1A99}, {0x1B50, 0x1B59}, {0x1BB0, 0x1BB9}, {0x1C40, 0x1C49}, {0x1C50, 0x1C59}, {0x2070, 0x2070},
    {0x2074, 0x2079}, {0x2080, 0x2089}, {0x2150, 0x2182}, {0x2185, 0x2189}, {0x2460, 0x249B}, {0x24EA, 0x24FF},
    {0x2776, 0x2793}, {0x2CFD, 0x2CFD}, {0x3007, 0x3007}, {0x3021, 0x3029}, {0x3038, 0x303A}, {0x3192, 0x3195},
    {0x3220, 0x3229}, {0x3248, 0x324F}, {0x3251, 0x325F}, {0x3280, 0x3289}, {0x32B1, 0x32BF}, {0xA620, 0xA629},
    {0xA6E6, 0xA6EF}, {0xA830, 0xA835}, {0xA8D0, 0xA8D9}, {0xA900, 0xA909}, {0xA9D0, 0xA9D9}, {0xA9F0, 0xA9F9},
    {0xAA50, 0xAA59}, {0xABF0, 0xABF9}, {0xFF10, 0xFF19}, {0x10107, 0x10133}, {0x10140, 0x10178},
    {0x1018A, 0x1018B}, {0x102E1, 0x102FB}, {0x10320, 0x10323}, {0x10341, 0x10341}, {0x1034A, 0x1034A},
    {0x103D1, 0x103D5}, {0x104A0, 0x104A9}, {0x10858, 0x1085F}, {0x10879, 0x1087F}, {0x108A7, 0x108AF},
    {0x108FB, 0x108FF}, {0x10916, 0x1091B}, {0x109BC, 0x109BD}, {0x109C0, 0x109FF}, {0x10A40, 0x10A48},
    {0x10A7D, 0x10A7E}, {0x10A9D, 0x10A9F}, {0x10AEB, 0x10AEF}, {0x10B58, 0x10B5F}, {0x10B78, 0x10B7F},
    {0x10BA9, 0x10BAF}, {0x10CFA, 0x10CFF}, {0x10D30, 0x10E7E}, {0x10F1D, 0x10F26}, {0x10F51, 0x10F54},
    {0x10FC5, 0x10FCB}, {0x11052, 0x1106F}, {0x110F0, 0x110F9}, {0x11136, 0x1113F}, {0x111D0, 0x111D9},
    {0x111E1, 0x111F4}, {0x112F0, 0x112F9}, {0x11450, 0x11459}, {0x114D0, 0x114D9}, {0x11650, 0x11659},
    {0x116C0, 0x116C9}, {0x11730, 0x1173B}, {0x118E0, 0x118F2}, {0x11950, 0x11959}, {0x11C50, 0x11C6C},
    {0x11D50, 0x11D59}, {0x11DA0, 0x11DA9}, {0x11FC0, 0x11FD4}, {0x12400, 0x1246E}, {0x16A60, 0x16A69},
    {0x16AC0, 0x16AC9}, {0x16B50, 0x16B61}, {0x16E80, 0x16E96}, {0x1D2E0, 0x1D2F3}, {0x1D360, 0x1D378},
    {0x1D7CE, 0x1D7FF}, {0x1E140, 0x1E149}, {0x1E2F0, 0x1E2F9}, {0x1E8C7, 0x1E8CF}, {0x1E950, 0x1E959},
    {0x1EC71, 0x1ECAB}, {0x1ECAD, 0x1ECAF}, {0x1ECB1, 0x1ED2D}, {0x1ED2F, 0x1ED3D}, {0x1F100, 0x1F10C},
    {0x1FBF0, 0x1FBF9},
};

/// White_Space, which is what \s means in the regex engines HF and GPT-2 use.
inline bool is_unicode_space(char32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

inline bool in_ranges(std::span<const CodePointRange> ranges, char32_t c) {
    auto it = std::upper_bound(ranges.begin(), ranges.end(), c,
                               [](char32_t x, const CodePointRange& r) { return x < r.first; });
    return it != ranges.begin() && c <= std::prev(it)->last;
}

enum class CharClass { kLetter, kNumber, kSpace, kOther };

struct ClassifiedChar {
    CharClass cls;
    std::size_t length;  // bytes
};

/// The class of the character at `pos`; an invalid UTF-8 byte is one "other" character.
inline ClassifiedChar classify_at(std::string_view s, std::size_t pos) {
    const auto b = static_cast<unsigned char>(s[pos]);
    if (b < 0x80) {
        if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) return {CharClass::kLetter, 1};
        if (b >= '0' && b <= '9') return {CharClass::kNumber, 1};
        if (is_unicode_space(b)) return {CharClass::kSpace, 1};
        return {CharClass::kOther, 1};
    }
    const Utf8Char u = decode_utf8(s, pos);
    if (u.length == 0) return {CharClass::kOther, 1};
    if (in_ranges(kLetterRanges, u.cp)) return {CharClass::kLetter, u.length};
    if (in_ranges(kNumberRanges, u.cp)) return {CharClass::kNumber, u.length};
    if (is_unicode_space(u.cp)) return {CharClass::kSpace, u.length};
    return {CharClass::kOther, u.length};
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenization

/// Calls emit(std::string_view) for each GPT-2 pre-token of `text`, in order; the pieces
/// concatenate back to `text`. Hand-written equivalent of the pattern at the top of this file.
template <class Emit>
void for_each_pretoken(std::string_view text, Emit&& emit) {
    const std::size_t n = text.size();
    std::size_t i = 0;
    // The end of the run of characters of class `cls` starting at `pos`.
    auto run_end = [&](std::size_t pos, CharClass cls) {
        while (pos < n) {
            const ClassifiedChar c = classify_at(text, pos);
            if (c.cls != cls) break;
            pos += c.length;
        }
        return pos;
    };
    while (i < n) {
        // 's 't 're 've 'm 'll 'd — case-sensitive, as in GPT-2.
        if (text[i] == '\'' && i + 1 < n) {
            std::size_t len = 0;
            const char c1 = text[i + 1];
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') len = 2;
            else if (i + 2 < n && ((c1 == 'r' && text[i + 2] == 'e') || (c1 == 'v' && text[i + 2] == 'e') ||
                                   (c1 == 'l' && text[i + 2] == 'l')))
                len = 3;
            if (len > 0) {
                emit(text.substr(i, len));
                i += len;
                continue;
            }
        }
        const ClassifiedChar first = classify_at(text, i);
        // " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+": an optional leading U+0020 then a run.
        std::size_t start = i;
        CharClass cls = first.cls;
        if (text[i] == ' ' && i + 1 < n) {
            const CharClass next = classify_at(text, i + 1).cls;
            if (next != CharClass::kSpace) {
                cls = next;
                start = i + 1;
            }
        }
        if (cls != CharClass::kSpace) {
            const std::size_t end = run_end(start, cls);
            emit(text.substr(i, end - i));
            i = end;
            continue;
        }
        // "\s+(?!\S)|\s+": a whitespace run, less its last character when a non-space follows
        // (that character then leads the next pre-token), unless the run is one character.
        std::size_t end = i;
        std::size_t last_start = i;
        while (end < n) {
            const ClassifiedChar c = classify_at(text, end);
            if (c.cls != CharClass::kSpace) break;
            last_start = end;
            end += c.length;
        }
        if (end < n && last_start > i) end = last_start;
        emit(text.substr(i, end - i));
        i = end;
    }
}

/// The pre-tokens of `text` as views into it.
inline std::vector<std::string_view> pretokenize(std::string_view text) {
    std::vector<std::string_view> out;
    for_each_pretoken(text, [&](std::string_view piece) { out.push_back(piece); });
    return out;
}

/// Calls emit(std::string_view) for each Llama-3 pre-token of `text`; hand-written equivalent of
///   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
/// with the alternatives tried in that order at each position (leftmost-first, as HF's regex does).
/// Qwen2's pattern is the same with \p{N} for \p{N}{1,3}: max_digits 1.
template <class Emit>
void for_each_pretoken_llama3(std::string_view text, Emit&& emit, std::size_t max_digits = 3) {
    const std::size_t n = text.size();
    auto is_newline = [&](std::size_t pos) { return pos < n && (text[pos] == '\r' || text[pos] == '\n'); };
    auto class_at = [&](std::size_t pos) { return pos < n ? classify_at(text, pos).cls : CharClass::kSpace; };
    auto run_end = [&](std::size_t pos, CharClass cls, std::size_t max_chars) {
        for (std::size_t k = 0; pos < n && k < max_chars; ++k) {
            const ClassifiedChar c = classify_at(text, pos);
            if (c.cls != cls) break;
            pos += c.length;
        }
        return pos;
    };
    // Length of a case-insensitive ASCII letter at `pos` equal to `lower`; U+017F (long s) folds to 's'.
    auto letter_len = [&](std::size_t pos, char lower) -> std::size_t {
        if (pos >= n) return 0;
        if ((text[pos] | 0x20) == lower && std::isalpha(static_cast<unsigned char>(text[pos]))) return 1;
        if (lower == 's' && text.substr(pos, 2) == "\xC5\xBF") return 2;
        return 0;
    };
    std::size_t i = 0;
    auto take = [&](std::size_t end) {
        emit(text.substr(i, end - i));
        i = end;
    };
    while (i < n) {
        // (?i:'s|'t|'re|'ve|'m|'ll|'d)
        if (text[i] == '\'') {
            std::size_t len = 0;
            for (char c : {'s', 't', 'm', 'd'})
                if (!len) len = letter_len(i + 1, c);
            if (len) len += 1;
            for (const char* two : {"re", "ve", "ll"}) {
                if (len) break;
                if (const std::size_t a = letter_len(i + 1, two[0]))
                    if (const std::size_t b = letter_len(i + 1 + a, two[1])) len = 1 + a + b;
            }
            if (len) {
                take(i + len);
                continue;
            }
        }
        const ClassifiedChar first = classify_at(text, i);
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if (first.cls == CharClass::kLetter) {
            take(run_end(i, CharClass::kLetter, n));
            continue;
        }
        if (first.cls != CharClass::kNumber && !is_newline(i) && class_at(i + first.length) == CharClass::kLetter) {
            take(run_end(i + first.length, CharClass::kLetter, n));
            continue;
        }
        // \p{N}{1,3} (Qwen2: \p{N})
        if (first.cls == CharClass::kNumber) {
            take(run_end(i, CharClass::kNumber, max_digits));
            continue;
        }
        //  ?[^\s\p{L}\p{N}]+[\r\n]*
        const std::size_t start = text[i] == ' ' && class_at(i + 1) == CharClass::kOther ? i + 1 : i;
        if (class_at(start) == CharClass::kOther) {
            std::size_t end = run_end(start, CharClass::kOther, n);
            while (is_newline(end)) ++end;
            take(end);
            continue;
        }
        // A whitespace run: \s*[\r\n]+ ends after its last newline; \s+(?!\S) leaves out the last
        // character when a non-space follows (and the run has more than one); \s+ takes it all.
        std::size_t end = i;
        std::size_t last_start = i;
        std::size_t after_newline = 0;
        while (end < n) {
            const ClassifiedChar c = classify_at(text, end);
            if (c.cls != CharClass::kSpace) break;
            last_start = end;
            end += c.length;
            if (is_newline(last_start)) after_newline = end;
        }
        if (after_newline) end = after_newline;
        else if (end < n && last_start > i) end = last_start;
        take(end);
    }
}

/// Dispatches to the GPT-2, Llama-3 or Qwen2 pre-tokenizer.
template <class Emit>
void for_each_pretoken(std::string_view text, SplitPattern pattern, Emit&& emit) {
    if (pattern == SplitPattern::kLlama3) for_each_pretoken_llama3(text, emit);
    else if (pattern == SplitPattern::kQwen2) for_each_pretoken_llama3(text, emit, 1);
    else for_each_pretoken(text, emit);
}

/// The three Split patterns specdec hand-codes, as tokenizer.json spells them.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
inline constexpr std::string_view kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

/// The byte of a SentencePiece byte-fallback token "<0xNN>", or -1 for any other token.
inline int byte_fallback_value(std::string_view token) {
    if (token.size() != 6 || !token.starts_with("<0x") || token[5] != '>') return -1;
    auto hex = [](char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        return -1;
    };
    const int hi = hex(token[3]);
    const int lo = hex(token[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/// A SentencePiece-style vocab key as the raw bytes it decodes to: "<0xNN>" is the byte,
/// otherwise "▁" is a space (the decoder's Replace and ByteFallback steps).
inline std::string sentencepiece_decode(std::string_view token) {
    if (const int b = byte_fallback_value(token); b >= 0) return std::string(1, static_cast<char>(b));
    std::string out;
    for (std::size_t i = 0; i < token.size();) {
        if (token.substr(i, 3) == "\xE2\x96\x81") {
            out += ' ';
            i += 3;
        } else {
            out += token[i++];
        }
    }
    return out;
}

/// Cuts `text` at literal occurrences of `literals` (leftmost, then longest): calls on_text(view)
/// for each non-empty stretch between them and on_literal(index) for each occurrence. Each
/// literal's next position is cached, so many occurrences cost O(n) per literal, not O(n^2).
template <class OnText, class OnLiteral>
void split_on_literals(std::string_view text, std::span<const std::string_view> literals, OnText&& on_text,
                       OnLiteral&& on_literal) {
    constexpr std::size_t kNone = std::string_view::npos;
    std::vector<std::size_t> next(literals.size(), 0);
    std::vector<char> searched(literals.size(), 0);
    std::size_t pos = 0;
    while (pos < text.size()) {
        std::size_t best_at = kNone;
        std::size_t best = kNone;
        for (std::size_t k = 0; k < literals.size(); ++k) {
            if (literals[k].empty()) continue;
            if (!searched[k] || next[k] < pos) {
                next[k] = text.find(literals[k], pos);
                searched[k] = 1;
            }
            if (next[k] == kNone) continue;
            if (next[k] < best_at || (next[k] == best_at && literals[k].size() > literals[best].size())) {
                best_at = next[k];
                best = k;
            }
        }
        if (best == kNone) {
            on_text(text.substr(pos));
            return;
        }
        if (best_at > pos) on_text(text.substr(pos, best_at - pos));
        on_literal(best);
        pos = best_at + literals[best].size();
    }
}

/// Key of a token pair in hash maps.
inline std::uint64_t pair_key(int left, int right) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(left)) << 32) | static_cast<std::uint32_t>(right);
}

}  // namespace specdec::detail

namespace specdec {

// ---------------------------------------------------------------------------------------------
// Tokenizer

/// The two kinds of BPE that HF tokenizer.json files of Llama-family models use.
enum class TokenizerKind {
    kByteLevel,      // GPT-2 / Llama-3: text as bytes in the GPT-2 alphabet, split by a pre-tokenizer regex
    kSentencePiece,  // Llama-2 / Mistral / TinyLlama: "▁" for spaces, characters, <0xNN> byte fallback
};

/// A BPE tokenizer compatible with HuggingFace tokenizer.json, of either kind:
///  - byte-level (GPT-2's ByteLevel pre-tokenizer, or a Split with the GPT-2, Llama-3 or Qwen2 pattern
///    followed by ByteLevel), `ignore_merges` honoured, the NFC normalizer (Qwen's) applied;
///  - SentencePiece-style (normalizer Prepend("▁") + Replace(" " -> "▁"), or a Metaspace
///    pre-tokenizer), characters as symbols, byte fallback to <0xNN>, unk, and the decoder
///    Replace/ByteFallback/Fuse/Strip (or Metaspace).
/// Added tokens are cut out first and never split. Tokens are raw byte strings: id_to_token(id) of
/// "Ġthe" or "▁the" in the file is " the", of "<0x0A>" is "\n". Encoding is const and thread-safe.
///
///     encode(text)              the text's ids only (what HF gives with add_special_tokens=False)
///     encode_with_special(text) with the post_processor's template around them: <s> for Llama-2 and
///                               Mistral, <|begin_of_text|> where a Llama-3 file's template says so
///     bos_id()                  the template's first special token, if any
///     decode(ids)               the decoder's text: raw bytes (not necessarily UTF-8 where ids split
///                               a character; HF would print U+FFFD there); a SentencePiece-style
///                               decoder drops one leading space of the whole text, so to stream,
///                               concatenate id_to_token(id) instead
class Tokenizer {
public:
    /// Trains merges on `corpus` until the vocab has `vocab_size` tokens or no adjacent pair is
    /// left. Ids: special tokens first, then the 256 bytes in byte-level
    /// alphabet order, then one per merge (HF's trainer layout). Deterministic: the most frequent
    /// pair wins, ties go to the pair whose (left, right) token byte strings sort first.
    static Tokenizer train(std::string_view corpus, int vocab_size,
                           std::vector<std::string> special_tokens = {"<|endoftext|>"});

    /// Reads a HuggingFace tokenizer.json of either kind; unsupported settings (other normalizers and
    /// pre-tokenizers, Split patterns other than GPT-2's and Llama-3's, subword prefixes, ...) are
    /// refused with the field named rather than silently ignored.
    static Tokenizer load(const std::filesystem::path& path);
    static Tokenizer from_json(std::string_view text, std::string_view origin = "tokenizer.json");
    /// Writes tokenizer.json in the HF schema (written to "<path>.tmp", then renamed).
    void save(const std::filesystem::path& path) const;
    std::string to_json() const;

    std::vector<int> encode(std::string_view text) const;
    /// encode(text) inside the post_processor's template (TemplateProcessing's `single`).
    std::vector<int> encode_with_special(std::string_view text) const;
    /// The concatenated bytes of the tokens, less the leading space a SentencePiece decoder strips.
    std::string decode(std::span<const int> ids) const;

    TokenizerKind kind() const { return kind_; }
    /// The first id the template puts before the text (<s>, <|begin_of_text|>); nullopt if none.
    std::optional<int> bos_id() const;

    int vocab_size() const { return static_cast<int>(tokens_.size()); }
    int n_merges() const { return static_cast<int>(merges_.size()); }
    /// Id of a token given as raw bytes (an added token by its content); nullopt if absent.
    std::optional<int> token_to_id(std::string_view token) const;
    /// Raw bytes of a token (the content of an added token).
    const std::string& id_to_token(int id) const;
    bool is_special(int id) const;
    /// "<|endoftext|>", "</s>" or "<|end_of_text|>" if present, else the first special token;
    /// throws when there is none.
    int eos_id() const;

private:
    Tokenizer() = default;  // only the factories make one: every Tokenizer holds a usable vocab

    struct AddedToken {
        std::string content;
        int id = 0;
        bool special = true;
    };
    struct MergeRule {
        int rank = 0;
        int id = 0;  // the merged token
    };

    [[noreturn]] void fail(const std::string& what) const { detail::fail("tokenizer", origin_ + ": " + what); }
    void check_id(int id, std::string_view where) const;
    int add_regular_token(std::string bytes);
    void add_merge(int left, int right, int merged);
    void encode_pretoken(std::string_view piece, std::vector<int>& out) const;
    void encode_sentencepiece_word(std::string_view word, std::vector<int>& out) const;
    void merge_symbols(const std::vector<int>& symbols, std::vector<int>& out) const;
    void read_sentencepiece_config(const json::Value& root);
    void read_post_processor(const json::Value& root);

    std::string origin_ = "tokenizer";
    std::vector<std::string> tokens_;                      // (V) raw bytes, or added-token content
    std::vector<signed char> added_;                       // (V) 1 for added tokens
    std::unordered_map<std::string, int> regular_ids_;     // raw bytes -> id, BPE tokens only
    std::vector<AddedToken> added_tokens_;                 // in id order
    std::array<int, 256> byte_ids_{};                      // single-byte token ids, -1 if absent
    std::vector<std::pair<int, int>> merges_;              // (M) by rank
    std::unordered_map<std::uint64_t, MergeRule> merge_rules_;  // pair_key(left, right) -> rule
    bool ignore_merges_ = false;                           // HF option: whole pre-token in vocab wins
    TokenizerKind kind_ = TokenizerKind::kByteLevel;
    detail::SplitPattern pattern_ = detail::SplitPattern::kGpt2;  // byte-level only
    bool nfc_ = false;                                     // byte-level only: the NFC normalizer (Qwen's files)
    std::vector<int> template_prefix_;                     // ids the post_processor puts before the text
    std::vector<int> template_suffix_;                     // ... and after it
    // SentencePiece-style only. regular_ids_ is keyed by the file's spelling ("▁the") and byte_ids_
    // holds the <0xNN> tokens.
    bool prepend_always_ = false;    // Prepend normalizer / Metaspace "always": "▁" before each stretch
    bool prepend_first_ = false;     // Metaspace "first": only before a stretch at the start of the text
    bool prepend_unless_space_ = false;  // Metaspace: not when the stretch already starts with "▁"
    bool split_on_space_ = false;    // Metaspace split: each "▁" starts a new word
    bool words_end_before_marker_ = false;  // "▁" is a token and no merge joins "..x" + "▁..": cutting there is exact
    bool byte_fallback_ = false;
    bool fuse_unk_ = false;
    int unk_id_ = -1;
    int strip_leading_spaces_ = 0;   // the decoder's Strip(" ", start)
    std::vector<std::string> spellings_;  // (V) vocab keys, for to_json
    // The file's own settings, written back by to_json (null for GPT-2 byte-level ones).
    json::Value normalizer_json_, pre_tokenizer_json_, post_processor_json_, decoder_json_;
    json::Value unk_token_json_;
};

/// `t` as a TextCodec (a drafter of another tokenizer drafts through it: policies/text_bridge.hpp); it
/// refers to `t`, which must outlive it. Ids outside the tokenizer (a model's padding rows) and special
/// tokens have no text. `with_special`: encode adds the post_processor's template, the BOS a model
/// reading a text from its start was trained with.
inline TextCodec text_codec(const Tokenizer& t, bool with_special = false) {
    const auto no_text = [&t](int id) { return id < 0 || id >= t.vocab_size() || t.is_special(id); };
    return {.decode =
                [&t, no_text](std::span<const int> ids) {
                    std::vector<int> kept;
                    for (const int id : ids)
                        if (!no_text(id)) kept.push_back(id);
                    return t.decode(kept);
                },
            .encode = [&t, with_special](std::string_view s) { return with_special ? t.encode_with_special(s) : t.encode(s); },
            .special = no_text};
}

#if SPECDEC_BODIES  // compiled once where a program links specdec::compiled

SPECDEC_INLINE void Tokenizer::check_id(int id, std::string_view where) const {
    if (id < 0 || id >= vocab_size())
        fail(std::string(where) + ": id " + std::to_string(id) + " is out of range (vocab size " +
             std::to_string(vocab_size()) + ")");
}

SPECDEC_INLINE int Tokenizer::add_regular_token(std::string bytes) {
    const int id = vocab_size();
    if (bytes.size() == 1) byte_ids_[static_cast<unsigned char>(bytes[0])] = id;
    regular_ids_.emplace(bytes, id);
    tokens_.push_back(std::move(bytes));
    added_.push_back(0);
    return id;
}

SPECDEC_INLINE void Tokenizer::add_merge(int left, int right, int merged) {
    merge_rules_.emplace(detail::pair_key(left, right), MergeRule{static_cast<int>(merges_.size()), merged});
    merges_.emplace_back(left, right);
}

SPECDEC_INLINE std::optional<int> Tokenizer::token_to_id(std::string_view token) const {
    for (const AddedToken& a : added_tokens_)
        if (a.content == token) return a.id;
    if (kind_ == TokenizerKind::kByteLevel) {
        auto it = regular_ids_.find(std::string(token));
        return it == regular_ids_.end() ? std::nullopt : std::optional<int>(it->second);
    }
    std::string spelled;  // SentencePiece-style vocab keys spell spaces as "▁"
    for (char c : token) {
        if (c == ' ') spelled += "\xE2\x96\x81";
        else spelled += c;
    }
    if (auto it = regular_ids_.find(spelled); it != regular_ids_.end()) return it->second;
    if (token.size() == 1 && byte_ids_[static_cast<unsigned char>(token[0])] >= 0)
        return byte_ids_[static_cast<unsigned char>(token[0])];
    // A key with a literal space (no real file has one; ids must still round-trip).
    if (auto it = regular_ids_.find(std::string(token)); it != regular_ids_.end()) return it->second;
    return std::nullopt;
}

SPECDEC_INLINE const std::string& Tokenizer::id_to_token(int id) const {
    check_id(id, "id_to_token");
    return tokens_[static_cast<std::size_t>(id)];
}

SPECDEC_INLINE bool Tokenizer::is_special(int id) const {
    check_id(id, "is_special");
    for (const AddedToken& a : added_tokens_)
        if (a.id == id) return a.special;
    return false;
}

SPECDEC_INLINE int Tokenizer::eos_id() const {
    for (std::string_view name : {"<|endoftext|>", "</s>", "<|end_of_text|>"})
        for (const AddedToken& a : added_tokens_)
            if (a.content == name) return a.id;
    for (const AddedToken& a : added_tokens_)
        if (a.special) return a.id;
    fail("eos_id: the tokenizer has no special tokens");
}

// ---------------------------------------------------------------------------------------------
// Encoding and decoding

SPECDEC_INLINE void Tokenizer::encode_pretoken(std::string_view piece, std::vector<int>& out) const {
    if (piece.empty()) return;
    if (ignore_merges_ || piece.size() == 1) {
        if (auto it = regular_ids_.find(std::string(piece)); it != regular_ids_.end()) {
            out.push_back(it->second);
            return;
        }
    }
    std::vector<int> symbols(piece.size());
    for (std::size_t i = 0; i < piece.size(); ++i) {
        const int id = byte_ids_[static_cast<unsigned char>(piece[i])];
        if (id < 0)
            fail("encode: byte " + detail::hex_byte(static_cast<unsigned char>(piece[i])) +
                 " has no token in the vocab (a byte-level vocab needs all 256)");
        symbols[i] = id;
    }
    merge_symbols(symbols, out);
}

/// One SentencePiece-style word (already "▁"-spelled): each character is a symbol when the vocab
/// has it, else its bytes as <0xNN> tokens (byte fallback), else unk (consecutive unks fused when
/// the file says fuse_unk); then the merges, as HF's BPE model does.
SPECDEC_INLINE void Tokenizer::encode_sentencepiece_word(std::string_view word, std::vector<int>& out) const {
    if (word.empty()) return;
    if (ignore_merges_)
        if (auto it = regular_ids_.find(std::string(word)); it != regular_ids_.end()) {
            out.push_back(it->second);
            return;
        }
    std::vector<int> symbols;
    symbols.reserve(word.size());
    bool last_unk = false;
    for (std::size_t i = 0; i < word.size();) {
        const detail::Utf8Char u = detail::decode_utf8(word, i);
        const std::size_t len = u.length == 0 ? 1 : u.length;  // an invalid byte is a character of its own
        const std::string ch(word.substr(i, len));
        i += len;
        if (auto it = regular_ids_.find(ch); it != regular_ids_.end()) {
            symbols.push_back(it->second);
            last_unk = false;
        } else if (byte_fallback_) {
            for (char c : ch) symbols.push_back(byte_ids_[static_cast<unsigned char>(c)]);
            last_unk = false;
        } else {
            if (unk_id_ < 0) fail("encode: character '" + ch + "' is not in the vocab and the file has no unk_token");
            if (!(fuse_unk_ && last_unk)) symbols.push_back(unk_id_);
            last_unk = true;
        }
    }
    merge_symbols(symbols, out);
}

SPECDEC_INLINE void Tokenizer::merge_symbols(const std::vector<int>& ids, std::vector<int>& out) const {
    // Symbols form a linked list; a min-heap of candidate merges ordered by (rank, position)
    // gives HF's merge order in O(n log n) even for a hostile 1 MB run of letters.
    struct Symbol {
        int id;
        int prev;
        int next;
    };
    struct Candidate {
        int rank;
        int left;  // symbol index
        int right;
        int left_id;
        int right_id;
        bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
    };
    if (ids.empty()) return;
    std::vector<Symbol> symbols(ids.size());
    for (std::size_t i = 0; i < ids.size(); ++i)
        symbols[i] = {ids[i], static_cast<int>(i) - 1, i + 1 < ids.size() ? static_cast<int>(i) + 1 : -1};
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    auto consider = [&](int left) {
        if (left < 0) return;
        const int right = symbols[static_cast<std::size_t>(left)].next;
        if (right < 0) return;
        const int left_id = symbols[static_cast<std::size_t>(left)].id;
        const int right_id = symbols[static_cast<std::size_t>(right)].id;
        if (auto it = merge_rules_.find(detail::pair_key(left_id, right_id)); it != merge_rules_.end())
            heap.push({it->second.rank, left, right, left_id, right_id});
    };
    for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i);
    while (!heap.empty()) {
        const Candidate c = heap.top();
        heap.pop();
        Symbol& left = symbols[static_cast<std::size_t>(c.left)];
        if (left.id != c.left_id || left.next != c.right) continue;  // stale: a neighbour merged first
        Symbol& right = symbols[static_cast<std::size_t>(c.right)];
        if (right.id != c.right_id) continue;
        left.id = merge_rules_.at(detail::pair_key(c.left_id, c.right_id)).id;
        left.next = right.next;
        if (right.next >= 0) symbols[static_cast<std::size_t>(right.next)].prev = c.left;
        right.id = -1;
        consider(left.prev);
        consider(c.left);
    }
    for (int i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) out.push_back(symbols[static_cast<std::size_t>(i)].id);
}

SPECDEC_INLINE std::vector<int> Tokenizer::encode(std::string_view text) const {
    std::vector<int> out;
    // Pre-tokens repeat a lot in running text; cache them for this call only (keeps encode const
    // and thread-safe). Keys view into `text`.
    std::unordered_map<std::string_view, std::pair<std::size_t, std::size_t>> cache;  // piece -> [begin, end) in out
    auto encode_cached = [&](std::string_view piece) {
        if (auto it = cache.find(piece); it != cache.end()) {
            const auto [begin, end] = it->second;
            for (std::size_t k = begin; k < end; ++k) out.push_back(out[k]);
            return;
        }
        const std::size_t begin = out.size();
        if (kind_ == TokenizerKind::kByteLevel) encode_pretoken(piece, out);
        else encode_sentencepiece_word(piece, out);
        cache.emplace(piece, std::pair{begin, out.size()});
    };
    static constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // U+2581 "▁"
    std::deque<std::string> normalized_stretches;  // the cache's keys view into them
    auto encode_plain = [&](std::string_view segment) {
        if (kind_ == TokenizerKind::kByteLevel) {
            // HF normalizes each stretch between added tokens (those not marked "normalized"), then splits.
            const std::string_view normalized = nfc_ ? std::string_view(normalized_stretches.emplace_back(detail::nfc(segment))) : segment;
            detail::for_each_pretoken(normalized, pattern_, encode_cached);
            return;
        }
        // SentencePiece-style: spaces become "▁", one "▁" is prepended (normalizer Prepend: before
        // every stretch between added tokens; Metaspace: unless it starts with "▁", and with
        // prepend_scheme "first" only at the start of the text), then BPE over the whole stretch
        // (or over each "▁"-led word when Metaspace splits).
        std::string& normalized = normalized_stretches.emplace_back();
        normalized.reserve(segment.size() + 8);
        for (char c : segment) {
            if (c == ' ') normalized += kSpaceMarker;
            else normalized += c;
        }
        const bool at_start = segment.data() == text.data();
        const bool prepend = (prepend_always_ || (prepend_first_ && at_start)) &&
                             !(prepend_unless_space_ && normalized.starts_with(kSpaceMarker));
        if (prepend) normalized.insert(0, kSpaceMarker);
        if (!split_on_space_ && !words_end_before_marker_) {
            encode_sentencepiece_word(normalized, out);
            return;
        }
        // Metaspace's split cuts before every "▁"; without it, a file whose merges never join a
        // symbol ending in another character to one starting with "▁" gives the same ids when cut
        // before each "▁" that follows another character, and the cut words repeat (the cache).
        const std::string_view all(normalized);
        std::size_t begin = 0;
        while (begin < all.size()) {
            std::size_t end = all.find(kSpaceMarker, begin + 1);
            if (!split_on_space_)
                while (end != std::string_view::npos && end >= begin + 3 && all.substr(end - 3, 3) == kSpaceMarker)
                    end = all.find(kSpaceMarker, end + 3);
            if (end == std::string_view::npos) end = all.size();
            encode_cached(all.substr(begin, end - begin));
            begin = end;
        }
    };
    // Added tokens are matched literally before pre-tokenization, leftmost then longest.
    std::vector<std::string_view> literals;
    for (const AddedToken& a : added_tokens_) literals.push_back(a.content);
    detail::split_on_literals(text, literals, encode_plain, [&](std::size_t k) { out.push_back(added_tokens_[k].id); });
    return out;
}

SPECDEC_INLINE std::vector<int> Tokenizer::encode_with_special(std::string_view text) const {
    std::vector<int> out = template_prefix_;
    const std::vector<int> body = encode(text);
    out.insert(out.end(), body.begin(), body.end());
    out.insert(out.end(), template_suffix_.begin(), template_suffix_.end());
    return out;
}

SPECDEC_INLINE std::optional<int> Tokenizer::bos_id() const {
    if (template_prefix_.empty()) return std::nullopt;
    return template_prefix_.front();
}

SPECDEC_INLINE std::string Tokenizer::decode(std::span<const int> ids) const {
    std::string out;
    for (int id : ids) {
        check_id(id, "decode");
        out += tokens_[static_cast<std::size_t>(id)];
    }
    std::size_t strip = 0;  // the decoder's Strip: up to `start` leading spaces of the fused text
    while (strip < out.size() && strip < static_cast<std::size_t>(strip_leading_spaces_) && out[strip] == ' ') ++strip;
    return out.erase(0, strip);
}

// ---------------------------------------------------------------------------------------------
// Training

namespace detail {

/// Word-level state of BPE training (Sennrich et al. 2016, §3.2, with the incremental pair
/// counts of HF's BpeTrainer): unique pre-tokens with their counts, the count of every adjacent
/// pair, and for each pair the words that (may) contain it, so a merge only revisits those.
class BpeTrainer {
public:
    BpeTrainer(const std::vector<std::string>& tokens) : tokens_(tokens) {}

    void add_words(const std::unordered_map<std::string_view, std::int64_t>& counts, const std::array<int, 256>& byte_ids) {
        std::vector<std::pair<std::string_view, std::int64_t>> sorted(counts.begin(), counts.end());
        std::sort(sorted.begin(), sorted.end());  // word order must not depend on hashing
        for (const auto& [word, count] : sorted) {
            std::vector<int> symbols;
            symbols.reserve(word.size());
            for (char c : word) symbols.push_back(byte_ids[static_cast<unsigned char>(c)]);
            const int w = static_cast<int>(words_.size());
            for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
                const std::uint64_t key = pair_key(symbols[i], symbols[i + 1]);
                pair_counts_[key] += count;
                where_[key].push_back(w);
            }
            words_.push_back(std::move(symbols));
            word_counts_.push_back(count);
        }
        for (const auto& [key, count] : pair_counts_) heap_.push({count, key});
    }

    struct Best {
        int left = -1;
        int right = -1;
    };

    /// The most frequent pair still present (ties: byte strings of (left, right) sort first),
    /// skipping pairs in `banned`; {-1, -1} when no pair is left.
    Best pop_best(const std::unordered_set<std::uint64_t>& banned) {
        while (!heap_.empty()) {
            const Entry top = heap_.top();
            heap_.pop();
            auto it = pair_counts_.find(top.key);
            const std::int64_t current = it == pair_counts_.end() ? 0 : it->second;
            if (current <= 0 || banned.contains(top.key)) continue;
            if (current != top.count) {  // stale: the count dropped since this entry was pushed
                heap_.push({current, top.key});
                continue;
            }
            return {static_cast<int>(top.key >> 32), static_cast<int>(top.key & 0xFFFFFFFFu)};
        }
        return {};
    }

    /// Replaces every (left, right) by `merged` in the words that contain it, updating counts.
    void apply_merge(int left, int right, int merged) {
        const std::uint64_t merged_key = pair_key(left, right);
        std::vector<int> affected = std::move(where_[merged_key]);
        where_.erase(merged_key);
        std::sort(affected.begin(), affected.end());
        affected.erase(std::unique(affected.begin(), affected.end()), affected.end());

        delta_.clear();
        std::vector<int> rewritten;
        for (int w : affected) {
            std::vector<int>& s = words_[static_cast<std::size_t>(w)];
            const std::int64_t count = word_counts_[static_cast<std::size_t>(w)];
            rewritten.clear();
            for (std::size_t i = 0; i < s.size();) {
                if (i + 1 < s.size() && s[i] == left && s[i + 1] == right) {
                    // The pairs around the occurrence change: (prev, left) becomes (prev, merged)
                    // and (right, next) becomes (merged, next).
                    if (!rewritten.empty()) {
                        delta_[pair_key(rewritten.back(), left)] -= count;
                        add_delta(pair_key(rewritten.back(), merged), count, w);
                    }
                    if (i + 2 < s.size()) {
                        delta_[pair_key(right, s[i + 2])] -= count;
                        add_delta(pair_key(merged, s[i + 2]), count, w);
                    }
                    delta_[merged_key] -= count;
                    rewritten.push_back(merged);
                    i += 2;
                } else {
                    rewritten.push_back(s[i]);
                    i += 1;
                }
            }
            s.assign(rewritten.begin(), rewritten.end());
        }
        for (const auto& [key, d] : delta_) {
            if (d == 0) continue;
            std::int64_t& count = pair_counts_[key];
            count += d;
            if (count <= 0) {
                pair_counts_.erase(key);
                where_.erase(key);
            } else if (d > 0) {
                heap_.push({count, key});
            }
        }
    }

private:
    struct Entry {
        std::int64_t count;
        std::uint64_t key;
    };
    struct EntryOrder {
        const std::vector<std::string>* tokens;
        /// "a < b" for a max-heap: lower count, then the lexicographically later pair, ranks lower.
        bool operator()(const Entry& a, const Entry& b) const {
            if (a.count != b.count) return a.count < b.count;
            const std::string& al = (*tokens)[a.key >> 32];
            const std::string& bl = (*tokens)[b.key >> 32];
            if (al != bl) return al > bl;
            return (*tokens)[a.key & 0xFFFFFFFFu] > (*tokens)[b.key & 0xFFFFFFFFu];
        }
    };

    void add_delta(std::uint64_t key, std::int64_t count, int word) {
        delta_[key] += count;
        where_[key].push_back(word);
    }

    const std::vector<std::string>& tokens_;  // grows while training; read through the reference
    std::vector<std::vector<int>> words_;     // (W) symbols of each unique pre-token
    std::vector<std::int64_t> word_counts_;   // (W)
    std::unordered_map<std::uint64_t, std::int64_t> pair_counts_;
    std::unordered_map<std::uint64_t, std::vector<int>> where_;  // pair -> words, may hold stale or repeated entries
    std::unordered_map<std::uint64_t, std::int64_t> delta_;       // scratch for one merge
    std::priority_queue<Entry, std::vector<Entry>, EntryOrder> heap_{EntryOrder{&tokens_}};
};

}  // namespace detail

SPECDEC_INLINE Tokenizer Tokenizer::train(std::string_view corpus, int vocab_size, std::vector<std::string> special_tokens) {
    Tokenizer t;
    t.origin_ = "train";
    const int n_base = 256 + static_cast<int>(special_tokens.size());
    if (vocab_size < n_base)
        t.fail("vocab_size " + std::to_string(vocab_size) + " is below the 256 byte tokens plus " +
               std::to_string(special_tokens.size()) + " special tokens");
    for (std::size_t i = 0; i < special_tokens.size(); ++i) {
        if (special_tokens[i].empty()) t.fail("special token " + std::to_string(i) + " is empty");
        for (std::size_t j = 0; j < i; ++j)
            if (special_tokens[i] == special_tokens[j]) t.fail("special token '" + special_tokens[i] + "' is listed twice");
        t.added_tokens_.push_back({special_tokens[i], t.vocab_size(), true});
        t.tokens_.push_back(special_tokens[i]);
        t.added_.push_back(1);
    }
    t.byte_ids_.fill(-1);
    std::array<int, 256> bytes{};
    for (int b = 0; b < 256; ++b) bytes[static_cast<std::size_t>(b)] = b;
    std::sort(bytes.begin(), bytes.end(), [](int a, int b) {
        return detail::kByteToCodePoint[static_cast<std::size_t>(a)] < detail::kByteToCodePoint[static_cast<std::size_t>(b)];
    });
    for (int b : bytes) t.add_regular_token(std::string(1, static_cast<char>(b)));

    // Count pre-tokens between special tokens (their text is never part of a word).
    std::unordered_map<std::string_view, std::int64_t> counts;
    const std::vector<std::string_view> literals(special_tokens.begin(), special_tokens.end());
    detail::split_on_literals(
        corpus, literals,
        [&](std::string_view stretch) { detail::for_each_pretoken(stretch, [&](std::string_view w) { ++counts[w]; }); },
        [](std::size_t) {});

    // A merge that would spell a special token is skipped: the two could not share a vocab key.
    std::unordered_set<std::string> special_spellings;
    for (const std::string& s : special_tokens) special_spellings.insert(s);
    std::unordered_set<std::uint64_t> banned;

    detail::BpeTrainer trainer(t.tokens_);
    trainer.add_words(counts, t.byte_ids_);
    while (t.vocab_size() < vocab_size) {
        const auto best = trainer.pop_best(banned);
        if (best.left < 0) break;
        std::string merged = t.tokens_[static_cast<std::size_t>(best.left)] + t.tokens_[static_cast<std::size_t>(best.right)];
        if (special_spellings.contains(detail::byte_level_encode(merged))) {
            banned.insert(detail::pair_key(best.left, best.right));
            continue;
        }
        // Two merges can spell the same bytes ("ab"+"c", "a"+"bc"): reuse the id, as HF does.
        auto existing = t.regular_ids_.find(merged);
        const int id = existing != t.regular_ids_.end() ? existing->second : t.add_regular_token(std::move(merged));
        t.add_merge(best.left, best.right, id);
        trainer.apply_merge(best.left, best.right, id);
    }
    t.origin_ = "trained tokenizer";
    return t;
}

// ---------------------------------------------------------------------------------------------
// tokenizer.json

/// The normalizer, pre-tokenizer and decoder of a SentencePiece-style file, as Llama-2, TinyLlama and
/// Mistral ship them (Prepend + Replace normalizer) or as newer files do (Metaspace pre-tokenizer).
SPECDEC_INLINE void Tokenizer::read_sentencepiece_config(const json::Value& root) {
    static constexpr std::string_view kMarker = "\xE2\x96\x81";
    auto type_of = [](const json::Value& v) -> std::string {
        const json::Value* type = v.is_object() ? v.find("type") : nullptr;
        return type && type->is_string() ? type->as_string() : "";
    };
    auto string_field = [](const json::Value& v, std::string_view key) -> std::string {
        const json::Value* f = v.is_object() ? v.find(key) : nullptr;
        return f && f->is_string() ? f->as_string() : std::string("\x01");  // never a valid setting
    };
    auto unsupported = [&](const std::string& field, const json::Value& v, const std::string& supported) {
        fail(field + " is " + json::dump(v) + "; only " + supported + " is supported");
    };
    // "pattern": {"String": " "} → " "
    auto pattern_string = [&](const json::Value& v) {
        const json::Value* pattern = v.find("pattern");
        return pattern && pattern->is_object() ? string_field(*pattern, "String") : std::string("\x01");
    };
    bool replaces_spaces = false;

    const json::Value* normalizer = root.find("normalizer");
    if (normalizer && !normalizer->is_null()) {
        normalizer_json_ = *normalizer;
        auto read_one = [&](const json::Value& n, const std::string& field) {
            const std::string type = type_of(n);
            if (type == "Prepend" && string_field(n, "prepend") == kMarker) prepend_always_ = true;
            else if (type == "Replace" && pattern_string(n) == " " && string_field(n, "content") == kMarker)
                replaces_spaces = true;
            else unsupported(field, n, "null, NFC (before a byte-level pre-tokenizer), Prepend(\"\xE2\x96\x81\"), Replace(\" \" -> \"\xE2\x96\x81\") or a Sequence of the last two");
        };
        if (type_of(*normalizer) == "Sequence") {
            const json::Value* list = normalizer->find("normalizers");
            if (!list || !list->is_array()) unsupported("normalizer", *normalizer, "a Sequence with a normalizers list");
            for (std::size_t i = 0; i < list->as_array().size(); ++i)
                read_one(list->as_array()[i], "normalizer.normalizers[" + std::to_string(i) + "]");
        } else {
            read_one(*normalizer, "normalizer");
        }
    }

    const json::Value* pre = root.find("pre_tokenizer");
    if (pre && !pre->is_null()) {
        pre_tokenizer_json_ = *pre;
        if (type_of(*pre) != "Metaspace")
            unsupported("pre_tokenizer", *pre, "null or Metaspace with a SentencePiece-style normalizer");
        if (string_field(*pre, "replacement") != kMarker)
            unsupported("pre_tokenizer.replacement", pre->find("replacement") ? *pre->find("replacement") : json::Value(), "\"\xE2\x96\x81\"");
        replaces_spaces = true;
        prepend_unless_space_ = true;
        std::string scheme = "always";  // older files say add_prefix_space instead
        if (const json::Value* v = pre->find("add_prefix_space"); v && v->is_bool() && !v->as_bool()) scheme = "never";
        if (const json::Value* v = pre->find("prepend_scheme"); v && !v->is_null()) {
            scheme = v->is_string() ? v->as_string() : "";
            if (scheme != "always" && scheme != "first" && scheme != "never")
                unsupported("pre_tokenizer.prepend_scheme", *v, "\"always\", \"first\" or \"never\"");
        }
        prepend_always_ = prepend_always_ || scheme == "always";
        prepend_first_ = scheme == "first";
        if (const json::Value* v = pre->find("split"); v && !v->is_null()) split_on_space_ = v->as_bool();
    }
    if (!replaces_spaces)
        fail("normalizer is " + json::dump(*normalizer) +
             ": a SentencePiece-style file must replace \" \" by \"\xE2\x96\x81\" (normalizer Replace or pre_tokenizer Metaspace)");

    const json::Value* decoder = root.find("decoder");
    if (!decoder || decoder->is_null())
        fail("decoder is null; a SentencePiece-style file needs its decoder (Replace, ByteFallback, Fuse, Strip)");
    decoder_json_ = *decoder;
    auto read_decoder = [&](const json::Value& d, const std::string& field) {
        const std::string type = type_of(d);
        if (type == "Replace" && pattern_string(d) == kMarker && string_field(d, "content") == " ") return;
        if (type == "ByteFallback" || type == "Fuse") return;
        if (type == "Metaspace" && string_field(d, "replacement") == kMarker) {
            // It drops the space it would have prepended: none when its scheme is "never".
            const json::Value* apply = d.find("add_prefix_space");
            const bool never = string_field(d, "prepend_scheme") == "never" || (apply && apply->is_bool() && !apply->as_bool());
            strip_leading_spaces_ = never ? 0 : 1;
            return;
        }
        if (type == "Strip" && string_field(d, "content") == " ") {
            const json::Value* start = d.find("start");
            const json::Value* stop = d.find("stop");
            if (start && start->is_integer() && start->as_int() >= 0 && start->as_int() <= 16 && stop &&
                stop->is_integer() && stop->as_int() == 0) {
                strip_leading_spaces_ = static_cast<int>(start->as_int());
                return;
            }
        }
        unsupported(field, d, "Replace(\"\xE2\x96\x81\" -> \" \"), ByteFallback, Fuse, Strip(\" \", start, 0) or Metaspace");
    };
    if (type_of(*decoder) == "Sequence") {
        const json::Value* list = decoder->find("decoders");
        if (!list || !list->is_array()) unsupported("decoder", *decoder, "a Sequence with a decoders list");
        for (std::size_t i = 0; i < list->as_array().size(); ++i)
            read_decoder(list->as_array()[i], "decoder.decoders[" + std::to_string(i) + "]");
    } else {
        read_decoder(*decoder, "decoder");
    }
}

/// The post_processor's template for one sequence: the special tokens before and after "A"
/// (TemplateProcessing, also inside a Sequence after ByteLevel as Llama-3.1 files have it).
SPECDEC_INLINE void Tokenizer::read_post_processor(const json::Value& root) {
    const json::Value* post = root.find("post_processor");
    if (!post || post->is_null()) return;
    auto type_of = [](const json::Value& v) -> std::string {
        const json::Value* type = v.is_object() ? v.find("type") : nullptr;
        return type && type->is_string() ? type->as_string() : "";
    };
    auto unsupported = [&](const std::string& field, const json::Value& v, const std::string& supported) {
        fail(field + " is " + json::dump(v) + "; only " + supported + " is supported");
    };
    auto read_template = [&](const json::Value& p, const std::string& field) {
        const json::Value* single = p.find("single");
        const json::Value* specials = p.find("special_tokens");
        if (!single || !single->is_array()) unsupported(field + ".single", single ? *single : json::Value(), "a list");
        bool seen_a = false;
        for (std::size_t i = 0; i < single->as_array().size(); ++i) {
            const json::Value& item = single->as_array()[i];
            const std::string item_field = field + ".single[" + std::to_string(i) + "]";
            if (const json::Value* seq = item.is_object() ? item.find("Sequence") : nullptr) {
                const json::Value* id = seq->is_object() ? seq->find("id") : nullptr;
                if (!id || !id->is_string() || id->as_string() != "A" || seen_a)
                    unsupported(item_field, item, "one Sequence \"A\"");
                seen_a = true;
                continue;
            }
            const json::Value* special = item.is_object() ? item.find("SpecialToken") : nullptr;
            const json::Value* name = special && special->is_object() ? special->find("id") : nullptr;
            if (!name || !name->is_string()) unsupported(item_field, item, "SpecialToken or Sequence");
            const json::Value* entry = specials && specials->is_object() ? specials->find(name->as_string()) : nullptr;
            const json::Value* ids = entry && entry->is_object() ? entry->find("ids") : nullptr;
            if (!ids || !ids->is_array())
                fail(item_field + ": special token '" + name->as_string() + "' has no ids in " + field + ".special_tokens");
            for (const json::Value& id : ids->as_array()) {
                const std::int64_t v = id.as_int();
                if (v < 0 || v >= vocab_size())
                    fail(field + ".special_tokens['" + name->as_string() + "']: id " + std::to_string(v) +
                         " is out of range (vocab size " + std::to_string(vocab_size()) + ")");
                (seen_a ? template_suffix_ : template_prefix_).push_back(static_cast<int>(v));
            }
        }
        if (!seen_a) unsupported(field + ".single", *single, "a template with the Sequence \"A\"");
    };
    auto read_one = [&](const json::Value& p, const std::string& field) {
        const std::string type = type_of(p);
        if (type == "ByteLevel" && kind_ == TokenizerKind::kByteLevel) return;
        if (type == "TemplateProcessing") return read_template(p, field);
        unsupported(field, p, "null, ByteLevel, TemplateProcessing or a Sequence of them");
    };
    if (type_of(*post) == "Sequence") {
        const json::Value* list = post->find("processors");
        if (!list || !list->is_array()) unsupported("post_processor", *post, "a Sequence with a processors list");
        for (std::size_t i = 0; i < list->as_array().size(); ++i)
            read_one(list->as_array()[i], "post_processor.processors[" + std::to_string(i) + "]");
    } else {
        read_one(*post, "post_processor");
    }
}

SPECDEC_INLINE std::string Tokenizer::to_json() const {
    auto byte_level = [] {
        json::Object o;
        o.insert("type", "ByteLevel");
        o.insert("add_prefix_space", false);
        o.insert("trim_offsets", true);
        o.insert("use_regex", true);
        return o;
    };
    json::Array added;
    for (const AddedToken& a : added_tokens_) {
        json::Object o;
        o.insert("id", a.id);
        o.insert("content", a.content);
        o.insert("single_word", false);
        o.insert("lstrip", false);
        o.insert("rstrip", false);
        o.insert("normalized", false);
        o.insert("special", a.special);
        added.push_back(std::move(o));
    }
    json::Object vocab;
    for (std::size_t id = 0; id < tokens_.size(); ++id) {
        // Added tokens are stored by content, BPE tokens in the byte-level alphabet (as HF does).
        std::string key = kind_ == TokenizerKind::kSentencePiece ? spellings_[id]
                          : added_[id]                            ? tokens_[id]
                                                                  : detail::byte_level_encode(tokens_[id]);
        if (!vocab.insert(key, static_cast<int>(id)))
            fail("to_json: token " + std::to_string(id) + " is spelled '" + key + "' like another token");
    }
    json::Array merges;
    auto spelled = [&](int id) {
        const auto u = static_cast<std::size_t>(id);
        return kind_ == TokenizerKind::kSentencePiece ? spellings_[u] : detail::byte_level_encode(tokens_[u]);
    };
    for (const auto& [left, right] : merges_) merges.push_back(json::Array{spelled(left), spelled(right)});
    json::Object model;
    model.insert("type", "BPE");
    model.insert("dropout", nullptr);
    model.insert("unk_token", unk_token_json_);
    model.insert("continuing_subword_prefix", nullptr);
    model.insert("end_of_word_suffix", nullptr);
    model.insert("fuse_unk", fuse_unk_);
    model.insert("byte_fallback", byte_fallback_);
    model.insert("ignore_merges", ignore_merges_);
    model.insert("vocab", std::move(vocab));
    model.insert("merges", std::move(merges));

    json::Object root;
    root.insert("version", "1.0");
    root.insert("truncation", nullptr);
    root.insert("padding", nullptr);
    root.insert("added_tokens", std::move(added));
    // A loaded file's own settings go back as they were; a trained tokenizer gets GPT-2's.
    const bool sentencepiece = kind_ == TokenizerKind::kSentencePiece;
    root.insert("normalizer", normalizer_json_);
    root.insert("pre_tokenizer", !pre_tokenizer_json_.is_null() || sentencepiece ? pre_tokenizer_json_ : json::Value(byte_level()));
    root.insert("post_processor", post_processor_json_);
    json::Object decoder = byte_level();
    decoder.set("add_prefix_space", true);  // what HF's ByteLevel decoder config carries; decoding ignores it
    root.insert("decoder", sentencepiece ? decoder_json_ : json::Value(std::move(decoder)));
    root.insert("model", std::move(model));
    return json::dump(json::Value(std::move(root)));
}

SPECDEC_INLINE void Tokenizer::save(const std::filesystem::path& path) const {
    const std::string text = to_json();
    const std::filesystem::path temp = path.string() + ".tmp";
    auto fail_io = [&](const std::string& what) { detail::fail("tokenizer", path.string() + ": " + what); };
    {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        if (!out) fail_io("cannot create " + temp.string());
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
        if (!out.flush()) fail_io("write to " + temp.string() + " failed");
    }
    std::error_code ec;
    std::filesystem::rename(temp, path, ec);
    if (ec) {
        std::filesystem::remove(temp, ec);
        fail_io("cannot rename " + temp.string() + " into place: " + ec.message());
    }
}

SPECDEC_INLINE Tokenizer Tokenizer::load(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        detail::fail("tokenizer", path.string() + ": is a directory, not a file (pass the path of its tokenizer.json)");
    return from_json(detail::read_text_file(path, "tokenizer"), path.string());
}

SPECDEC_INLINE Tokenizer Tokenizer::from_json(std::string_view text, std::string_view origin) {
    Tokenizer t;
    t.origin_ = std::string(origin);
    const json::Value root = json::parse(text, origin);
    const json::Value& model = root.at("model");
    auto quoted = [](const json::Value* v) { return v ? json::dump(*v) : std::string("absent"); };
    auto is_null = [](const json::Value* v) { return v == nullptr || v->is_null(); };
    auto is_empty_or_null = [&](const json::Value* v) { return is_null(v) || (v->is_string() && v->as_string().empty()); };
    auto is_false = [](const json::Value* v) { return v == nullptr || (v->is_bool() && !v->as_bool()); };
    auto unsupported = [&](const std::string& field, const json::Value* v, const std::string& supported) {
        t.fail(field + " is " + quoted(v) + "; only " + supported + " is supported");
    };
    auto type_of = [](const json::Value* v) -> std::string {
        if (v == nullptr || !v->is_object()) return "";
        const json::Value* type = v->find("type");
        return type && type->is_string() ? type->as_string() : "";
    };

    // Settings that would change the ids are refused, not ignored.
    if (const json::Value* type = model.find("type"); !type || !type->is_string() || type->as_string() != "BPE")
        unsupported("model.type", type, "\"BPE\"");
    const json::Value* normalizer = root.find("normalizer");
    const json::Value* pre = root.find("pre_tokenizer");
    if (type_of(normalizer) == "NFC" && (type_of(pre) == "ByteLevel" || type_of(pre) == "Sequence")) {
        t.nfc_ = true;  // Qwen2/Qwen3: byte-level BPE after Unicode NFC
        t.normalizer_json_ = *normalizer;
    }
    if (!t.nfc_ && (!is_null(normalizer) || type_of(pre) == "Metaspace")) {
        t.kind_ = TokenizerKind::kSentencePiece;
        t.read_sentencepiece_config(root);
    } else if (type_of(pre) == "ByteLevel") {
        if (const json::Value* v = pre->find("add_prefix_space"); !is_false(v))
            unsupported("pre_tokenizer.add_prefix_space", v, "false");
        if (const json::Value* v = pre->find("use_regex"); v && !(v->is_bool() && v->as_bool()))
            unsupported("pre_tokenizer.use_regex", v, "true");
    } else if (type_of(pre) == "Sequence") {
        // Split(pattern, Isolated) then ByteLevel without its own regex: Llama-3 and later GPT-2 files.
        const json::Value* list = pre->find("pretokenizers");
        if (!list || !list->is_array() || list->as_array().size() != 2 || type_of(&list->as_array()[0]) != "Split" ||
            type_of(&list->as_array()[1]) != "ByteLevel")
            unsupported("pre_tokenizer", pre, "ByteLevel, Sequence [Split, ByteLevel] or Metaspace");
        const json::Value& split = list->as_array()[0];
        const json::Value* pattern = split.find("pattern");
        const json::Value* regex = pattern && pattern->is_object() ? pattern->find("Regex") : nullptr;
        const std::string regex_text = regex && regex->is_string() ? regex->as_string() : "";
        if (regex_text == detail::kGpt2Pattern) t.pattern_ = detail::SplitPattern::kGpt2;
        else if (regex_text == detail::kLlama3Pattern) t.pattern_ = detail::SplitPattern::kLlama3;
        else if (regex_text == detail::kQwen2Pattern) t.pattern_ = detail::SplitPattern::kQwen2;
        else unsupported("pre_tokenizer.pretokenizers[0].pattern", pattern, "the GPT-2, Llama-3 or Qwen2 regex (specdec hand-codes those three)");
        if (const json::Value* v = split.find("behavior"); !v || !v->is_string() || v->as_string() != "Isolated")
            unsupported("pre_tokenizer.pretokenizers[0].behavior", v, "\"Isolated\"");
        if (const json::Value* v = split.find("invert"); !is_false(v))
            unsupported("pre_tokenizer.pretokenizers[0].invert", v, "false");
        const json::Value& byte_level = list->as_array()[1];
        if (const json::Value* v = byte_level.find("add_prefix_space"); !is_false(v))
            unsupported("pre_tokenizer.pretokenizers[1].add_prefix_space", v, "false");
        if (const json::Value* v = byte_level.find("use_regex"); !is_false(v))
            unsupported("pre_tokenizer.pretokenizers[1].use_regex", v, "false");
        t.pre_tokenizer_json_ = *pre;
    } else {
        unsupported("pre_tokenizer", pre, "ByteLevel, Sequence [Split, ByteLevel] or Metaspace");
    }
    if (const json::Value* v = root.find("post_processor"); !is_null(v)) t.post_processor_json_ = *v;
    if (t.kind_ == TokenizerKind::kByteLevel)
        if (const json::Value* v = root.find("decoder"); !is_null(v) && type_of(v) != "ByteLevel")
            unsupported("decoder", v, "null or ByteLevel");
    if (const json::Value* v = model.find("dropout"); !is_null(v) && !(v->is_number() && v->as_double() == 0.0))
        unsupported("model.dropout", v, "null");
    if (const json::Value* v = model.find("continuing_subword_prefix"); !is_empty_or_null(v))
        unsupported("model.continuing_subword_prefix", v, "null");
    if (const json::Value* v = model.find("end_of_word_suffix"); !is_empty_or_null(v))
        unsupported("model.end_of_word_suffix", v, "null");
    if (const json::Value* v = model.find("byte_fallback"); !is_false(v)) {
        if (t.kind_ == TokenizerKind::kByteLevel)
            unsupported("model.byte_fallback", v, "false (byte-level BPE has every byte)");
        t.byte_fallback_ = v->as_bool();
    }
    if (const json::Value* v = model.find("ignore_merges")) t.ignore_merges_ = v->as_bool();
    if (t.kind_ == TokenizerKind::kSentencePiece) {
        if (const json::Value* v = model.find("fuse_unk"); v && !v->is_null()) t.fuse_unk_ = v->as_bool();
        if (const json::Value* v = model.find("unk_token"); !is_null(v)) t.unk_token_json_ = *v;
    }

    // Ids: model.vocab and added_tokens together must number 0..V-1 without holes.
    const json::Object& vocab = model.at("vocab").as_object();
    std::unordered_map<int, std::string> added_content;  // id -> content
    std::vector<AddedToken> added;
    if (const json::Value* list = root.find("added_tokens"); list && !list->is_null()) {
        const json::Array& items = list->as_array();
        for (std::size_t i = 0; i < items.size(); ++i) {
            const std::string field = "added_tokens[" + std::to_string(i) + "]";
            const json::Value& item = items[i];
            const std::int64_t id = item.at("id").as_int();
            const std::string& content = item.at("content").as_string();
            for (const char* flag : {"single_word", "lstrip", "rstrip"})
                if (const json::Value* v = item.find(flag); !is_false(v))
                    unsupported(field + "." + flag, v, "false");
            // Such a token would be matched in the NFC text, not cut out of the raw text first.
            if (const json::Value* v = item.find("normalized"); t.nfc_ && !is_false(v))
                unsupported(field + ".normalized", v, "false in a file with the NFC normalizer");
            if (id < 0 || id > std::numeric_limits<int>::max())
                t.fail(field + ": id " + std::to_string(id) + " is out of range");
            if (content.empty()) t.fail(field + ": content is empty");
            const json::Value* special = item.find("special");
            if (!added_content.emplace(static_cast<int>(id), content).second)
                t.fail(field + ": id " + std::to_string(id) + " is used by an earlier added token");
            for (const AddedToken& a : added)  // the second could never be produced
                if (a.content == content)
                    t.fail(field + ": content '" + content + "' is already added token " + std::to_string(a.id));
            added.push_back({content, static_cast<int>(id), special == nullptr || special->as_bool()});
        }
    }
    std::int64_t max_id = -1;
    for (const json::Member& m : vocab) max_id = std::max(max_id, m.value.as_int());
    for (const AddedToken& a : added) max_id = std::max<std::int64_t>(max_id, a.id);
    if (max_id >= static_cast<std::int64_t>(vocab.size() + added.size()))
        t.fail("model.vocab: id " + std::to_string(max_id) + " is too large for " + std::to_string(vocab.size()) +
               " vocab entries and " + std::to_string(added.size()) + " added tokens (ids must be 0..V-1)");
    const auto n = static_cast<std::size_t>(max_id + 1);
    t.tokens_.assign(n, std::string());
    t.added_.assign(n, 0);
    std::vector<std::string> spelling(n);  // the vocab key of each id, for messages
    std::vector<char> seen(n, 0);
    t.byte_ids_.fill(-1);
    for (const json::Member& m : vocab) {
        const std::int64_t id = m.value.as_int();
        if (id < 0) t.fail("model.vocab: token '" + m.key + "' has negative id " + std::to_string(id));
        const auto u = static_cast<std::size_t>(id);
        if (seen[u])
            t.fail("model.vocab: id " + std::to_string(id) + " is used by both '" + spelling[u] + "' and '" + m.key + "'");
        seen[u] = 1;
        spelling[u] = m.key;
        if (auto it = added_content.find(static_cast<int>(id)); it != added_content.end()) {
            if (it->second != m.key)
                t.fail("model.vocab: id " + std::to_string(id) + " is '" + m.key + "' but added_tokens gives it '" +
                       it->second + "'");
            continue;
        }
        if (t.kind_ == TokenizerKind::kSentencePiece) {
            std::string raw = detail::sentencepiece_decode(m.key);
            if (const int b = detail::byte_fallback_value(m.key); b >= 0) t.byte_ids_[static_cast<std::size_t>(b)] = static_cast<int>(id);
            t.regular_ids_.emplace(m.key, static_cast<int>(id));
            t.tokens_[u] = std::move(raw);
            continue;
        }
        std::optional<std::string> raw = detail::byte_level_decode(m.key);
        if (!raw)
            t.fail("model.vocab: token '" + m.key + "' (id " + std::to_string(id) +
                   ") has a character outside the byte-level alphabet");
        if (raw->size() == 1) t.byte_ids_[static_cast<unsigned char>((*raw)[0])] = static_cast<int>(id);
        t.regular_ids_.emplace(*raw, static_cast<int>(id));
        t.tokens_[u] = std::move(*raw);
    }
    for (const AddedToken& a : added) {
        const auto u = static_cast<std::size_t>(a.id);
        seen[u] = 1;
        spelling[u] = a.content;
        t.tokens_[u] = a.content;
        t.added_[u] = 1;
    }
    for (std::size_t id = 0; id < n; ++id)
        if (!seen[id]) t.fail("model.vocab: no token has id " + std::to_string(id) + " (ids must be 0..V-1)");
    // A vocabulary without a single byte token can encode nothing; say so now, not at the first encode.
    // (A partial byte alphabet loads: encode names the first byte it cannot spell.)
    if (t.kind_ == TokenizerKind::kSentencePiece) {
        t.spellings_ = std::move(spelling);
        if (vocab.size() == 0) t.fail("model.vocab is empty");
        if (t.byte_fallback_)
            for (int b = 0; b < 256; ++b)
                if (t.byte_ids_[static_cast<std::size_t>(b)] < 0)
                    t.fail("model.byte_fallback is true but model.vocab has no token '<0x" +
                           detail::hex_byte(static_cast<unsigned char>(b)).substr(2) +
                           ">' (byte fallback needs all 256 <0xNN> tokens)");
        if (!t.unk_token_json_.is_null()) {
            const json::Value* unk = t.unk_token_json_.is_string() ? vocab.find(t.unk_token_json_.as_string()) : nullptr;
            if (!unk) t.fail("model.unk_token " + json::dump(t.unk_token_json_) + " is not in model.vocab");
            t.unk_id_ = static_cast<int>(unk->as_int());
        }
    } else if (std::none_of(t.byte_ids_.begin(), t.byte_ids_.end(), [](int id) { return id >= 0; }))
        t.fail(vocab.size() == 0 ? std::string("model.vocab is empty")
                                 : "model.vocab has no byte token (byte-level BPE spells every text with them)");
    std::sort(added.begin(), added.end(), [](const AddedToken& a, const AddedToken& b) { return a.id < b.id; });
    t.added_tokens_ = std::move(added);

    // Merges: "a b" strings (older files) or ["a", "b"] pairs; rank = position.
    const json::Array& merges = model.at("merges").as_array();
    for (std::size_t i = 0; i < merges.size(); ++i) {
        const std::string field = "model.merges[" + std::to_string(i) + "]";
        std::string parts[2];
        if (merges[i].is_string()) {
            const std::string& s = merges[i].as_string();
            const std::size_t space = s.find(' ');
            if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
                t.fail(field + ": \"" + s + "\" is not two tokens separated by one space");
            parts[0] = s.substr(0, space);
            parts[1] = s.substr(space + 1);
        } else if (merges[i].is_array() && merges[i].as_array().size() == 2) {
            parts[0] = merges[i].as_array()[0].as_string();
            parts[1] = merges[i].as_array()[1].as_string();
        } else {
            t.fail(field + " is " + json::dump(merges[i]) + ", expected \"a b\" or [\"a\", \"b\"]");
        }
        int ids[2];
        std::string merged;
        for (int k = 0; k < 2; ++k) {
            const json::Value* id = vocab.find(parts[k]);
            if (!id) t.fail(field + ": '" + parts[k] + "' is not in model.vocab");
            ids[k] = static_cast<int>(id->as_int());
            if (added_content.contains(ids[k]))  // encode never forms a symbol from one: the rule could not apply
                t.fail(field + ": '" + parts[k] + "' is the added token " + std::to_string(ids[k]) +
                       "; a merge cannot take an added token");
            merged += parts[k];
        }
        const json::Value* merged_id = vocab.find(merged);
        if (!merged_id) t.fail(field + ": merged token '" + merged + "' is not in model.vocab");
        if (added_content.contains(static_cast<int>(merged_id->as_int())))  // decode would print it unmapped
            t.fail(field + ": merged token '" + merged + "' is the added token " + std::to_string(merged_id->as_int()) +
                   "; a merge cannot produce an added token");
        if (t.merge_rules_.contains(detail::pair_key(ids[0], ids[1])))
            t.fail(field + ": merge '" + parts[0] + "' + '" + parts[1] + "' appears twice");
        t.add_merge(ids[0], ids[1], static_cast<int>(merged_id->as_int()));
    }
    if (t.kind_ == TokenizerKind::kSentencePiece && !t.ignore_merges_ && t.regular_ids_.contains("\xE2\x96\x81")) {
        static constexpr std::string_view kMarker = "\xE2\x96\x81";
        t.words_end_before_marker_ = std::none_of(t.merges_.begin(), t.merges_.end(), [&](const std::pair<int, int>& m) {
            const std::string& left = t.spellings_[static_cast<std::size_t>(m.first)];
            const std::string& right = t.spellings_[static_cast<std::size_t>(m.second)];
            return right.starts_with(kMarker) && !left.ends_with(kMarker);
        });
    }
    t.read_post_processor(root);
    return t;
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
