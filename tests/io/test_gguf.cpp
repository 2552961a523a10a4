// GGUF files: ggml's block layouts dequantized from hand-built blocks, f16 rounding, export → import round
// trips (bit-exact F32, exact BF16/F16 rounding, a measured Q8_0 bound), llama.cpp's q/k row order, the
// header as inspection sees it, and the tokenizers a GGUF carries.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "catch.hpp"
#include "helpers.hpp"
#include "source_dir.hpp"

namespace test_gguf {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / "specdec_test_gguf";
    fs::create_directories(d);
    return d / name;
}

std::vector<float> chain_logits(const Config& c, const Weights& w, const std::vector<int>& tokens) {
    CpuModel m(c, w);
    const Rows r = m.forward(Tree::chain(tokens), 0);
    return {r.data.begin(), r.data.end()};
}

template <class T>
void append(std::vector<std::byte>& b, T v) {
    const auto* p = reinterpret_cast<const std::byte*>(&v);
    b.insert(b.end(), p, p + sizeof v);
}

std::vector<float> dequantize(GgufType type, const std::vector<std::byte>& block, std::int64_t n) {
    std::vector<float> out(static_cast<std::size_t>(n));
    detail::gguf_dequantize(static_cast<std::uint32_t>(type), block, out.data(), n);
    return out;
}

// Values exact in f16, so every product below is exact and the checks are equalities.
constexpr float kD = 0.5f, kDmin = 0.125f;

}  // namespace

TEST_CASE("float_to_half rounds to nearest even and inverts half_to_float on every half", "[gguf][f16]") {
    for (std::uint32_t h = 0; h < 65536; ++h) {
        const float f = half_to_float(static_cast<std::uint16_t>(h));
        if (std::isnan(f)) {
            CHECK(std::isnan(half_to_float(detail::float_to_half(f))));
            continue;
        }
        REQUIRE(detail::float_to_half(f) == h);
    }
    CHECK(detail::float_to_half(65504.0f) == 0x7BFF);
    CHECK(detail::float_to_half(65519.0f) == 0x7BFF);
    CHECK(detail::float_to_half(65520.0f) == 0x7C00);        // the tie above the largest rounds to Inf
    CHECK(detail::float_to_half(1.0f + 1.0f / 2048) == 0x3C00);  // a tie to the even 1.0
    CHECK(detail::float_to_half(1.0f + 3.0f / 2048) == 0x3C02);  // a tie to the even 1 + 2/1024
    CHECK(detail::float_to_half(std::ldexp(1.0f, -25)) == 0);    // half the smallest subnormal: to 0
    CHECK(detail::float_to_half(std::ldexp(1.5f, -25)) == 1);
    CHECK(detail::float_to_half(std::ldexp(3.0f, -25)) == 2);    // 1.5 x 2^-24: a tie, to the even 2
}

TEST_CASE("Q8_0 and Q4_0 blocks dequantize value by value as ggml lays them out", "[gguf][quant]") {
    std::vector<std::byte> q8;
    append(q8, detail::float_to_half(kD));
    for (int j = 0; j < 32; ++j) append(q8, static_cast<std::int8_t>(j * 8 - 128));
    const std::vector<float> x8 = dequantize(GgufType::kQ8_0, q8, 32);
    for (int j = 0; j < 32; ++j) CHECK(x8[static_cast<std::size_t>(j)] == kD * static_cast<float>(j * 8 - 128));

    std::vector<std::byte> q4;
    append(q4, detail::float_to_half(kD));
    int nibble[32];
    for (int j = 0; j < 32; ++j) nibble[j] = (j * 7 + 3) % 16;
    for (int j = 0; j < 16; ++j) append(q4, static_cast<std::uint8_t>(nibble[j] | (nibble[j + 16] << 4)));
    const std::vector<float> x4 = dequantize(GgufType::kQ4_0, q4, 32);
    for (int j = 0; j < 32; ++j) CHECK(x4[static_cast<std::size_t>(j)] == kD * static_cast<float>(nibble[j] - 8));
}

