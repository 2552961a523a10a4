// Tests for detail/io/nfc.hpp against Unicode's own conformance test (NormalizationTest.txt of the
// tables' version, committed without its comments by scripts/make_unicode_nfc.py).
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "source_dir.hpp"

#include "detail/io/nfc.hpp"

namespace test_nfc {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

std::string utf8_of(const std::vector<char32_t>& cps) {
    std::string out;
    for (char32_t c : cps) detail::append_utf8(out, c);
    return out;
}

std::vector<char32_t> hex_list(const std::string& field) {
    std::vector<char32_t> out;
    std::istringstream in(field);
    std::string word;
    while (in >> word) out.push_back(static_cast<char32_t>(std::stoul(word, nullptr, 16)));
    return out;
}

std::string hex_of(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        const detail::Utf8Char u = detail::decode_utf8(s, i);
        char buf[16];
        std::snprintf(buf, sizeof buf, "%s%04X", out.empty() ? "" : " ", static_cast<unsigned>(u.length ? u.cp : 0xFFFD));
        out += buf;
        i += u.length ? u.length : 1;
    }
    return out;
}

}  // namespace

TEST_CASE("nfc passes Unicode's NormalizationTest.txt and leaves every other code point alone", "[nfc]") {
    std::ifstream in(fs::path(SPECDEC_SOURCE_DIR) / "tests/data/unicode/nfc_conformance.txt");
    REQUIRE(in);
    std::string line;
    bool part1 = false;
    std::set<char32_t> listed;  // Part 1's single code points: the others must be their own NFC
    int n_lines = 0, n_failed = 0;
    std::string failures;
    while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#') continue;
        if (line[0] == '@') {
            part1 = line == "@Part1";
            continue;
        }
        std::vector<std::string> c;
        std::istringstream fields(line);
        for (std::string f; std::getline(fields, f, ';');) c.push_back(utf8_of(hex_list(f)));
        REQUIRE(c.size() == 5);
        if (part1) listed.insert(hex_list(line.substr(0, line.find(';')))[0]);
        ++n_lines;
        // c2 == NFC(c1) == NFC(c2) == NFC(c3); c4 == NFC(c4) == NFC(c5)
        const bool ok = detail::nfc(c[0]) == c[1] && detail::nfc(c[1]) == c[1] && detail::nfc(c[2]) == c[1] &&
                        detail::nfc(c[3]) == c[3] && detail::nfc(c[4]) == c[3];
        if (!ok && ++n_failed <= 5) failures.append("\n  ").append(line).append(" -> NFC(c1) = ").append(hex_of(detail::nfc(c[0])));
    }
    INFO("Unicode " << detail::nfc_unicode_version() << ", failures:" << failures);
    CHECK(n_lines > 18000);
    CHECK(n_failed == 0);

    int n_changed = 0;
    std::string changed;
    for (char32_t cp = 0; cp <= 0x10FFFF; ++cp) {
        if ((cp >= 0xD800 && cp <= 0xDFFF) || listed.contains(cp)) continue;
        const std::string s = utf8_of({cp});
        if (detail::nfc(s) != s && ++n_changed <= 5) changed.append(" ").append(hex_of(s));
    }
    INFO("code points not in Part 1 that NFC changed:" << changed);
    CHECK(n_changed == 0);
}

TEST_CASE("nfc composes across marks in canonical order and keeps bytes that are not UTF-8", "[nfc]") {
    CHECK(detail::nfc("") == "");
    CHECK(detail::nfc("plain ASCII, Latin-1: caf\xC3\xA9") == "plain ASCII, Latin-1: caf\xC3\xA9");
    CHECK(detail::nfc("cafe\xCC\x81") == "caf\xC3\xA9");                  // e + U+0301 -> U+00E9
    CHECK(detail::nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8") == "\xEA\xB0\x81");  // jamo L V T -> U+AC01
    CHECK(detail::nfc("\xEF\xA4\x80") == "\xE8\xB1\x88");                 // U+F900 (singleton) -> U+8C48
    CHECK(detail::nfc("\xE2\x84\xAB") == "\xC3\x85");                     // ANGSTROM SIGN -> U+00C5
    // q + dot below + dot above: no composite for q, the marks are only reordered (220 before 230).
    CHECK(detail::nfc("q\xCC\x87\xCC\xA3") == "q\xCC\xA3\xCC\x87");
    // A byte that is not UTF-8 stays, and the mark after it does not reach back to the 'e'.
    CHECK(detail::nfc("e\xFF\xCC\x81") == "e\xFF\xCC\x81");
    CHECK(detail::nfc("\xC3\xA9\xCC\x81\x80") == "\xC3\xA9\xCC\x81\x80");
    // Idempotent on its own output.
    for (std::string s : {"A\xCC\x8A\xCC\x81 \xE1\x84\x80\xE1\x85\xA1", "\xE0\xAD\x87\xE0\xAC\xBE", "x\xCC\xB8\xCC\x81"})
        CHECK(detail::nfc(detail::nfc(s)) == detail::nfc(s));
}

}  // namespace test_nfc
