// specdec/detail/io/safetensors.hpp — read (memory-mapped, validated up front) and write safetensors files.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../model/bf16.hpp"
#include "../core/compiled.hpp"
#include "../core/error.hpp"
#include "file_bytes.hpp"
#include "json.hpp"
#if SPECDEC_BODIES  // only the bodies read and write files
#include <fstream>
#endif

// Format (https://github.com/huggingface/safetensors): an 8-byte little-endian u64 N, N bytes of
// JSON header {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [begin, end]}},
// then the data buffer; offsets are relative to the first byte after the header.

static_assert(std::endian::native == std::endian::little,
              "safetensors stores little-endian data; this reader copies it without swapping");

namespace specdec {

// ---------------------------------------------------------------------------------------------
// Data types

enum class DType { kBool, kU8, kI8, kF8E4M3, kF8E5M2, kI16, kU16, kF16, kBF16, kI32, kU32, kF32, kI64, kU64, kF64 };

namespace detail {

struct DTypeEntry {
    DType dtype;
    std::string_view name;
    std::size_t size;
};

inline constexpr DTypeEntry kDTypes[] = {
    {DType::kBool, "BOOL", 1},      {DType::kU8, "U8", 1},   {DType::kI8, "I8", 1},
    {DType::kF8E4M3, "F8_E4M3", 1}, {DType::kF8E5M2, "F8_E5M2", 1},
    {DType::kI16, "I16", 2},        {DType::kU16, "U16", 2}, {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},      {DType::kI32, "I32", 4}, {DType::kU32, "U32", 4},
    {DType::kF32, "F32", 4},        {DType::kI64, "I64", 8}, {DType::kU64, "U64", 8},
    {DType::kF64, "F64", 8},
};

}  // namespace detail

/// The safetensors spelling: "F32", "BF16", ...
inline std::string_view dtype_name(DType d) {
    for (const auto& e : detail::kDTypes)
        if (e.dtype == d) return e.name;
    return "?";
}

/// Bytes per element.
inline std::size_t dtype_size(DType d) {
    for (const auto& e : detail::kDTypes)
        if (e.dtype == d) return e.size;
    return 0;
}

inline std::optional<DType> parse_dtype(std::string_view name) {
    for (const auto& e : detail::kDTypes)
        if (e.name == name) return e.dtype;
    return std::nullopt;
}

/// IEEE binary16 → float, exact for every input (subnormals normalised, NaN payloads kept).
inline float half_to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    std::uint32_t exponent = (h >> 10) & 0x1Fu;
    std::uint32_t mantissa = h & 0x3FFu;
    std::uint32_t bits;
    if (exponent == 0x1F) {
        bits = sign | 0x7F800000u | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else {
        // Subnormal m * 2^-24: shift the leading one into the implicit bit, lowering the exponent.
        int shift = 0;
        while ((mantissa & 0x400u) == 0) {
            mantissa <<= 1;
            ++shift;
        }
        bits = sign | (static_cast<std::uint32_t>(127 - 15 + 1 - shift) << 23) | ((mantissa & 0x3FFu) << 13);
    }
    return std::bit_cast<float>(bits);
}

/// n values of type `dtype` at `src` (any alignment) as float: F32 and BF16 exactly, F16 exactly, F64
/// rounded. False for another dtype.
inline bool convert_to_float(DType dtype, const std::byte* src, float* out, std::size_t n) {
    switch (dtype) {
        case DType::kF32:
            if (n > 0) std::memcpy(out, src, n * 4);
            return true;
        case DType::kBF16:
            for (std::size_t i = 0; i < n; ++i) {
                bf16 b;
                std::memcpy(&b.bits, src + 2 * i, 2);
                out[i] = to_float(b);
            }
            return true;
        case DType::kF16:
            for (std::size_t i = 0; i < n; ++i) {
                std::uint16_t h;
                std::memcpy(&h, src + 2 * i, 2);
                out[i] = half_to_float(h);
            }
            return true;
        case DType::kF64:
            for (std::size_t i = 0; i < n; ++i) {
                double d;
                std::memcpy(&d, src + 8 * i, 8);
                out[i] = static_cast<float>(d);
            }
            return true;
        default: return false;
    }
}

// ---------------------------------------------------------------------------------------------
// Reading

/// One tensor of an open file; `bytes` points into the mapping and lives as long as the file.
struct TensorInfo {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<std::int64_t> shape;
    std::int64_t numel = 0;              // product of shape (1 for a scalar)
    std::span<const std::byte> bytes;    // numel * dtype_size(dtype) bytes
    std::int64_t data_begin = 0;         // data_offsets as written in the header
    std::int64_t data_end = 0;
};

using SafetensorsMetadata = std::map<std::string, std::string, std::less<>>;

/// A safetensors file, memory-mapped read-only (or read into memory if mmap fails), with the
/// whole header validated in open(): after that every TensorInfo is known to be in bounds,
/// sized to its shape and disjoint from the others.
class SafetensorsFile {
public:
    static SafetensorsFile open(const std::filesystem::path& path);