TEST_CASE("a Q4_K block dequantizes value by value: 8 sub-blocks, 6-bit scales and mins packed in 12 bytes", "[gguf][quant]") {
    // Scales and mins use all 6 bits, so the packing of the top 2 bits of sub-blocks 4-7 is exercised.
    int sc[8], mn[8], q[256];
    for (int j = 0; j < 8; ++j) sc[j] = (j * 9 + 5) % 64, mn[j] = ((63 - j * 11) % 64 + 64) % 64;
    for (int v = 0; v < 256; ++v) q[v] = (v * 5 + v / 32) % 16;
    std::vector<std::byte> b;
    append(b, detail::float_to_half(kD));
    append(b, detail::float_to_half(kDmin));
    std::uint8_t s[12];
    for (int j = 0; j < 4; ++j) {
        s[j] = static_cast<std::uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
        s[j + 4] = static_cast<std::uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
        s[j + 8] = static_cast<std::uint8_t>((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
    }
    for (std::uint8_t x : s) append(b, x);
    std::uint8_t qs[128] = {};
    for (int v = 0; v < 256; ++v) {  // sub-block v/32; sub-blocks 2p and 2p+1 share the 32 bytes at 32p
        const int sub = v / 32, at = (sub / 2) * 32 + v % 32;
        qs[at] = static_cast<std::uint8_t>(qs[at] | (sub % 2 == 0 ? q[v] : q[v] << 4));
    }
    for (std::uint8_t x : qs) append(b, x);
    REQUIRE(b.size() == 144);
    const std::vector<float> x = dequantize(GgufType::kQ4_K, b, 256);
    for (int v = 0; v < 256; ++v) {
        const int sub = v / 32;
        CAPTURE(v, sub);
        CHECK(x[static_cast<std::size_t>(v)] ==
              kD * static_cast<float>(sc[sub]) * static_cast<float>(q[v]) - kDmin * static_cast<float>(mn[sub]));
    }
}

TEST_CASE("a Q6_K block dequantizes value by value: 4+2 bits, 16 int8 scales, d last", "[gguf][quant]") {
    int q[256];
    std::int8_t sc[16];
    for (int v = 0; v < 256; ++v) q[v] = (v * 13 + 7) % 64;
    for (int j = 0; j < 16; ++j) sc[j] = static_cast<std::int8_t>(j * 9 - 70);
    std::uint8_t ql[128] = {}, qh[64] = {};
    for (int v = 0; v < 256; ++v) {  // halves of 128 values; value 32k + l of a half (k < 4)
        const int half = v / 128, k = (v % 128) / 32, l = v % 32;
        const int lo = half * 64 + l + 32 * (k & 1);
        ql[lo] = static_cast<std::uint8_t>(ql[lo] | (k < 2 ? (q[v] & 0xF) : (q[v] & 0xF) << 4));
        qh[half * 32 + l] = static_cast<std::uint8_t>(qh[half * 32 + l] | ((q[v] >> 4) << (2 * k)));
    }
    std::vector<std::byte> b;
    for (std::uint8_t x : ql) append(b, x);
    for (std::uint8_t x : qh) append(b, x);
    for (std::int8_t x : sc) append(b, x);
    append(b, detail::float_to_half(kD));
    REQUIRE(b.size() == 210);
    const std::vector<float> x = dequantize(GgufType::kQ6_K, b, 256);
    for (int v = 0; v < 256; ++v) {
        const int scale = sc[v / 16];  // one scale per 16 consecutive values
        CAPTURE(v);
        CHECK(x[static_cast<std::size_t>(v)] == kD * static_cast<float>(scale) * static_cast<float>(q[v] - 32));
    }
}

TEST_CASE("a type specdec cannot dequantize is named", "[gguf][quant][errors]") {
    std::vector<std::byte> b(292);  // Q8_K: ggml's activation type, never in a file
    CHECK_THROWS_WITH(dequantize(GgufType::kQ8_K, b, 256), Catch::Contains("[specdec.gguf]") && Catch::Contains("Q8_K (15)"));
}

TEST_CASE("a model exported as GGUF F32 imports bit for bit, logits and all, and BF16 and F16 as their rounding",
          "[gguf][roundtrip]") {
    const bool tied = GENERATE(true, false);
    Config cfg = test::tiny_config(/*gqa=*/true);
    cfg.tie_word_embeddings = tied;
    cfg.rope_theta = 500000.0f;
    const Weights w = random_weights(cfg, 11, 0.3f);
    const std::vector<int> tokens = {1, 8, 30, 5, 63};
    const fs::path f32 = scratch("f32.gguf");
    save_gguf(f32, cfg, w, nullptr, GgufSaveType::kF32);
    const GgufModel back = load_gguf(f32);
    CHECK(back.config.hidden_size == cfg.hidden_size);
    CHECK(back.config.num_key_value_heads == cfg.num_key_value_heads);
    CHECK(back.config.rope_theta == cfg.rope_theta);
    CHECK(back.config.rms_norm_eps == cfg.rms_norm_eps);
    CHECK(back.config.max_position_embeddings == cfg.max_position_embeddings);
    CHECK(back.config.tie_word_embeddings == tied);
    CHECK_FALSE(back.tokenizer.has_value());
    CHECK(test::same_bits(back.weights, w, cfg));
    CHECK(chain_logits(back.config, back.weights, tokens) == chain_logits(cfg, w, tokens));

    // BF16 and F16: the matrices are the rounded values (norms stay F32), exactly.
    for (const GgufSaveType type : {GgufSaveType::kBF16, GgufSaveType::kF16}) {
        const bool bf = type == GgufSaveType::kBF16;
        Weights rounded = w;
        for_each_tensor(rounded, cfg, [&](const std::string& name, std::vector<float>& t, std::size_t) {
            if (name.find("norm") != std::string::npos) return;
            for (float& x : t) x = bf ? to_float(to_bf16(x)) : half_to_float(detail::float_to_half(x));
        });
        const fs::path p = scratch(bf ? "bf16.gguf" : "f16.gguf");
        save_gguf(p, cfg, w, nullptr, type);
        const GgufModel m = load_gguf(p);
        CAPTURE(bf);
        CHECK(test::same_bits(m.weights, rounded, cfg));
        CHECK(chain_logits(m.config, m.weights, tokens) == chain_logits(cfg, rounded, tokens));
    }
}

TEST_CASE("a head size of its own and linear RoPE scaling survive GGUF export and import", "[gguf][roundtrip][rope]") {
    // llama.cpp's keys: attention.key_length / value_length for hd, rope.scaling.type / factor for linear.
    Config head16 = test::tiny_config(/*gqa=*/true);
    head16.attention_head_dim = 16;  // H*hd = 64 != D = 32
    Config linear = test::tiny_config(/*gqa=*/true);
    linear.rope_scaling = RopeScaling{.type = RopeScalingType::kLinear, .factor = 4.0f};
    const std::vector<int> tokens = {1, 8, 30, 5, 63, 2, 17, 40};
    for (const Config& cfg : {head16, linear}) {
        const bool scaled = cfg.rope_scaling.type == RopeScalingType::kLinear;
        CAPTURE(scaled);
        const Weights w = random_weights(cfg, 15, 0.3f);
        const fs::path p = scratch(scaled ? "linear.gguf" : "head16.gguf");
        save_gguf(p, cfg, w, nullptr, GgufSaveType::kF32);
        const GgufFile f = read_gguf_header(p);
        if (scaled) {
            CHECK(f.find("llama.rope.scaling.type")->string == "linear");
            CHECK(f.find("llama.rope.scaling.factor")->real == 4.0);
            CHECK(f.find("llama.attention.key_length") == nullptr);  // hd is D/H: llama.cpp's default
        } else {
            CHECK(f.find("llama.attention.key_length")->integer == 16);
            CHECK(f.find("llama.attention.value_length")->integer == 16);
            CHECK(f.find("llama.rope.dimension_count")->integer == 16);
            CHECK(f.find("llama.rope.scaling.type") == nullptr);
            CHECK(f.find_tensor("blk.0.attn_q.weight")->dims == std::vector<std::int64_t>{32, 64});
        }
        const GgufModel back = load_gguf(p);
        CHECK(back.config.head_dim() == cfg.head_dim());
        CHECK(back.config.rope_scaling.type == cfg.rope_scaling.type);
        CHECK(back.config.rope_scaling.factor == cfg.rope_scaling.factor);
        CHECK(rope_inverse_frequencies(back.config) == rope_inverse_frequencies(cfg));
        CHECK(test::same_bits(back.weights, w, cfg));
        const std::vector<float> want = chain_logits(cfg, w, tokens);
        CHECK(chain_logits(back.config, back.weights, tokens) == want);
        if (scaled) {  // the scaling reaches the logits: read without it, the model computes something else
            Config unscaled = cfg;
            unscaled.rope_scaling = {};
            CHECK(chain_logits(unscaled, w, tokens) != want);
        }
    }
}

TEST_CASE("YaRN scaling goes to GGUF as convert_hf_to_gguf.py writes it and comes back the same",
          "[gguf][roundtrip][rope][yarn]") {
    // rope.scaling.type yarn, factor, original_context_length; beta_fast, beta_slow and the attention factor
    // only where they are not what a reader assumes (32, 1, 0.1 ln(factor) + 1).
    Config plain = test::tiny_config(/*gqa=*/true);
    plain.attention_head_dim = 32;
    plain.rope_theta = 1e6f;
    plain.rope_scaling = RopeScaling{.type = RopeScalingType::kYarn, .factor = 4.0f, .original_max_position_embeddings = 4096};
    plain.rope_scaling.attention_factor = static_cast<float>(detail::yarn_mscale(4.0));
    Config custom = plain;
    custom.rope_scaling.beta_fast = 16.0f;
    custom.rope_scaling.beta_slow = 2.0f;
    custom.rope_scaling.attention_factor = 1.25f;
    const std::vector<int> tokens = {1, 8, 30, 5, 63, 2, 17, 40};
    for (const Config& cfg : {plain, custom}) {
        const bool defaults = cfg.rope_scaling.beta_fast == 32.0f;
        CAPTURE(defaults);
        const Weights w = random_weights(cfg, 16, 0.3f);
        const fs::path p = scratch(defaults ? "yarn.gguf" : "yarn_custom.gguf");
        save_gguf(p, cfg, w, nullptr, GgufSaveType::kF32);
        const GgufFile f = read_gguf_header(p);
        CHECK(f.find("llama.rope.scaling.type")->string == "yarn");
        CHECK(f.find("llama.rope.scaling.factor")->real == 4.0);
        CHECK(f.find("llama.rope.scaling.original_context_length")->integer == 4096);
        CHECK((f.find("llama.rope.scaling.yarn_beta_fast") == nullptr) == defaults);
        CHECK((f.find("llama.rope.scaling.yarn_attn_factor") == nullptr) == defaults);
        const GgufModel back = load_gguf(p);
        CHECK(detail::same_rope_scaling(back.config.rope_scaling, cfg.rope_scaling));
        const std::vector<float> want = chain_logits(cfg, w, tokens);
        CHECK(chain_logits(back.config, back.weights, tokens) == want);
        Config unscaled = cfg;  // the control: YaRN reaches the logits
        unscaled.rope_scaling = {};
        CHECK(chain_logits(unscaled, w, tokens) != want);
    }
    Config untruncated = plain;
    untruncated.rope_scaling.truncate = false;
    CHECK_THROWS_WITH(save_gguf(scratch("yarn_untruncated.gguf"), untruncated, random_weights(untruncated, 16, 0.3f), nullptr,
                                GgufSaveType::kF32),
                      Catch::StartsWith("[specdec.gguf]") && Catch::Contains("yarn with truncate false has no GGUF key"));
}

TEST_CASE("Llama-3 RoPE scaling goes to GGUF as rope_freqs.weight and comes back as that table",
          "[gguf][roundtrip][rope]") {
    // Heads of 8: wavelengths 2 pi 10000^(j/4) = 6.3, 63, 628, 6283. With a pretraining context of 128 the
    // first is kept (< 128 / 4), the second on the ramp, the last two stretched by 8 (> 128 / 1).
    Config cfg = test::tiny_config(/*gqa=*/true);
    cfg.rope_scaling = RopeScaling{.type = RopeScalingType::kLlama3, .factor = 8.0f, .low_freq_factor = 1.0f,
                                   .high_freq_factor = 4.0f, .original_max_position_embeddings = 128};
    const std::vector<float> table = detail::gguf_llama3_rope_factors(cfg);
    REQUIRE(table.size() == 4);
    CHECK(table[0] == 1.0f);
    CHECK(table[1] > 1.0f);
    CHECK(table[1] < 8.0f);
    CHECK(table[2] == 8.0f);
    CHECK(table[3] == 8.0f);
    // The same factors as HF's llama3 frequencies, to float rounding (the table is the converter's float32).
    const std::vector<double> hf = rope_inverse_frequencies(cfg);
    Config unscaled = cfg;
    unscaled.rope_scaling = {};
    const std::vector<double> plain = rope_inverse_frequencies(unscaled);
    for (std::size_t j = 0; j < table.size(); ++j) CHECK_THAT(plain[j] / hf[j], Catch::Matchers::WithinRel(double{table[j]}, 1e-6));

    const Weights w = random_weights(cfg, 17, 0.3f);
    const std::vector<int> tokens = {1, 8, 30, 5, 63, 2, 17, 40, 11, 9, 33, 52};
    const fs::path p = scratch("llama3.gguf");
    save_gguf(p, cfg, w, nullptr, GgufSaveType::kF32);
    const GgufFile f = read_gguf_header(p);
    CHECK(f.find("llama.rope.scaling.type") == nullptr);  // the converter writes no keys for llama3
    const GgufTensorInfo* t = f.find_tensor("rope_freqs.weight");
    REQUIRE(t != nullptr);
    CHECK(t->type == static_cast<std::uint32_t>(GgufType::kF32));
    CHECK(t->dims == std::vector<std::int64_t>{4});
    std::vector<float> written(4);
    std::memcpy(written.data(), f.data(*t).data(), 16);
    CHECK(written == table);

    const GgufModel back = load_gguf(p);
    REQUIRE(back.config.rope_scaling.type == RopeScalingType::kFactors);
    CHECK(back.config.rope_scaling.factors == table);
    CHECK(test::same_bits(back.weights, w, cfg));
    const std::vector<double> got = rope_inverse_frequencies(back.config);
    for (std::size_t j = 0; j < got.size(); ++j) CHECK(got[j] == plain[j] / double{table[j]});  // llama.cpp's: theta^(-2j/hd) / factor
    const std::vector<float> want = chain_logits(cfg, w, tokens), imported = chain_logits(back.config, back.weights, tokens);
    float worst = 0, largest = 0, control = 0;
    const std::vector<float> unscaled_logits = chain_logits(unscaled, w, tokens);
    for (std::size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(imported[i] - want[i]));
        largest = std::max(largest, std::abs(want[i]));
        control = std::max(control, std::abs(unscaled_logits[i] - want[i]));
    }
    INFO("largest |logit| " << largest << ", import differs by " << worst << ", the unscaled model by " << control);
    CHECK(worst <= 1e-5f * largest);  // float rounding of the factors
    CHECK(control > 1e-2f * largest);  // the scaling reaches these positions

    SECTION("the table saves as itself: a second export and import is bit for bit") {
        const fs::path q = scratch("llama3_table.gguf");
        save_gguf(q, back.config, back.weights, nullptr, GgufSaveType::kF32);
        const GgufModel again = load_gguf(q);
        CHECK(again.config.rope_scaling.factors == table);
        CHECK(chain_logits(again.config, again.weights, tokens) == imported);
    }
    SECTION("config.json and llama2.c have no field for a table: refused by name, nothing written") {
        const fs::path dir = scratch("llama3_table_hf");
        fs::remove_all(dir);
        CHECK_THROWS_WITH(save_checkpoint(dir, back.config, back.weights),
                          Catch::StartsWith("[specdec.checkpoint]") && Catch::Contains("config.json") &&
                              Catch::Contains("a table of 4 per-dimension factors") && Catch::Contains("save_gguf"));
        CHECK_FALSE(fs::exists(dir / "config.json"));
        const fs::path bin = scratch("llama3_table.bin");
        fs::remove(bin);
        CHECK_THROWS_WITH(save_llama2c(bin, back.config, back.weights),
                          Catch::StartsWith("[specdec.llama2c]") && Catch::Contains("rope_scaling a table of 4"));
        CHECK_FALSE(fs::exists(bin));
    }
}

TEST_CASE("a table of RoPE factors is validated: one per rotary pair, finite and positive", "[gguf][rope][errors]") {
    Config cfg = test::tiny_config(/*gqa=*/true);  // heads of 8: 4 pairs
    cfg.rope_scaling = RopeScaling{.type = RopeScalingType::kFactors, .factors = {1, 2, 4}};
    CHECK_THROWS_WITH(cfg.validate(), Catch::StartsWith("[specdec.config]") &&
                                          Catch::Contains("rope_scaling.factors holds 3 values; head_dim 8 needs one per rotary pair, 4"));
    cfg.rope_scaling.factors = {1, 2, -4, 8};
    CHECK_THROWS_WITH(cfg.validate(), Catch::Contains("rope_scaling.factors[2] must be > 0, got -4"));
    cfg.rope_scaling.factors = {1, 2, 4, 8};
    CHECK_NOTHROW(cfg.validate());
}

TEST_CASE("a model exported as GGUF Q8_0 imports within the stated logit bound", "[gguf][roundtrip]") {
    // Q8_0 rounds each value to a multiple of max|x|/127 of its block of 32: error <= max|x|/254 per value.
    // Measured on this model (std 0.3, the peaky setting the tests use): the worst logit moves by under 2%
    // of the largest; the check allows 3%.
    Config cfg = test::tiny_config(/*gqa=*/true);
    const Weights w = random_weights(cfg, 12, 0.3f);
    const fs::path p = scratch("q8.gguf");
    save_gguf(p, cfg, w, nullptr, GgufSaveType::kQ8_0);
    const GgufFile header = read_gguf_header(p);
    CHECK(header.find_tensor("blk.0.attn_q.weight")->type == static_cast<std::uint32_t>(GgufType::kQ8_0));
    CHECK(header.find_tensor("blk.0.attn_norm.weight")->type == static_cast<std::uint32_t>(GgufType::kF32));
    const GgufModel m = load_gguf(p);
    // Every weight within its block's half step.
    float worst_weight = 0.0f;
    for_each_tensor(w, cfg, [&](const std::string& name, const std::vector<float>& t, std::size_t) {
        std::vector<float> got;
        for_each_tensor(m.weights, cfg, [&](const std::string& n2, const std::vector<float>& t2, std::size_t) {
            if (n2 == name) got = t2;
        });
        for (std::size_t b = 0; b < t.size(); b += 32) {
            float amax = 0.0f;
            for (std::size_t j = b; j < b + 32 && j < t.size(); ++j) amax = std::max(amax, std::abs(t[j]));
            for (std::size_t j = b; j < b + 32 && j < t.size(); ++j) {
                const float err = std::abs(got[j] - t[j]);
                worst_weight = std::max(worst_weight, err / std::max(amax, 1e-30f));
            }
        }
    });
    CHECK(worst_weight <= 1.0f / 254 * 1.01f + 1e-3f);  // + the f16 rounding of the scale
    const std::vector<int> tokens = {1, 8, 30, 5, 63};
    const std::vector<float> a = chain_logits(cfg, w, tokens), q = chain_logits(m.config, m.weights, tokens);
    float worst = 0.0f, largest = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) {
        worst = std::max(worst, std::abs(q[i] - a[i]));
        largest = std::max(largest, std::abs(a[i]));
    }
    CAPTURE(worst, largest, worst / largest);
    CHECK(worst < 0.03f * largest);
}

