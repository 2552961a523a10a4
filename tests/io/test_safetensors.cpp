// Tests for detail/io/safetensors.hpp: bit-exact round trips and one broken file per validation rule.
#include "catch.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "detail/io/safetensors.hpp"

namespace test_safetensors {  // a unity build compiles several test files as one

using namespace specdec;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

/// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
    fs::path path;
    TempDir() {
        path = fs::temp_directory_path() / ("specdec_test_safetensors_" + std::to_string(::getpid()));
        fs::remove_all(path);
        fs::create_directories(path);
    }
    ~TempDir() {
        std::error_code ignored;
        fs::remove_all(path, ignored);
    }
    fs::path operator/(const std::string& name) const { return path / name; }
};

void write_bytes(const fs::path& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

/// A file with the given header text (length prefix computed) followed by `data_size` zero bytes.
fs::path write_raw(const TempDir& dir, const std::string& name, const std::string& header, std::size_t data_size) {
    std::string bytes(8, '\0');
    const std::uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    bytes += header;
    bytes.append(data_size, '\0');
    write_bytes(dir / name, bytes);
    return dir / name;
}

template <class T>
std::span<const std::byte> bytes_of(const std::vector<T>& v) {
    return std::as_bytes(std::span(v));
}

std::vector<std::uint32_t> tricky_f32_bits() {
    return {0x00000000u, 0x80000000u,  // +0, -0
            0x00000001u, 0x807FFFFFu,  // subnormals
            0x7F800000u, 0xFF800000u,  // infinities
            0x7FC00000u, 0x7FC12345u, 0xFFFFFFFFu, 0x7F800001u,  // quiet and signalling NaNs with payloads
            0x3F800000u, 0x4049FDB0u};
}

}  // namespace

TEST_CASE("safetensors round-trips F32 and BF16 bit for bit", "[safetensors]") {
    TempDir dir;
    const std::vector<std::uint32_t> f32 = tricky_f32_bits();  // (3, 4)
    const std::vector<std::uint16_t> b16 = {0x0000, 0x8000, 0x0001, 0x8001, 0x7F80, 0xFF80, 0x7FC1, 0x7F81, 0x3F80, 0xC049};
    const std::vector<std::uint16_t> f16 = {0x3C00, 0x0001, 0x8400, 0x7C00, 0x7E01, 0x0000};
    const std::vector<float> scalar = {42.5f};
    const std::vector<TensorToWrite> tensors = {
        {.name = "z.weight", .dtype = DType::kF32, .shape = {3, 4}, .bytes = bytes_of(f32)},
        {.name = "a.bf16", .dtype = DType::kBF16, .shape = {2, 5}, .bytes = bytes_of(b16)},
        {.name = "m.half", .dtype = DType::kF16, .shape = {6}, .bytes = bytes_of(f16)},
        {.name = "scalar", .dtype = DType::kF32, .shape = {}, .bytes = bytes_of(scalar)},
        {.name = "empty", .dtype = DType::kF32, .shape = {0, 7}, .bytes = {}},
    };
    const fs::path path = dir / "model.safetensors";
    write_safetensors(path, tensors, {{"format", "pt"}, {"note", "ünïcode"}});
    CHECK_FALSE(fs::exists(dir / "model.safetensors.tmp"));

    SafetensorsFile file = SafetensorsFile::open(path);
    CHECK(file.is_mapped());
    CHECK(file.metadata().at("format") == "pt");
    CHECK(file.metadata().at("note") == "ünïcode");
    REQUIRE(file.tensors().size() == 5);
    CHECK(file.tensors().front().name == "a.bf16");  // sorted by name

    SECTION("the data starts 8-byte aligned and the header is padded with spaces") {
        std::ifstream in(path, std::ios::binary);
        std::uint64_t n = 0;
        in.read(reinterpret_cast<char*>(&n), 8);
        CHECK((8 + n) % 8 == 0);
        std::string header(n, '\0');
        in.read(header.data(), static_cast<std::streamsize>(n));
        CHECK(header.front() == '{');
        CHECK(header.find("\"__metadata__\"") != std::string::npos);
    }
    SECTION("raw bytes and shapes come back unchanged") {
        const TensorInfo& w = file.get("z.weight");
        CHECK(w.dtype == DType::kF32);
        CHECK(w.shape == std::vector<std::int64_t>{3, 4});
        CHECK(w.numel == 12);
        REQUIRE(w.bytes.size() == 48);
        CHECK(std::memcmp(w.bytes.data(), f32.data(), 48) == 0);
        CHECK(file.get("scalar").shape.empty());
        CHECK(file.get("scalar").numel == 1);
        CHECK(file.get("empty").numel == 0);
        CHECK(file.read_floats(file.get("empty")).empty());
    }
    SECTION("read_floats keeps F32 bits, NaN payloads included") {
        const std::vector<float> got = file.read_floats(file.get("z.weight"));
        REQUIRE(got.size() == f32.size());
        for (std::size_t i = 0; i < got.size(); ++i) CHECK(std::bit_cast<std::uint32_t>(got[i]) == f32[i]);
        CHECK(file.read_floats(file.get("scalar"))[0] == 42.5f);
    }
    SECTION("BF16 widens exactly and read_bf16 returns the stored bits") {
        const std::vector<float> wide = file.read_floats(file.get("a.bf16"));
        const std::vector<bf16> narrow = file.read_bf16(file.get("a.bf16"));
        for (std::size_t i = 0; i < b16.size(); ++i) {
            CHECK(std::bit_cast<std::uint32_t>(wide[i]) == std::uint32_t{b16[i]} << 16);
            CHECK(narrow[i].bits == b16[i]);
        }
    }
    SECTION("F16 converts through half_to_float") {
        const std::vector<float> h = file.read_floats(file.get("m.half"));
        CHECK(h[0] == 1.0f);
        CHECK(h[1] == std::ldexp(1.0f, -24));
        CHECK(h[2] == -std::ldexp(1.0f, -14));
        CHECK(std::isinf(h[3]));
        CHECK(std::isnan(h[4]));
        CHECK(h[5] == 0.0f);
    }
    SECTION("read_bf16 rounds F32 to nearest even") {
        const std::vector<bf16> r = file.read_bf16(file.get("z.weight"));
        CHECK(r[11].bits == to_bf16(std::bit_cast<float>(0x4049FDB0u)).bits);
        CHECK(r[1].bits == 0x8000);
    }
    SECTION("a moved file keeps its tensors valid") {
        SafetensorsFile moved = std::move(file);
        CHECK(moved.read_floats(moved.get("scalar"))[0] == 42.5f);
        SafetensorsFile assigned = SafetensorsFile::open(path);
        assigned = std::move(moved);
        CHECK(assigned.get("z.weight").numel == 12);
    }
}

