// tests/fuzz/fuzz_common.hpp — what the libFuzzer harnesses share: a per-process scratch folder,
// writing the input to a file there, splitting one input into two files, and a check that aborts.
// SPDX-License-Identifier: MIT
#pragma once

// Every harness catches specdec::error and nothing else: bad input must be reported that way, so any
// other exception (bad_alloc, out_of_range, length_error) escapes, terminates, and libFuzzer saves the
// input as a crash, just like a sanitizer report, a timeout or a leak.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <unistd.h>

namespace fuzz {

/// Aborts naming the broken property: libFuzzer reports it as a crash and keeps the input.
#define FUZZ_CHECK(cond, what)                                                                  \
    do {                                                                                        \
        if (!(cond)) {                                                                          \
            std::fprintf(stderr, "FUZZ_CHECK failed: %s (%s) at %s:%d\n", what, #cond, __FILE__, \
                         __LINE__);                                                             \
            std::abort();                                                                       \
        }                                                                                       \
    } while (0)

/// This process's scratch folder, made on first use: $TMPDIR, else /dev/shm, else /tmp. One per
/// process, so parallel fuzzing jobs (-jobs=N) never share files; removed at exit.
inline const std::filesystem::path& scratch_dir(std::string_view harness) {
    static const std::filesystem::path dir = [&] {
        std::filesystem::path base = "/tmp";
        if (const char* t = std::getenv("TMPDIR"); t != nullptr && *t != '\0') base = t;
        else if (std::filesystem::is_directory("/dev/shm")) base = "/dev/shm";
        std::filesystem::path d = base / ("specdec_fuzz_" + std::string(harness) + "_" + std::to_string(::getpid()));
        std::filesystem::create_directories(d);
        return d;
    }();
    static const bool registered = [] {
        std::atexit([] {
            std::error_code ignored;
            std::filesystem::remove_all(dir, ignored);
        });
        return true;
    }();
    (void)registered;
    return dir;
}

inline void write_file(const std::filesystem::path& path, std::span<const std::uint8_t> bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    FUZZ_CHECK(out.good(), "writing the input to the scratch folder");
}

/// One input as two files: the first 4 bytes (little-endian) are the length of the first part,
/// clamped to what is there; the rest is the second part. Inputs shorter than 4 bytes are all second part.
struct TwoParts {
    std::span<const std::uint8_t> first;
    std::span<const std::uint8_t> second;
};

inline TwoParts split(const std::uint8_t* data, std::size_t size) {
    if (size < 4) return {{}, {data, size}};
    std::uint32_t n = 0;
    std::memcpy(&n, data, 4);
    const std::size_t first = std::min<std::size_t>(n, size - 4);
    return {{data + 4, first}, {data + 4 + first, size - 4 - first}};
}

}  // namespace fuzz