TEST_CASE("export puts q and k rows in llama.cpp's RoPE order, as convert_hf_to_gguf.py's permute does", "[gguf][rope]") {
    Config cfg = test::tiny_config(/*gqa=*/true);
    const Weights w = random_weights(cfg, 13, 0.3f);
    const fs::path p = scratch("perm.gguf");
    save_gguf(p, cfg, w, nullptr, GgufSaveType::kF32);
    const GgufFile f = read_gguf_header(p);
    // permute(w, n_head): w.reshape(n_head, 2, hd/2, D).swapaxes(1, 2).reshape(w.shape), so GGUF row
    // h·hd + 2i + j is HF row h·hd + j·hd/2 + i.
    const auto check = [&](const char* name, const std::vector<float>& hf, int heads) {
        const GgufTensorInfo* t = f.find_tensor(name);
        REQUIRE(t != nullptr);
        const std::span<const std::byte> bytes = f.data(*t);
        const std::int64_t D = cfg.hidden_size, hd = cfg.head_dim();
        for (int h = 0; h < heads; ++h)
            for (std::int64_t i = 0; i < hd / 2; ++i)
                for (std::int64_t j = 0; j < 2; ++j) {
                    const std::int64_t gguf_row = h * hd + 2 * i + j, hf_row = h * hd + j * (hd / 2) + i;
                    CHECK(std::memcmp(bytes.data() + gguf_row * D * 4, hf.data() + hf_row * D, static_cast<std::size_t>(D) * 4) == 0);
                }
    };
    check("blk.1.attn_q.weight", w.layers[1].wq, cfg.num_attention_heads);
    check("blk.1.attn_k.weight", w.layers[1].wk, cfg.num_key_value_heads);
    const GgufTensorInfo* v = f.find_tensor("blk.1.attn_v.weight");  // v is not permuted
    CHECK(std::memcmp(f.data(*v).data(), w.layers[1].wv.data(), w.layers[1].wv.size() * 4) == 0);
}