    SafetensorsFile(SafetensorsFile&&) noexcept = default;  // the bytes stay put: spans into them stay valid
    SafetensorsFile& operator=(SafetensorsFile&&) noexcept = default;

    const std::filesystem::path& path() const { return path_; }
    /// Tensors sorted by name.
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    const SafetensorsMetadata& metadata() const { return metadata_; }
    /// Whether the file is memory-mapped (false: it was read into memory).
    bool is_mapped() const { return bytes_.is_mapped(); }

    const TensorInfo* find(std::string_view name) const;
    /// Throws "missing tensor 'x'", listing the closest names as a hint.
    const TensorInfo& get(std::string_view name) const;

    /// Converts F32, BF16, F16 or F64 to float; other dtypes throw.
    std::vector<float> read_floats(const TensorInfo& tensor) const;
    /// As above into `out`, which must hold exactly tensor.numel floats.
    void read_floats(const TensorInfo& tensor, std::span<float> out) const;
    /// BF16 copied exactly; F32/F16/F64 rounded to nearest even.
    std::vector<bf16> read_bf16(const TensorInfo& tensor) const;

private:
    SafetensorsFile() = default;
    void parse_header(std::span<const std::byte> header, std::span<const std::byte> data);
    [[noreturn]] void fail(const std::string& what) const;
    void check_owned(const TensorInfo& tensor) const;

