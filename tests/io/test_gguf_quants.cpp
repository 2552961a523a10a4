// GGUF's quantized types against ggml itself: blocks ggml's quantizer wrote and the float32 values ggml's
// dequantizer made of them (tests/data/gguf/quants/, written by scripts/ggml_quant_golden.cpp), which
// specdec must reproduce bit for bit; partial blocks refused by type; and a model whose matrices are
// held in each type, loaded whole and deferred, giving the same logits.
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "helpers.hpp"
#include "source_dir.hpp"

namespace test_gguf_quants {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = fs::path(SPECDEC_SOURCE_DIR) / "tests/data/gguf/quants";
constexpr std::int64_t kValues = 2 * 512;  // ggml_quant_golden's buffer: 2 rows of 512

/// Each quantized type with the byte offsets of the f16 scales (d, then dmin where the type has one) in
/// its block; IQ1_M has none (its d is spread over the top nibbles of four uint16 at byte 48: d_bits),
/// nor have the FP4 types (one E8M0 byte at 0 in MXFP4, four UE4M3 bytes at 0..3 in NVFP4).
struct Quant {
    GgufType type;
    std::vector<std::size_t> halves;
};
const std::vector<Quant> kQuants = {
    {GgufType::kQ8_0, {0}},     {GgufType::kQ4_0, {0}},      {GgufType::kQ4_1, {0, 2}}, {GgufType::kQ5_0, {0}},
    {GgufType::kQ5_1, {0, 2}},  {GgufType::kQ2_K, {80, 82}}, {GgufType::kQ3_K, {108}},  {GgufType::kQ4_K, {0, 2}},
    {GgufType::kQ5_K, {0, 2}}, {GgufType::kQ6_K, {208}},  {GgufType::kIQ1_S, {0}}, {GgufType::kIQ1_M, {}},
    {GgufType::kIQ2_XXS, {0}}, {GgufType::kIQ2_XS, {0}}, {GgufType::kIQ2_S, {0}}, {GgufType::kIQ3_XXS, {0}},
    {GgufType::kIQ3_S, {0}},   {GgufType::kIQ4_NL, {0}}, {GgufType::kIQ4_XS, {0}},  {GgufType::kTQ1_0, {52}},
    {GgufType::kTQ2_0, {64}},  {GgufType::kMXFP4, {}},   {GgufType::kNVFP4, {}},    {GgufType::kQ1_0, {0}},
    {GgufType::kQ2_0, {0}},
};

constexpr std::size_t kIq1mScales = 48;  // IQ1_M: scales[8] after qs[32] and qh[16]

/// Sets every scale of the block at `block` to `half` (an f16); an FP4 type's to the power of two at or
/// below the half's value (MXFP4), or 2^-9 (NVFP4: the UE4M3 subnormal 2 · 2^-10).
void set_scales(const Quant& q, std::byte* block, std::uint16_t half) {
    for (const std::size_t h : q.halves) std::memcpy(block + h, &half, 2);
    const int exponent = ((half >> 10) & 0x1F) - 15;  // of the f16
    if (q.type == GgufType::kMXFP4) block[0] = static_cast<std::byte>(exponent + 128);  // the reader's 2^(e - 128)
    if (q.type == GgufType::kNVFP4)
        for (int sub = 0; sub < 4; ++sub) block[sub] = std::byte{0x02};
    if (q.type != GgufType::kIQ1_M) return;
    for (int k = 0; k < 4; ++k) {  // nibble k of d is the top nibble of the k-th uint16
        std::uint16_t sc;
        std::memcpy(&sc, block + kIq1mScales + 2 * k, 2);
        sc = static_cast<std::uint16_t>((sc & 0x0FFF) | (((half >> (4 * k)) & 0xF) << 12));
        std::memcpy(block + kIq1mScales + 2 * k, &sc, 2);
    }
}

/// Flips d's lowest exponent bit (f16 bit 10; bit 0 of E8M0, bit 3 of the first UE4M3) in the block at `block`.
void flip_scale(const Quant& q, std::byte* block) {
    if (q.type == GgufType::kMXFP4)
        block[0] ^= std::byte{0x01};
    else if (q.type == GgufType::kNVFP4)
        block[0] ^= std::byte{0x08};
    else if (q.type == GgufType::kIQ1_M)
        block[kIq1mScales + 2 * 2 + 1] ^= std::byte{0x40};  // bit 10 of d: bit 14 of the third uint16
    else
        block[q.halves[0] + 1] ^= std::byte{0x04};
}

std::vector<std::byte> read_bytes(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    std::ostringstream s;
    s << in.rdbuf();
    const std::string text = s.str();
    const auto* p = reinterpret_cast<const std::byte*>(text.data());
    return {p, p + text.size()};
}

std::vector<float> dequantize(GgufType type, std::span<const std::byte> blocks, std::int64_t n) {
    std::vector<float> out(static_cast<std::size_t>(n));
    detail::gguf_dequantize(static_cast<std::uint32_t>(type), blocks, out.data(), n);
    return out;
}

/// Positions where two float32 arrays differ in their bits (NaN compared as bits too).
std::vector<std::size_t> differing_bits(const std::vector<float>& a, const std::vector<float>& b) {
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (std::bit_cast<std::uint32_t>(a[i]) != std::bit_cast<std::uint32_t>(b[i])) at.push_back(i);
    return at;
}

/// Logits of a 5-token chain.
std::vector<float> logits(const Config& c, const Weights& w, ModelOptions options = {}) {
    CpuModel m(c, w, options);
    const Rows r = m.forward(Tree::chain(std::vector<int>{5, 9, 33, 2, 61}));
    return {r.data.begin(), r.data.end()};
}

}  // namespace