TEST_CASE("the header lists the metadata and the tensor table llama.cpp expects", "[gguf][inspect]") {
    Config cfg = test::tiny_config(/*gqa=*/true);
    cfg.tie_word_embeddings = false;
    const fs::path p = scratch("inspect.gguf");
    save_gguf(p, cfg, random_weights(cfg, 14), nullptr, GgufSaveType::kBF16);
    const GgufFile f = read_gguf_header(p);
    CHECK(f.version() == 3);
    CHECK(f.alignment() == 32);
    CHECK(f.find("general.architecture")->string == "llama");
    CHECK(f.find("llama.block_count")->integer == cfg.num_hidden_layers);
    CHECK(f.find("llama.attention.head_count_kv")->integer == cfg.num_key_value_heads);
    CHECK(f.find("llama.rope.dimension_count")->integer == cfg.head_dim());
    REQUIRE(f.tensors().size() == 9 * 2 + 3);
    CHECK(f.tensors().front().name == "token_embd.weight");
    CHECK(f.tensors().front().dims == std::vector<std::int64_t>{cfg.hidden_size, cfg.vocab_size});
    CHECK(f.tensors().back().name == "output.weight");
    const GgufTensorInfo* gate = f.find_tensor("blk.1.ffn_gate.weight");
    REQUIRE(gate != nullptr);
    CHECK(gate->dims == std::vector<std::int64_t>{cfg.hidden_size, cfg.intermediate_size});
    CHECK(gate->type == static_cast<std::uint32_t>(GgufType::kBF16));
    for (const GgufTensorInfo& t : f.tensors()) CHECK(t.offset % 32 == 0);
}

