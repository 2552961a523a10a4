// specdec/detail/io/file_bytes.hpp — the bytes of a user's file: regular files only, mapped or read.
// SPDX-License-Identifier: MIT
//
// Every reader opens a path the user typed. A directory opens as a stream that reads nothing, a FIFO's
// open blocks until a writer comes and a device reads forever, so each reader first asks
// `not_a_regular_file` and refuses by name. The binary formats (safetensors, GGUF) map the file read-only
// and fall back to reading it where mmap fails (some file systems, empty files).
#pragma once

#include "../core/compiled.hpp"
#include "../core/error.hpp"

#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#if SPECDEC_BODIES
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#endif

namespace specdec::detail {

/// Why `path` cannot be read as a file ("is a directory, not a file", "is not a regular file (a FIFO,
/// socket or device)"), or "" when it can, or when it does not exist (the open then says so).
inline std::string not_a_regular_file(const std::filesystem::path& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) return "is a directory, not a file";
    if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
        return "is not a regular file (a FIFO, socket or device)";
    return {};
}

/// The whole of a text file; otherwise "[specdec.<where>] <path>: <why>".
SPECDEC_INLINE std::string read_text_file(const std::filesystem::path& path, std::string_view where);

/// A whole file, memory-mapped read-only or (where mmap fails) read into memory. Move-only; the bytes
/// stay where they are when it moves, so spans into them stay valid.
class FileBytes {
public:
    /// Opens a regular file; failures throw "[specdec.<where>] <path>: <why>".
    static FileBytes open(const std::filesystem::path& path, std::string_view where);

    FileBytes() = default;
    FileBytes(FileBytes&& other) noexcept { *this = std::move(other); }
    FileBytes& operator=(FileBytes&& other) noexcept {
        if (this != &other) {
            release();
            mapped_ = std::exchange(other.mapped_, nullptr);
            mapped_size_ = std::exchange(other.mapped_size_, 0);
            buffer_ = std::move(other.buffer_);  // moving a vector keeps its heap block
            bytes_ = std::exchange(other.bytes_, {});
        }
        return *this;
    }
    FileBytes(const FileBytes&) = delete;
    FileBytes& operator=(const FileBytes&) = delete;
    ~FileBytes() { release(); }

    std::span<const std::byte> bytes() const { return bytes_; }
    std::size_t size() const { return bytes_.size(); }
    bool is_mapped() const { return mapped_ != nullptr; }

private:
    void release() noexcept;

    void* mapped_ = nullptr;  // mmap base, or null
    std::size_t mapped_size_ = 0;
    std::vector<std::byte> buffer_;     // the copy when mmap is unavailable
    std::span<const std::byte> bytes_;  // the whole file, in either storage
};

#if SPECDEC_BODIES

SPECDEC_INLINE std::string read_text_file(const std::filesystem::path& path, std::string_view where) {
    if (std::string why = not_a_regular_file(path); !why.empty()) fail(where, path.string() + ": " + why);
    std::ifstream in(path, std::ios::binary);
    require(static_cast<bool>(in), where, [&] { return path.string() + ": cannot open file"; });
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

SPECDEC_INLINE void FileBytes::release() noexcept {
    if (mapped_ != nullptr) ::munmap(mapped_, mapped_size_);
    mapped_ = nullptr;
    mapped_size_ = 0;
}

SPECDEC_INLINE FileBytes FileBytes::open(const std::filesystem::path& path, std::string_view where) {
    const auto failed = [&](const std::string& what) { fail(where, path.string() + ": " + what); };
    if (std::string why = not_a_regular_file(path); !why.empty()) failed(why);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO's open returns at once
    if (fd < 0) failed("cannot open: " + std::string(std::strerror(errno)));
    struct stat st{};
    if (::fstat(fd, &st) != 0) {  // checked again on the open file: the path may have changed since
        const int e = errno;
        ::close(fd);
        failed("cannot stat: " + std::string(std::strerror(e)));
    }
    if (!S_ISREG(st.st_mode)) {
        ::close(fd);
        failed("is not a regular file (a FIFO, socket or device)");
    }
    FileBytes f;
    const auto size = static_cast<std::size_t>(st.st_size);
    void* p = size > 0 ? ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (p != MAP_FAILED) {
        f.mapped_ = p;
        f.mapped_size_ = size;
        f.bytes_ = {static_cast<const std::byte*>(p), size};
        ::close(fd);
        return f;
    }
    f.buffer_.resize(size);
    std::size_t done = 0;
    while (done < size) {
        const ssize_t n = ::read(fd, f.buffer_.data() + done, size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            const int e = errno;
            ::close(fd);
            failed("read failed after " + std::to_string(done) + " of " + std::to_string(size) +
                   " bytes: " + std::string(n < 0 ? std::strerror(e) : "unexpected end of file"));
        }
        done += static_cast<std::size_t>(n);
    }
    ::close(fd);
    f.bytes_ = {f.buffer_.data(), f.buffer_.size()};
    return f;
}

#endif

}  // namespace specdec::detail
