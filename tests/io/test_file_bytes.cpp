// detail::FileBytes, under the safetensors and GGUF readers: the whole file, mapped or read, and still
// where it was after a move (the readers hold spans into it).
#include <unistd.h>

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <string>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_file_bytes {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

TEST_CASE("FileBytes holds the whole file, and its bytes stay put when it moves", "[io]") {
    const fs::path dir = fs::temp_directory_path() / ("specdec_file_bytes_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const std::string text = "0123456789abcdef";
    std::ofstream(dir / "f.bin", std::ios::binary) << text;
    std::ofstream(dir / "empty.bin", std::ios::binary).flush();

    detail::FileBytes f = detail::FileBytes::open(dir / "f.bin", "test");
    REQUIRE(f.size() == text.size());
    CHECK(f.is_mapped());
    CHECK(std::string(reinterpret_cast<const char*>(f.bytes().data()), f.size()) == text);
    const std::byte* at = f.bytes().data();
    detail::FileBytes g = std::move(f);
    CHECK(g.bytes().data() == at);
    CHECK(f.size() == 0);

    // An empty file cannot be mapped: it is read, as zero bytes.
    const detail::FileBytes e = detail::FileBytes::open(dir / "empty.bin", "test");
    CHECK(e.size() == 0);
    CHECK_FALSE(e.is_mapped());

    CHECK_THROWS_WITH(detail::FileBytes::open(dir / "absent.bin", "test"),
                      Catch::Contains("[specdec.test]") && Catch::Contains("absent.bin: cannot open"));
    CHECK_THROWS_WITH(detail::FileBytes::open(dir, "test"), Catch::Contains("is a directory, not a file"));
    CHECK(detail::not_a_regular_file(dir / "f.bin").empty());
    CHECK(detail::not_a_regular_file(dir / "absent.bin").empty());  // the open names a missing file
    fs::remove_all(dir);
}

}  // namespace test_file_bytes