TEST_CASE("a byte-level tokenizer and a llama2.c tokenizer survive GGUF export and import", "[gguf][tokenizer]") {
    const std::vector<std::string> texts = {"", "Once upon a time, there was a little girl.", "  spaces\n\nand\ttabs ",
                                            "h\xC3\xA9llo w\xC3\xB6rld \xF0\x9F\x99\x82", "<|endoftext|> after"};
    SECTION("byte-level (\"gpt2\")") {
        const Tokenizer tok = Tokenizer::train("Once upon a time, there was a little girl. She liked tea and the sea.", 300);
        Config cfg = test::tiny_config(true, tok.vocab_size());
        const fs::path p = scratch("tok_bpe.gguf");
        const GgufTokenizer g(tok);
        save_gguf(p, cfg, random_weights(cfg, 15), &g, GgufSaveType::kF32);
        const GgufModel m = load_gguf(p);
        REQUIRE(m.tokenizer.has_value());
        CHECK(m.tokenizer->kind() == GgufTokenizer::Kind::kGpt2);
        CHECK(m.tokenizer->pre() == "gpt-2");
        CHECK(m.tokenizer->vocab_size() == tok.vocab_size());
        CHECK(m.tokenizer->eos_id() == tok.eos_id());
        for (const std::string& s : texts) {
            CAPTURE(s);
            CHECK(m.tokenizer->encode(s, false) == tok.encode(s));
            CHECK(m.tokenizer->decode(tok.encode(s)) == s.substr(s.starts_with("<|endoftext|>") ? 13 : 0));
        }
    }
    SECTION("byte-level with Qwen2's pattern (\"qwen2\"; llama.cpp has no NFC, so neither has the import)") {
        const Tokenizer tok = Tokenizer::load(fs::path(SPECDEC_SOURCE_DIR) / "tests/data/tokenizers/qwen_tiny.tokenizer.json");
        Config cfg = test::tiny_config(true, tok.vocab_size());
        const fs::path p = scratch("tok_qwen.gguf");
        const GgufTokenizer g(tok);
        CHECK(g.pre() == "qwen2");
        save_gguf(p, cfg, random_weights(cfg, 17), &g, GgufSaveType::kF32);
        const GgufModel m = load_gguf(p);
        REQUIRE(m.tokenizer.has_value());
        CHECK(m.tokenizer->pre() == "qwen2");
        for (const std::string& s : texts) {  // all already NFC
            CAPTURE(s);
            CHECK(m.tokenizer->encode(s, false) == tok.encode(s));
        }
        CHECK(m.tokenizer->encode("12345", false).size() == 5);               // one digit a pre-token
        CHECK(m.tokenizer->encode("cafe\xCC\x81", false) != tok.encode("cafe\xCC\x81"));  // the NFC that llama.cpp skips
    }
    SECTION("SentencePiece (\"llama\")") {
        std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
        std::vector<float> scores = {0, 0, 0};
        for (int b = 0; b < 256; ++b) tokens.push_back("<0x" + detail::hex_byte(static_cast<unsigned char>(b)).substr(2) + ">"), scores.push_back(0);
        for (const char* t : {" ", "a", "e", "o", "n", " a", " o", "on", "ce", " on", " once", "nce", "once"})
            tokens.push_back(t), scores.push_back(-static_cast<float>(tokens.size()));
        const Llama2cTokenizer spm = Llama2cTokenizer::from_vocab(tokens, scores);
        Config cfg = test::tiny_config(true, spm.vocab_size());
        const fs::path p = scratch("tok_spm.gguf");
        const GgufTokenizer g(spm);
        save_gguf(p, cfg, random_weights(cfg, 16), &g, GgufSaveType::kF32);
        const GgufFile f = read_gguf_header(p);
        CHECK(f.find("tokenizer.ggml.tokens")->strings[259] == "\xE2\x96\x81");  // " " written as "▁"
        const GgufModel m = load_gguf(p);
        REQUIRE(m.tokenizer.has_value());
        CHECK(m.tokenizer->kind() == GgufTokenizer::Kind::kLlama);
        for (const std::string& s : {std::string("once a noon"), std::string("x\xC3\xA9 y"), std::string()}) {
            CAPTURE(s);
            std::vector<int> want = spm.encode(s, true, false);
            CHECK(m.tokenizer->encode(s) == want);
            CHECK(m.tokenizer->decode(want) == s);
        }
        // A token type outside llama.cpp's 0..6 is refused by name, not read as some type: the key, then
        // its array's element type (i32) and count, then token 5's value.
        std::string bytes = detail::read_text_file(p, "test");
        const std::string key = "tokenizer.ggml.token_type";
        const std::size_t at = bytes.find(key);
        REQUIRE(at != std::string::npos);
        const std::size_t value5 = at + key.size() + 4 + 4 + 8 + 5 * 4;
        const std::int32_t bad = 77;
        std::memcpy(bytes.data() + value5, &bad, 4);
        const fs::path q = scratch("tok_spm_bad_type.gguf");
        std::ofstream(q, std::ios::binary) << bytes;
        CHECK_THROWS_WITH(load_gguf(q), Catch::Contains("[specdec.gguf]") && Catch::Contains("tokenizer.ggml.token_type") &&
                                            Catch::Contains("holds 77 for token 5"));
    }
}

}  // namespace test_gguf