TEST_CASE("half_to_float agrees with the compiler's _Float16 on all 65536 inputs", "[safetensors]") {
#ifdef __FLT16_MAX__
    int mismatches = 0;
    for (std::uint32_t h = 0; h < 65536; ++h) {
        const auto bits = static_cast<std::uint16_t>(h);
        const float expected = static_cast<float>(std::bit_cast<_Float16>(bits));
        const float got = half_to_float(bits);
        const bool same = std::isnan(expected) ? std::isnan(got) && (std::bit_cast<std::uint32_t>(got) & 0x80000000u) ==
                                                                         (std::bit_cast<std::uint32_t>(expected) & 0x80000000u)
                                               : std::bit_cast<std::uint32_t>(got) == std::bit_cast<std::uint32_t>(expected);
        if (!same) ++mismatches;
    }
    CHECK(mismatches == 0);
#else
    CHECK(half_to_float(0x3C00) == 1.0f);
    CHECK(half_to_float(0x03FF) == std::ldexp(1023.0f, -24));
#endif
    CHECK(std::bit_cast<std::uint32_t>(half_to_float(0x7E01)) == 0x7FC02000u);  // NaN payload kept
}

TEST_CASE("safetensors reports a missing tensor with the closest names", "[safetensors][error]") {
    TempDir dir;
    const std::vector<float> v = {1, 2};
    const std::vector<TensorToWrite> tensors = {
        {.name = "model.norm.weight", .dtype = DType::kF32, .shape = {2}, .bytes = bytes_of(v)},
        {.name = "model.embed.weight", .dtype = DType::kF32, .shape = {1, 2}, .bytes = bytes_of(v)},
    };
    write_safetensors(dir / "m.safetensors", tensors);
    const SafetensorsFile file = SafetensorsFile::open(dir / "m.safetensors");
    CHECK(file.find("nope") == nullptr);
    CHECK_THROWS_WITH(file.get("model.norm.weigth"),
                      Contains("m.safetensors: missing tensor 'model.norm.weigth' (file has 2 tensors; closest: "
                               "'model.norm.weight', 'model.embed.weight')"));
    std::vector<float> small(1);
    CHECK_THROWS_WITH(file.read_floats(file.get("model.norm.weight"), small),
                      Contains("tensor 'model.norm.weight': output holds 1 floats, tensor has 2 (shape [2])"));
    TensorInfo foreign = file.get("model.norm.weight");
    const std::vector<std::byte> elsewhere(8);
    foreign.bytes = elsewhere;
    CHECK_THROWS_WITH(file.read_floats(foreign), Contains("does not belong to this file"));
}