TEST_CASE("every quantized type dequantizes ggml's own blocks to ggml's float32 values, bit for bit",
          "[gguf][quant][golden]") {
    for (const Quant& q : kQuants) {
        const detail::GgufTypeTraits t = detail::gguf_type_traits(static_cast<std::uint32_t>(q.type));
        CAPTURE(t.name);
        const std::vector<std::byte> blocks = read_bytes(kDir / (std::string(t.name) + ".blocks"));
        const std::vector<std::byte> raw = read_bytes(kDir / (std::string(t.name) + ".f32"));
        REQUIRE(blocks.size() == static_cast<std::size_t>(kValues / t.block * t.bytes));
        REQUIRE(raw.size() == static_cast<std::size_t>(kValues) * 4);
        std::vector<float> ggml(static_cast<std::size_t>(kValues));
        std::memcpy(ggml.data(), raw.data(), raw.size());  // little-endian, as this reader is (gguf.hpp)
        std::size_t nonzero = 0;
        for (float v : ggml) nonzero += v != 0.0f;
        REQUIRE(nonzero > static_cast<std::size_t>(kValues) / 3);  // 288 inputs are zeros; the rest mostly not

        const std::vector<float> ours = dequantize(q.type, blocks, kValues);
        const std::vector<std::size_t> diff = differing_bits(ours, ggml);
        std::ostringstream first;
        if (!diff.empty()) first << "; the first, value " << diff[0] << ": specdec " << ours[diff[0]] << ", ggml " << ggml[diff[0]];
        INFO(diff.size() << " values differ" << first.str());
        CHECK(diff.empty());

        // The control: one bit of the first block's scale d flipped (an exponent bit of the f16) must be
        // seen, and only in that block's values.
        std::vector<std::byte> flipped = blocks;
        flip_scale(q, flipped.data());
        const std::vector<std::size_t> seen = differing_bits(dequantize(q.type, flipped, kValues), ggml);
        CHECK_FALSE(seen.empty());
        CHECK((!seen.empty() && seen.back() < static_cast<std::size_t>(t.block)));
    }
}

TEST_CASE("a quantized tensor of a wrong byte count or a partial block is refused naming its type",
          "[gguf][quant][errors]") {
    for (const Quant& q : kQuants) {
        const detail::GgufTypeTraits t = detail::gguf_type_traits(static_cast<std::uint32_t>(q.type));
        CAPTURE(t.name);
        const std::vector<std::byte> blocks = read_bytes(kDir / (std::string(t.name) + ".blocks"));
        const std::string name = std::string(" of type ") + t.name + " (" + std::to_string(static_cast<int>(q.type)) + ")";
        const std::span<const std::byte> short_by_one(blocks.data(), blocks.size() - 1);
        CHECK_THROWS_WITH(dequantize(q.type, short_by_one, kValues),
                          Catch::StartsWith("[specdec.gguf]") && Catch::Contains(name) && Catch::Contains("need whole blocks"));
        CHECK_THROWS_WITH(dequantize(q.type, blocks, kValues - 1),
                          Catch::StartsWith("[specdec.gguf]") && Catch::Contains(name) && Catch::Contains("need whole blocks"));
        CHECK_THROWS_WITH(dequantize(q.type, blocks, t.block / 2), Catch::StartsWith("[specdec.gguf]") && Catch::Contains(name));
        CHECK_NOTHROW(dequantize(q.type, blocks, kValues));
    }
}

