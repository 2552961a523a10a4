// tests/fuzz/fuzz_json.cpp — json::parse of arbitrary bytes; what parses must dump and re-parse to an
// equal value, compact and indented. Run through scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include <bit>
#include <cmath>

#include "detail/io/json.hpp"
#include "fuzz_common.hpp"

namespace {

using specdec::json::Kind;
using specdec::json::Value;

/// Structural equality: same kinds, same members in the same order, doubles bit for bit (-0.0 too).
bool same(const Value& a, const Value& b) {
    if (a.kind() != b.kind()) return false;
    switch (a.kind()) {
        case Kind::kNull: return true;
        case Kind::kBool: return a.as_bool() == b.as_bool();
        case Kind::kInteger: return a.as_int() == b.as_int();
        case Kind::kDouble: return std::bit_cast<std::uint64_t>(a.as_double()) == std::bit_cast<std::uint64_t>(b.as_double());
        case Kind::kString: return a.as_string() == b.as_string();
        case Kind::kArray: {
            const auto& x = a.as_array();
            const auto& y = b.as_array();
            if (x.size() != y.size()) return false;
            for (std::size_t i = 0; i < x.size(); ++i)
                if (!same(x[i], y[i])) return false;
            return true;
        }
        case Kind::kObject: {
            const auto& x = a.as_object();
            const auto& y = b.as_object();
            if (x.size() != y.size()) return false;
            for (auto i = x.begin(), j = y.begin(); i != x.end(); ++i, ++j)
                if (i->key != j->key || !same(i->value, j->value)) return false;
            for (const auto& m : x)  // the hash index of big objects agrees with the member list
                if (x.find(m.key) != &m.value) return false;
            return true;
        }
    }
    return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    Value v;
    try {
        v = specdec::json::parse(text, "fuzz.json");
    } catch (const specdec::error&) {
        return 0;  // refused with the library's error: fine
    }
    // What the reader accepted the writer must write (no catch: an error here is a finding), and
    // reading it back must give the same value.
    for (int indent : {-1, 2}) {
        const std::string dumped = specdec::json::dump(v, indent);
        const Value back = specdec::json::parse(dumped, "dumped.json");
        FUZZ_CHECK(same(v, back), "parse(dump(v)) == v");
        FUZZ_CHECK(specdec::json::dump(back, indent) == dumped, "dump is stable");
    }
    (void)v.where();
    return 0;
}