TEST_CASE("safetensors rejects broken files naming the file, tensor and value", "[safetensors][error]") {
    TempDir dir;
    SECTION("file shorter than the length prefix") {
        write_bytes(dir / "short.safetensors", "abc");
        CHECK_THROWS_WITH(SafetensorsFile::open(dir / "short.safetensors"),
                          Contains("[specdec.safetensors] " + (dir / "short.safetensors").string() +
                                   ": file is 3 bytes, shorter than the 8-byte header length"));
        write_bytes(dir / "empty.safetensors", "");
        CHECK_THROWS_WITH(SafetensorsFile::open(dir / "empty.safetensors"), Contains("file is 0 bytes"));
    }
    SECTION("missing file") {
        CHECK_THROWS_WITH(SafetensorsFile::open(dir / "absent.safetensors"), Contains("absent.safetensors: cannot open"));
    }
    SECTION("header length beyond the file") {
        std::string bytes(8, '\0');
        bytes[0] = 100;
        write_bytes(dir / "long.safetensors", bytes + "{}");
        CHECK_THROWS_WITH(SafetensorsFile::open(dir / "long.safetensors"),
                          Contains("long.safetensors: header length 100 runs past the end of the file (10 bytes)"));
    }
    SECTION("malformed header JSON") {
        const fs::path p = write_raw(dir, "bad.safetensors", R"({"a": {"dtype": "F32",})", 0);
        CHECK_THROWS_WITH(SafetensorsFile::open(p),
                          Contains("bad.safetensors: malformed header JSON: header:1:23: expected a string key in object"));
        const fs::path q = write_raw(dir, "array.safetensors", "[]", 0);
        CHECK_THROWS_WITH(SafetensorsFile::open(q), Contains("array.safetensors: header is not a JSON object"));
    }
    SECTION("unknown dtype") {
        const fs::path p = write_raw(dir, "d.safetensors", R"({"w": {"dtype": "F33", "shape": [1], "data_offsets": [0, 4]}})", 4);
        CHECK_THROWS_WITH(SafetensorsFile::open(p), Contains("d.safetensors: tensor 'w': unknown dtype 'F33'"));
    }
    SECTION("missing fields") {
        const fs::path p = write_raw(dir, "f.safetensors", R"({"w": {"dtype": "F32", "data_offsets": [0, 4]}})", 4);
        CHECK_THROWS_WITH(SafetensorsFile::open(p), Contains("tensor 'w': missing field 'shape'"));
    }
    SECTION("shape entries must be non-negative integers") {
        const fs::path p = write_raw(dir, "s.safetensors", R"({"w": {"dtype": "F32", "shape": [2, -3], "data_offsets": [0, 0]}})", 0);
        CHECK_THROWS_WITH(SafetensorsFile::open(p), Contains("tensor 'w': shape[1] is -3, expected a non-negative integer"));
        const fs::path q = write_raw(dir, "t.safetensors", R"({"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 0]}})", 0);
        CHECK_THROWS_WITH(SafetensorsFile::open(q), Contains("tensor 'w': shape[0] is 2.5, expected a non-negative integer"));
        const fs::path r = write_raw(dir, "u.safetensors", R"({"w": {"dtype": "F32", "shape": ["2"], "data_offsets": [0, 0]}})", 0);
        CHECK_THROWS_WITH(SafetensorsFile::open(r), Contains("shape[0] is \"2\""));
        const fs::path o = write_raw(dir, "o.safetensors",
                                     R"({"w": {"dtype": "F64", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 0);
        CHECK_THROWS_WITH(SafetensorsFile::open(o), Contains("has too many elements"));
    }
    SECTION("byte size must match shape and dtype") {
        const fs::path p = write_raw(dir, "model.safetensors",
                                     R"({"model.norm.weight": {"dtype": "F32", "shape": [288], "data_offsets": [0, 1120]}})", 1120);
        CHECK_THROWS_WITH(SafetensorsFile::open(p),
                          Contains("model.safetensors: tensor 'model.norm.weight': expected 288 elements × 4 bytes = 1152 "
                                   "bytes (shape [288], F32), data_offsets [0, 1120] hold 1120"));
    }
    SECTION("offsets out of the data range or reversed") {
        const fs::path p = write_raw(dir, "r.safetensors", R"({"w": {"dtype": "U8", "shape": [8], "data_offsets": [4, 12]}})", 10);
        CHECK_THROWS_WITH(SafetensorsFile::open(p),
                          Contains("tensor 'w': data_offsets [4, 12] run past the end of the data (10 bytes)"));
        const fs::path q = write_raw(dir, "q.safetensors", R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [6, 2]}})", 10);
        CHECK_THROWS_WITH(SafetensorsFile::open(q), Contains("tensor 'w': data_offsets [6, 2] have begin > end"));
        const fs::path n = write_raw(dir, "n.safetensors", R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [-1, 2]}})", 10);
        CHECK_THROWS_WITH(SafetensorsFile::open(n), Contains("data_offsets [-1, 2] are negative"));
        const fs::path m = write_raw(dir, "m.safetensors", R"({"w": {"dtype": "U8", "shape": [0], "data_offsets": [0]}})", 10);
        CHECK_THROWS_WITH(SafetensorsFile::open(m), Contains("tensor 'w': data_offsets is [0], expected [begin, end] integers"));
    }
    SECTION("overlapping tensors are named together") {
        const fs::path p = write_raw(dir, "o.safetensors",
                                     R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                                         "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
                                     24);
        CHECK_THROWS_WITH(SafetensorsFile::open(p), Contains("o.safetensors: tensors 'a' [0, 16] and 'b' [8, 24] overlap"));
    }
    SECTION("duplicate tensor names in the header") {
        const fs::path p = write_raw(dir, "dup.safetensors",
                                     R"({"a": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]},
"a": {"dtype": "U8", "shape": [1], "data_offsets": [1, 2]}})",
                                     2);
        CHECK_THROWS_WITH(SafetensorsFile::open(p), Contains("malformed header JSON: header:2:1: duplicate key 'a'"));
    }
    SECTION("metadata values must be strings") {
        const fs::path p = write_raw(dir, "meta.safetensors", R"({"__metadata__": {"step": 3}})", 0);
        CHECK_THROWS_WITH(SafetensorsFile::open(p), Contains("__metadata__ 'step' is integer 3, expected a string"));
    }
    SECTION("other dtypes validate but do not convert to float") {
        const fs::path p = write_raw(dir, "i.safetensors",
                                     R"({"ids": {"dtype": "I64", "shape": [2], "data_offsets": [0, 16]},
                                         "mask": {"dtype": "BOOL", "shape": [3], "data_offsets": [16, 19]}})",
                                     32);  // the last 13 bytes belong to no tensor: allowed
        const SafetensorsFile file = SafetensorsFile::open(p);
        CHECK(file.get("mask").bytes.size() == 3);
        CHECK_THROWS_WITH(file.read_floats(file.get("ids")),
                          Contains("i.safetensors: tensor 'ids': unsupported dtype for float conversion: I64"));
    }
}