    std::filesystem::path path_;
    detail::FileBytes bytes_;
    std::span<const std::byte> file_;  // bytes_.bytes(): the whole file
    std::vector<TensorInfo> tensors_;  // sorted by name
    SafetensorsMetadata metadata_;
};

namespace detail {

inline std::string shape_string(std::span<const std::int64_t> shape) {
    std::string s = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

inline std::string range_string(std::int64_t begin, std::int64_t end) {
    std::string s = "[";  // appended piece by piece: GCC 12's -Wrestrict misfires on "[" + std::string where inlined
    s += std::to_string(begin);
    s += ", ";
    s += std::to_string(end);
    return s + "]";
}

}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Writing

/// One tensor to write: `bytes` must hold product(shape) * dtype_size(dtype) bytes.
struct TensorToWrite {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<std::int64_t> shape;
    std::span<const std::byte> bytes;
};

/// Writes a safetensors file: header sorted by name (as HF does), data in the given order, the
/// header padded with spaces so the data starts 8-byte aligned. Written to "<path>.tmp" and
/// renamed, so a reader never sees a half-written file.
SPECDEC_INLINE void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                                      const SafetensorsMetadata& metadata = {});

#if SPECDEC_BODIES  // reading and writing: compiled once where a program links specdec::compiled

SPECDEC_INLINE void SafetensorsFile::fail(const std::string& what) const {
    detail::fail("safetensors", path_.string() + ": " + what);
}

SPECDEC_INLINE SafetensorsFile SafetensorsFile::open(const std::filesystem::path& path) {
    SafetensorsFile file;
    file.path_ = path;
    file.bytes_ = detail::FileBytes::open(path, "safetensors");
    file.file_ = file.bytes_.bytes();
    if (file.file_.size() < 8)
        file.fail("file is " + std::to_string(file.file_.size()) + " bytes, shorter than the 8-byte header length");
    std::uint64_t header_size = 0;
    std::memcpy(&header_size, file.file_.data(), 8);
    if (header_size > file.file_.size() - 8)
        file.fail("header length " + std::to_string(header_size) + " runs past the end of the file (" +
                  std::to_string(file.file_.size()) + " bytes)");
    file.parse_header(file.file_.subspan(8, header_size), file.file_.subspan(8 + header_size));
    return file;
}

SPECDEC_INLINE void SafetensorsFile::parse_header(std::span<const std::byte> header, std::span<const std::byte> data) {
    json::Value root;
    try {
        root = json::parse({reinterpret_cast<const char*>(header.data()), header.size()}, "header");
    } catch (const error& e) {
        std::string_view message = e.what();
        if (std::size_t p = message.find("] "); p != std::string_view::npos) message.remove_prefix(p + 2);
        fail("malformed header JSON: " + std::string(message));
    }
    if (!root.is_object()) fail("header is not a JSON object");

    for (const json::Member& member : root.as_object()) {
        const std::string& name = member.key;
        const json::Value& entry = member.value;
        const std::string tensor = "tensor '" + name + "'";
        if (name == "__metadata__") {
            if (!entry.is_object()) fail("__metadata__ is not an object");
            for (const json::Member& m : entry.as_object()) {
                if (!m.value.is_string())
                    fail("__metadata__ '" + m.key + "' is " + detail::json_preview(m.value) + ", expected a string");
                metadata_.emplace(m.key, m.value.as_string());
            }
            continue;
        }
        if (!entry.is_object()) fail(tensor + ": entry is " + detail::json_preview(entry) + ", expected an object");
        const json::Value* dtype_field = entry.find("dtype");
        const json::Value* shape_field = entry.find("shape");
        const json::Value* offsets_field = entry.find("data_offsets");
        if (!dtype_field || !shape_field || !offsets_field)
            fail(tensor + ": missing field '" +
                 std::string(!dtype_field ? "dtype" : !shape_field ? "shape" : "data_offsets") + "'");

        TensorInfo info;
        info.name = name;
        if (!dtype_field->is_string()) fail(tensor + ": dtype is " + detail::json_preview(*dtype_field) + ", expected a string");
        const std::optional<DType> dtype = parse_dtype(dtype_field->as_string());
        if (!dtype) fail(tensor + ": unknown dtype '" + dtype_field->as_string() + "'");
        info.dtype = *dtype;

        if (!shape_field->is_array()) fail(tensor + ": shape is " + detail::json_preview(*shape_field) + ", expected an array");
        const json::Array& dims = shape_field->as_array();
        // numel * dtype size must not overflow before it is compared with the data range.
        const std::int64_t max_elements = std::numeric_limits<std::int64_t>::max() / 8;
        info.numel = 1;
        for (std::size_t i = 0; i < dims.size(); ++i) {
            const std::string which = tensor + ": shape[" + std::to_string(i) + "] is ";
            if (!dims[i].is_integer()) fail(which + json::dump(dims[i]) + ", expected a non-negative integer");
            const std::int64_t d = dims[i].as_int();
            if (d < 0) fail(which + std::to_string(d) + ", expected a non-negative integer");
            info.shape.push_back(d);
            if (info.numel != 0 && d > max_elements / info.numel)
                fail(tensor + ": shape " + detail::shape_string(info.shape) + " has too many elements");
            info.numel *= d;
        }

        if (!offsets_field->is_array() || offsets_field->as_array().size() != 2 ||
            !offsets_field->as_array()[0].is_integer() || !offsets_field->as_array()[1].is_integer())
            fail(tensor + ": data_offsets is " + json::dump(*offsets_field) + ", expected [begin, end] integers");
        const std::int64_t begin = offsets_field->as_array()[0].as_int();
        const std::int64_t end = offsets_field->as_array()[1].as_int();
        const std::string offsets = "data_offsets " + detail::range_string(begin, end);
        if (begin < 0 || end < 0) fail(tensor + ": " + offsets + " are negative");
        if (begin > end) fail(tensor + ": " + offsets + " have begin > end");
        if (static_cast<std::uint64_t>(end) > data.size())
            fail(tensor + ": " + offsets + " run past the end of the data (" + std::to_string(data.size()) + " bytes)");
        const auto element_size = static_cast<std::int64_t>(dtype_size(info.dtype));
        if (info.numel * element_size != end - begin)
            fail(tensor + ": expected " + std::to_string(info.numel) + " elements × " + std::to_string(element_size) +
                 " bytes = " + std::to_string(info.numel * element_size) + " bytes (shape " +
                 detail::shape_string(info.shape) + ", " + std::string(dtype_name(info.dtype)) + "), " + offsets +
                 " hold " + std::to_string(end - begin));
        info.data_begin = begin;
        info.data_end = end;
        info.bytes = data.subspan(static_cast<std::size_t>(begin), static_cast<std::size_t>(end - begin));
        tensors_.push_back(std::move(info));
    }

    // Two tensors sharing bytes is a corrupt (or malicious) file; empty tensors overlap nothing.
    std::vector<const TensorInfo*> by_offset;
    for (const TensorInfo& t : tensors_)
        if (t.data_end > t.data_begin) by_offset.push_back(&t);
    std::sort(by_offset.begin(), by_offset.end(), [](const TensorInfo* a, const TensorInfo* b) {
        return a->data_begin != b->data_begin ? a->data_begin < b->data_begin : a->name < b->name;
    });
    for (std::size_t i = 1; i < by_offset.size(); ++i) {
        const TensorInfo& a = *by_offset[i - 1];
        const TensorInfo& b = *by_offset[i];
        if (b.data_begin < a.data_end)
            fail("tensors '" + a.name + "' " + detail::range_string(a.data_begin, a.data_end) + " and '" + b.name +
                 "' " + detail::range_string(b.data_begin, b.data_end) + " overlap");
    }
    std::sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
}

SPECDEC_INLINE const TensorInfo* SafetensorsFile::find(std::string_view name) const {
    auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                               [](const TensorInfo& t, std::string_view n) { return t.name < n; });
    return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

namespace detail {

/// Levenshtein distance, for "did you mean" hints on missing tensor names.
inline std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diagonal = up;
        }
    }
    return row[b.size()];
}

