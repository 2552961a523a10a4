// Catch2 v2 (Debian 12's single header) or v3, whichever is installed.
#pragma once
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
#include <string>
// The tests spell matchers the v2 way (Catch::Contains, Catch::WithinAbs); v3 keeps them only in
// Catch::Matchers and renamed Contains for strings to ContainsSubstring.
namespace Catch {
using namespace Matchers;
inline auto Contains(const std::string& s, CaseSensitive cs = CaseSensitive::Yes) {
    return Matchers::ContainsSubstring(s, cs);
}
}  // namespace Catch
using Catch::Approx;  // v2 has it at global scope
#else
#include <catch2/catch.hpp>
#endif