TEST_CASE("write_safetensors refuses inconsistent tensors", "[safetensors][error]") {
    TempDir dir;
    const std::vector<float> v = {1, 2, 3};
    SECTION("repeated names") {
        const std::vector<TensorToWrite> t = {{.name = "w", .dtype = DType::kF32, .shape = {3}, .bytes = bytes_of(v)},
                                              {.name = "w", .dtype = DType::kF32, .shape = {3}, .bytes = bytes_of(v)}};
        CHECK_THROWS_WITH(write_safetensors(dir / "x.safetensors", t), Contains("x.safetensors: tensor name 'w' appears twice"));
    }
    SECTION("byte size that does not match the shape") {
        const std::vector<TensorToWrite> t = {{.name = "w", .dtype = DType::kBF16, .shape = {2, 2}, .bytes = bytes_of(v)}};
        CHECK_THROWS_WITH(write_safetensors(dir / "x.safetensors", t),
                          Contains("tensor 'w': shape [2, 2] BF16 needs 8 bytes, got 12"));
    }
    SECTION("negative dimension") {
        const std::vector<TensorToWrite> t = {{.name = "w", .dtype = DType::kF32, .shape = {-3}, .bytes = bytes_of(v)}};
        CHECK_THROWS_WITH(write_safetensors(dir / "x.safetensors", t), Contains("has a negative dimension"));
    }
    CHECK_FALSE(fs::exists(dir / "x.safetensors"));
}

}  // namespace test_safetensors