/// "; closest: 'a', 'b', 'c'": the three tensor names nearest `name` by edit distance, for a
/// missing-tensor error (a typo or another naming scheme shows at once).
inline std::string closest_names(std::string_view name, std::span<const TensorInfo> tensors) {
    std::vector<std::pair<std::size_t, const std::string*>> scored;
    for (const TensorInfo& t : tensors) scored.emplace_back(edit_distance(name, t.name), &t.name);
    std::sort(scored.begin(), scored.end(),
              [](const auto& a, const auto& b) { return a.first != b.first ? a.first < b.first : *a.second < *b.second; });
    std::string hint;
    for (std::size_t i = 0; i < scored.size() && i < 3; ++i) hint += (i ? ", '" : "; closest: '") + *scored[i].second + "'";
    return hint;
}

}  // namespace detail

SPECDEC_INLINE const TensorInfo& SafetensorsFile::get(std::string_view name) const {
    if (const TensorInfo* t = find(name)) return *t;
    const std::string hint = detail::closest_names(name, tensors_);
    fail("missing tensor '" + std::string(name) + "' (file has " + std::to_string(tensors_.size()) + " tensors" + hint + ")");
}

SPECDEC_INLINE void SafetensorsFile::check_owned(const TensorInfo& tensor) const {
    const bool inside = tensor.bytes.empty() || (tensor.bytes.data() >= file_.data() &&
                                                 tensor.bytes.data() + tensor.bytes.size() <= file_.data() + file_.size());
    if (!inside) fail("tensor '" + tensor.name + "' does not belong to this file");
}

SPECDEC_INLINE void SafetensorsFile::read_floats(const TensorInfo& tensor, std::span<float> out) const {
    check_owned(tensor);
    if (out.size() != static_cast<std::size_t>(tensor.numel))
        fail("tensor '" + tensor.name + "': output holds " + std::to_string(out.size()) + " floats, tensor has " +
             std::to_string(tensor.numel) + " (shape " + detail::shape_string(tensor.shape) + ")");
    if (!convert_to_float(tensor.dtype, tensor.bytes.data(), out.data(), out.size()))
        fail("tensor '" + tensor.name + "': unsupported dtype for float conversion: " +
             std::string(dtype_name(tensor.dtype)) + " (supported: F32, BF16, F16, F64)");
}

