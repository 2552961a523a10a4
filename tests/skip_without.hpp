// tests/skip_without.hpp — a case whose input file the repository does not ship (a golden file generated
// elsewhere, a vocabulary under another licence) is skipped, never silently passed.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "catch.hpp"

namespace test {

/// True (and the case should return) when `file` is absent: under ctest (SPECDEC_CTEST, set in
/// CMakeLists.txt) the process exits 77, which SKIP_RETURN_CODE reports as skipped; run by hand, the
/// case warns and passes nothing else. `why` says where the file comes from.
inline bool skip_without(const std::filesystem::path& file, const std::string& why) {
    if (std::filesystem::exists(file)) return false;
    const std::string message = "SKIPPED: " + file.string() + " is absent (" + why + ")";
    if (std::getenv("SPECDEC_CTEST") != nullptr) {
        std::fprintf(stderr, "%s\n", message.c_str());
        std::exit(77);
    }
    WARN(message);
    SUCCEED("skipped");
    return true;
}

}  // namespace test
