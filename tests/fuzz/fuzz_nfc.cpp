// tests/fuzz/fuzz_nfc.cpp — arbitrary bytes through detail::nfc (Qwen's normalizer): NFC is idempotent,
// well-formed UTF-8 stays well-formed, bytes outside UTF-8 pass through in order, and a text the quick
// check calls NFC comes back unchanged. Run through scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include <string>
#include <string_view>

#include "detail/io/nfc.hpp"
#include "fuzz_common.hpp"

namespace {

/// The bytes of `s` that are not part of well-formed UTF-8, in order.
std::string stray_bytes(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        const specdec::detail::Utf8Char u = specdec::detail::decode_utf8(s, i);
        if (u.length == 0) out += s[i++];
        else i += u.length;
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const std::string once = specdec::detail::nfc(text);
    FUZZ_CHECK(specdec::detail::nfc(once) == once, "NFC(NFC(s)) == NFC(s)");
    FUZZ_CHECK(stray_bytes(once) == stray_bytes(text), "bytes outside UTF-8 pass through, in order");
    // A canonical decomposition has at most 4 code points (3 bytes each at most, from at least 2 in).
    FUZZ_CHECK(once.size() <= 3 * text.size(), "NFC at most triples the bytes");
    bool below_marks = true;  // nothing from U+0300 on: Latin-1 and ASCII are always NFC
    for (unsigned char c : text) below_marks = below_marks && c < 0xCC;
    if (below_marks) FUZZ_CHECK(once == text, "text below U+0300 is already NFC");
    return 0;
}