TEST_CASE("a GGUF Llama held in each quantized type loads whole and deferred to the same model",
          "[gguf][quant][deferred]") {
    // Every row is 256 values wide, whole blocks of every type. The F32 file specdec writes becomes a file
    // of type T by retyping each matrix and overwriting the start of its data with random blocks of T
    // (f16 scales set to small finite values): any bytes are valid blocks once the scales are finite.
    Config cfg = test::tiny_config(/*gqa=*/true);
    cfg.hidden_size = 256;
    cfg.intermediate_size = 256;
    cfg.num_hidden_layers = 1;
    cfg.tie_word_embeddings = false;
    const Weights w = random_weights(cfg, 7, 0.3f);
    const fs::path dir = fs::temp_directory_path() / "specdec_test_gguf_quants";
    fs::create_directories(dir);
    const fs::path f32 = dir / "f32.gguf";
    save_gguf(f32, cfg, w, nullptr, GgufSaveType::kF32);
    const std::vector<std::byte> original = read_bytes(f32);
    const GgufFile source = GgufFile::open(f32);

    for (const Quant& q : kQuants) {
        const detail::GgufTypeTraits t = detail::gguf_type_traits(static_cast<std::uint32_t>(q.type));
        CAPTURE(t.name);
        std::vector<std::byte> file = original;
        std::mt19937 rng(static_cast<unsigned>(q.type));
        std::map<std::string, std::vector<std::byte>> written;  // the blocks put in, by tensor name
        for (const GgufTensorInfo& info : source.tensors()) {
            if (info.dims.size() != 2) continue;  // the norms stay F32
            // The tensor's type field follows its name, n_dims and dims; its data is found by content.
            std::string key(8, '\0');
            const std::uint64_t length = info.name.size();
            std::memcpy(key.data(), &length, 8);
            key += info.name;
            const std::string_view text(reinterpret_cast<const char*>(file.data()), file.size());
            const std::size_t at = text.find(key, 24);
            REQUIRE(at != std::string_view::npos);
            const auto id = static_cast<std::uint32_t>(q.type);
            std::memcpy(file.data() + at + key.size() + 4 + 8 * info.dims.size(), &id, 4);
            const std::span<const std::byte> data = source.data(info);
            const std::size_t begin = text.find(std::string_view(reinterpret_cast<const char*>(data.data()), 64));
            REQUIRE(begin != std::string_view::npos);
            std::vector<std::byte> blocks(static_cast<std::size_t>(info.elements() / t.block * t.bytes));
            for (std::byte& b : blocks) b = static_cast<std::byte>(rng() & 0xFF);
            for (std::size_t block = 0; block < blocks.size(); block += static_cast<std::size_t>(t.bytes))
                set_scales(q, blocks.data() + block,
                           detail::float_to_half(std::ldexp(1.0f + static_cast<float>(rng() % 64) / 64.0f, -9)));
            std::memcpy(file.data() + begin, blocks.data(), blocks.size());
            written[info.name] = std::move(blocks);
        }
        const fs::path path = dir / (std::string(t.name) + ".gguf");
        {
            std::ofstream out(path, std::ios::binary);
            out.write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
            REQUIRE(out);
        }
        const GgufModel full = load_gguf(path);
        const GgufModel deferred = load_gguf(path, {.defer_matrices = true});
        REQUIRE(deferred.weights.deferred != nullptr);
        CHECK(deferred.weights.layers[0].w_up.empty());
        // ffn_up is not permuted: the loaded matrix is gguf_dequantize of the blocks written.
        const GgufFile retyped = GgufFile::open(path);
        const GgufTensorInfo* up = retyped.find_tensor("blk.0.ffn_up.weight");
        REQUIRE(up != nullptr);
        CHECK(up->type == static_cast<std::uint32_t>(q.type));
        CHECK(full.weights.layers[0].w_up == dequantize(q.type, written.at(up->name), up->elements()));
        const std::vector<float> reference = logits(full.config, full.weights);
        for (const float v : reference) REQUIRE(std::isfinite(v));
        for (const WeightFormat f : {WeightFormat::kF32, WeightFormat::kBF16}) {
            CAPTURE(f == WeightFormat::kBF16);
            const ModelOptions o{.weight_format = f};
            CHECK(logits(deferred.config, deferred.weights, o) == logits(full.config, full.weights, o));
        }
    }
}

}  // namespace test_gguf_quants