SPECDEC_INLINE std::vector<float> SafetensorsFile::read_floats(const TensorInfo& tensor) const {
    std::vector<float> out(static_cast<std::size_t>(tensor.numel));
    read_floats(tensor, out);
    return out;
}

SPECDEC_INLINE std::vector<bf16> SafetensorsFile::read_bf16(const TensorInfo& tensor) const {
    check_owned(tensor);
    std::vector<bf16> out(static_cast<std::size_t>(tensor.numel));
    if (tensor.dtype == DType::kBF16) {
        if (!out.empty()) std::memcpy(out.data(), tensor.bytes.data(), tensor.bytes.size());
        return out;
    }
    const std::vector<float> f = read_floats(tensor);
    for (std::size_t i = 0; i < f.size(); ++i) out[i] = to_bf16(f[i]);
    return out;
}

SPECDEC_INLINE void write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                                      const SafetensorsMetadata& metadata) {
    const std::string file = path.string();
    auto fail = [&](const std::string& what) { detail::fail("safetensors", file + ": " + what); };

    std::vector<std::pair<std::string_view, std::size_t>> sorted;  // (name, index into tensors)
    for (std::size_t i = 0; i < tensors.size(); ++i) sorted.emplace_back(tensors[i].name, i);
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 1; i < sorted.size(); ++i)
        if (sorted[i].first == sorted[i - 1].first) fail("tensor name '" + std::string(sorted[i].first) + "' appears twice");

    std::vector<std::int64_t> offsets(tensors.size() + 1, 0);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
        const TensorToWrite& t = tensors[i];
        if (t.name == "__metadata__") fail("'__metadata__' is reserved and cannot name a tensor");
        std::int64_t numel = 1;
        for (std::int64_t d : t.shape) {
            if (d < 0) fail("tensor '" + t.name + "': shape " + detail::shape_string(t.shape) + " has a negative dimension");
            if (numel != 0 && d > std::numeric_limits<std::int64_t>::max() / 8 / numel)
                fail("tensor '" + t.name + "': shape " + detail::shape_string(t.shape) + " has too many elements");
            numel *= d;
        }
        const auto expected = static_cast<std::uint64_t>(numel) * dtype_size(t.dtype);
        if (expected != t.bytes.size())
            fail("tensor '" + t.name + "': shape " + detail::shape_string(t.shape) + " " + std::string(dtype_name(t.dtype)) +
                 " needs " + std::to_string(expected) + " bytes, got " + std::to_string(t.bytes.size()));
        offsets[i + 1] = offsets[i] + static_cast<std::int64_t>(t.bytes.size());
    }

    json::Object header;
    if (!metadata.empty()) {
        json::Object meta;
        for (const auto& [key, value] : metadata) meta.insert(key, value);
        header.insert("__metadata__", std::move(meta));
    }
    for (const auto& [name, i] : sorted) {
        json::Object entry;
        entry.insert("dtype", std::string(dtype_name(tensors[i].dtype)));
        json::Array shape(tensors[i].shape.begin(), tensors[i].shape.end());
        entry.insert("shape", std::move(shape));
        entry.insert("data_offsets", json::Array{offsets[i], offsets[i + 1]});
        header.insert(std::string(name), std::move(entry));
    }
    std::string header_text = json::dump(json::Value(std::move(header)));
    header_text.append((8 - header_text.size() % 8) % 8, ' ');
    const std::uint64_t header_size = header_text.size();

    const std::filesystem::path temp = file + ".tmp";
    {
        std::ofstream out(temp, std::ios::binary | std::ios::trunc);
        if (!out) fail("cannot create " + temp.string());
        out.write(reinterpret_cast<const char*>(&header_size), 8);
        out.write(header_text.data(), static_cast<std::streamsize>(header_text.size()));
        for (const TensorToWrite& t : tensors)
            out.write(reinterpret_cast<const char*>(t.bytes.data()), static_cast<std::streamsize>(t.bytes.size()));
        out.flush();
        if (!out) {
            out.close();
            std::error_code ignored;
            std::filesystem::remove(temp, ignored);
            fail("write to " + temp.string() + " failed");
        }
    }
    std::error_code ec;
    std::filesystem::rename(temp, path, ec);
    if (ec) {
        std::filesystem::remove(temp, ec);
        fail("cannot rename " + temp.string() + " into place: " + ec.message());
    }
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
