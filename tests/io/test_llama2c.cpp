// llama2.c files: model .bin of versions 0, 1 and 2 written and read back, the imported model decoding as
// run.c's own forward pass does, and tokenizer.bin encoded and decoded as run.c does.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_llama2c {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) {
    const fs::path d = fs::temp_directory_path() / "specdec_test_llama2c";
    fs::create_directories(d);
    return d / name;
}

std::string read_bytes(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

void write_bytes(const fs::path& p, const std::string& bytes) {
    std::ofstream(p, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

template <class T>
void append(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof v);
}

/// The logits (T, V) of a fresh model over `tokens`, as one chain.
std::vector<float> chain_logits(const Config& c, const Weights& w, const std::vector<int>& tokens) {
    CpuModel m(c, w);
    const Rows r = m.forward(Tree::chain(tokens), 0);
    return {r.data.begin(), r.data.end()};
}

// ---- run.c's forward pass, written again from its algorithm: its own loops over a version 0 file read
// with its own offsets; RoPE rotates adjacent pairs (q[i], q[i+1]) by pos · 10000^(-(i % hd)/hd).

struct RunC {
    int dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    std::vector<float> data;  // every float after the 28-byte header
    const float *emb, *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3, *rms_final, *wcls;
    std::vector<float> key_cache, value_cache;  // (L, seq_len, kv_dim)

    explicit RunC(const fs::path& path) {
        const std::string b = read_bytes(path);
        int h[7];
        std::memcpy(h, b.data(), 28);
        dim = h[0], hidden_dim = h[1], n_layers = h[2], n_heads = h[3], n_kv_heads = h[4], seq_len = h[6];
        const bool shared = h[5] > 0;
        vocab_size = std::abs(h[5]);
        data.resize((b.size() - 28) / 4);
        std::memcpy(data.data(), b.data() + 28, data.size() * 4);
        const int hs = dim / n_heads, kv_dim = dim * n_kv_heads / n_heads;
        const float* p = data.data();
        const auto take = [&](std::size_t n) {
            const float* at = p;
            p += n;
            return at;
        };
        const std::size_t L = n_layers, D = dim, F = hidden_dim, KV = kv_dim;
        emb = take(vocab_size * D);
        rms_att = take(L * D);
        wq = take(L * D * D);
        wk = take(L * D * KV);
        wv = take(L * D * KV);
        wo = take(L * D * D);
        rms_ffn = take(L * D);
        w1 = take(L * D * F);
        w2 = take(L * F * D);
        w3 = take(L * D * F);
        rms_final = take(D);
        take(static_cast<std::size_t>(seq_len) * hs);  // freq_cis_real, freq_cis_imag
        wcls = shared ? emb : take(vocab_size * D);
        REQUIRE(static_cast<std::size_t>(p - data.data()) == data.size());
        key_cache.assign(L * seq_len * KV, 0.0f);
        value_cache.assign(L * seq_len * KV, 0.0f);
    }

    static void rmsnorm(float* o, const float* x, const float* w, int n) {
        float ss = 0.0f;
        for (int j = 0; j < n; ++j) ss += x[j] * x[j];
        ss = 1.0f / std::sqrt(ss / n + 1e-5f);
        for (int j = 0; j < n; ++j) o[j] = w[j] * (ss * x[j]);
    }
    static void matmul(float* out, const float* x, const float* w, int n, int d) {  // W (d, n) @ x (n)
        for (int i = 0; i < d; ++i) {
            float v = 0.0f;
            for (int j = 0; j < n; ++j) v += w[static_cast<std::size_t>(i) * n + j] * x[j];
            out[i] = v;
        }
    }

    std::vector<float> forward(int token, int pos) {
        const int D = dim, hs = D / n_heads, kv_dim = D * n_kv_heads / n_heads, kv_mul = n_heads / n_kv_heads;
        std::vector<float> x(emb + static_cast<std::size_t>(token) * D, emb + static_cast<std::size_t>(token + 1) * D);
        std::vector<float> xb(D), xb2(D), q(D), k(kv_dim), v(kv_dim), hb(hidden_dim), hb2(hidden_dim), att(pos + 1);
        for (int l = 0; l < n_layers; ++l) {
            rmsnorm(xb.data(), x.data(), rms_att + l * D, D);
            matmul(q.data(), xb.data(), wq + static_cast<std::size_t>(l) * D * D, D, D);
            matmul(k.data(), xb.data(), wk + static_cast<std::size_t>(l) * D * kv_dim, D, kv_dim);
            matmul(v.data(), xb.data(), wv + static_cast<std::size_t>(l) * D * kv_dim, D, kv_dim);
            for (int i = 0; i < D; i += 2) {
                const float freq = 1.0f / std::pow(10000.0f, static_cast<float>(i % hs) / static_cast<float>(hs));
                const float fcr = std::cos(pos * freq), fci = std::sin(pos * freq);
                for (int which = 0; which < (i < kv_dim ? 2 : 1); ++which) {
                    float* vec = which == 0 ? q.data() : k.data();
                    const float v0 = vec[i], v1 = vec[i + 1];
                    vec[i] = v0 * fcr - v1 * fci;
                    vec[i + 1] = v0 * fci + v1 * fcr;
                }
            }
            const std::size_t loff = static_cast<std::size_t>(l) * seq_len * kv_dim;
            std::copy(k.begin(), k.end(), key_cache.begin() + loff + static_cast<std::size_t>(pos) * kv_dim);
            std::copy(v.begin(), v.end(), value_cache.begin() + loff + static_cast<std::size_t>(pos) * kv_dim);
            for (int h = 0; h < n_heads; ++h) {
                for (int t = 0; t <= pos; ++t) {
                    const float* kt = key_cache.data() + loff + static_cast<std::size_t>(t) * kv_dim + (h / kv_mul) * hs;
                    float score = 0.0f;
                    for (int i = 0; i < hs; ++i) score += q[h * hs + i] * kt[i];
                    att[t] = score / std::sqrt(static_cast<float>(hs));
                }
                const float mx = *std::max_element(att.begin(), att.end());
                float sum = 0.0f;
                for (float& a : att) sum += (a = std::exp(a - mx));
                for (float& a : att) a /= sum;
                for (int i = 0; i < hs; ++i) xb[h * hs + i] = 0.0f;
                for (int t = 0; t <= pos; ++t) {
                    const float* vt = value_cache.data() + loff + static_cast<std::size_t>(t) * kv_dim + (h / kv_mul) * hs;
                    for (int i = 0; i < hs; ++i) xb[h * hs + i] += att[t] * vt[i];
                }
            }
            matmul(xb2.data(), xb.data(), wo + static_cast<std::size_t>(l) * D * D, D, D);
            for (int i = 0; i < D; ++i) x[i] += xb2[i];
            rmsnorm(xb.data(), x.data(), rms_ffn + l * D, D);
            matmul(hb.data(), xb.data(), w1 + static_cast<std::size_t>(l) * D * hidden_dim, D, hidden_dim);
            matmul(hb2.data(), xb.data(), w3 + static_cast<std::size_t>(l) * D * hidden_dim, D, hidden_dim);
            for (int i = 0; i < hidden_dim; ++i) hb[i] = hb[i] * (1.0f / (1.0f + std::exp(-hb[i]))) * hb2[i];
            matmul(xb.data(), hb.data(), w2 + static_cast<std::size_t>(l) * D * hidden_dim, hidden_dim, D);
            for (int i = 0; i < D; ++i) x[i] += xb[i];
        }
        rmsnorm(x.data(), x.data(), rms_final, D);
        std::vector<float> logits(vocab_size);
        matmul(logits.data(), x.data(), wcls, D, vocab_size);
        return logits;
    }

    /// run.c's generate at temperature 0: the prompt fed one token at a time, then argmax.
    std::vector<int> greedy(const std::vector<int>& prompt, int steps) {
        std::vector<int> out;
        int token = prompt[0];
        for (int pos = 0; pos + 1 < static_cast<int>(prompt.size()) + steps; ++pos) {
            const std::vector<float> logits = forward(token, pos);
            if (pos + 1 < static_cast<int>(prompt.size())) {
                token = prompt[pos + 1];
            } else {
                token = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
                out.push_back(token);
            }
        }
        return out;
    }
};

/// A version 1 file turned into version 2 as export.py does it: the 2L + 1 norms kept, every matrix after
/// them stored as int8 values and one float32 scale per `group` values. Returns the floats the version 2
/// file stands for (the dequantized version 1 payload, in file order).
std::vector<float> to_version2(const fs::path& v1, const fs::path& v2, const Config& c, int group) {
    const std::string b = read_bytes(v1);
    std::vector<float> f((b.size() - 256) / 4);
    std::memcpy(f.data(), b.data() + 256, f.size() * 4);
    std::string out = b.substr(0, 256);
    const std::int32_t version = 2;
    std::memcpy(out.data() + 4, &version, 4);
    std::memcpy(out.data() + 37, &group, 4);
    const std::size_t norms = (2 * static_cast<std::size_t>(c.num_hidden_layers) + 1) * c.hidden_size;
    out.append(reinterpret_cast<const char*>(f.data()), norms * 4);
    // The matrices in file order, each a multiple of `group` values.
    const std::size_t D = c.hidden_size, q = D, kv = c.kv_dim(), F = c.intermediate_size, V = c.vocab_size, L = c.num_hidden_layers;
    std::vector<std::size_t> sizes = {V * D};
    for (std::size_t n : {q * D, kv * D, kv * D, D * q, F * D, D * F, F * D})
        for (std::size_t l = 0; l < L; ++l) sizes.push_back(n);
    if (!c.tie_word_embeddings) sizes.push_back(V * D);
    std::vector<float> expected(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(norms));
    std::size_t at = norms;
    for (std::size_t n : sizes) {
        std::vector<std::int8_t> q8(n);
        std::vector<float> scales(n / group);
        for (std::size_t g = 0; g < n / group; ++g) {
            float mx = 0.0f;
            for (int i = 0; i < group; ++i) mx = std::max(mx, std::abs(f[at + g * group + i]));
            scales[g] = mx / 127.0f;
            for (int i = 0; i < group; ++i)
                q8[g * group + i] = static_cast<std::int8_t>(std::lround(f[at + g * group + i] / scales[g]));
        }
        for (std::size_t i = 0; i < n; ++i) expected.push_back(static_cast<float>(q8[i]) * scales[i / group]);
        out.append(reinterpret_cast<const char*>(q8.data()), n);
        out.append(reinterpret_cast<const char*>(scales.data()), scales.size() * 4);
        at += n;
    }
    REQUIRE(at == f.size());
    write_bytes(v2, out);
    return expected;
}

}  // namespace

TEST_CASE("a model saved as llama2.c version 0 or 1 loads back bit for bit, logits and all", "[llama2c]") {
    const bool tied = GENERATE(true, false);
    const Llama2cVersion version = GENERATE(Llama2cVersion::kLegacy, Llama2cVersion::kFloat32);
    Config cfg = test::tiny_config(/*gqa=*/true);
    cfg.tie_word_embeddings = tied;
    const Weights w = random_weights(cfg, 11, 0.3f);
    const fs::path path = scratch("model.bin");
    save_llama2c(path, cfg, w, version);
    const Checkpoint back = load_llama2c(path);
    CHECK(back.config.hidden_size == cfg.hidden_size);
    CHECK(back.config.intermediate_size == cfg.intermediate_size);
    CHECK(back.config.num_hidden_layers == cfg.num_hidden_layers);
    CHECK(back.config.num_attention_heads == cfg.num_attention_heads);
    CHECK(back.config.num_key_value_heads == cfg.num_key_value_heads);
    CHECK(back.config.vocab_size == cfg.vocab_size);
    CHECK(back.config.max_position_embeddings == cfg.max_position_embeddings);
    CHECK(back.config.tie_word_embeddings == tied);
    CHECK(back.config.rope_theta == 10000.0f);
    CHECK(back.config.rms_norm_eps == 1e-5f);
    CHECK(test::same_bits(back.weights, w, cfg));
    const std::vector<int> tokens = {1, 17, 4, 60, 33, 9, 2, 41};
    const std::vector<float> want = chain_logits(cfg, w, tokens), got = chain_logits(back.config, back.weights, tokens);
    REQUIRE(got.size() == want.size());
    CHECK(std::memcmp(got.data(), want.data(), want.size() * 4) == 0);
    // The file is what run.c reads: its size is exactly what the header implies (checked on load), and
    // saving the loaded model again gives the same bytes.
    const fs::path again = scratch("model_again.bin");
    save_llama2c(again, back.config, back.weights, version);
    CHECK(read_bytes(again) == read_bytes(path));
}

TEST_CASE("an imported llama2.c model decodes greedily as run.c's own forward pass does", "[llama2c]") {
    // run.c rotates adjacent pairs; loading permutes wq and wk so that CpuModel's rotate-half RoPE computes
    // the same function. Grouped-query attention (2 kv heads for 4), an unshared classifier.
    Config cfg = test::tiny_config(/*gqa=*/true);
    cfg.tie_word_embeddings = false;
    const Weights w = random_weights(cfg, 3, 0.5f);
    const fs::path path = scratch("greedy.bin");
    save_llama2c(path, cfg, w, Llama2cVersion::kLegacy);
    RunC run_c(path);
    const std::vector<int> prompt = {1, 23, 7, 50};
    const std::vector<int> expected = run_c.greedy(prompt, 20);
    REQUIRE(expected.size() == 20);
    for (Llama2cVersion v : {Llama2cVersion::kLegacy, Llama2cVersion::kFloat32}) {
        const fs::path each = scratch("greedy_each.bin");
        save_llama2c(each, cfg, w, v);
        Checkpoint ck = load_llama2c(each);
        CpuModel model(ck.config, std::move(ck.weights));
        const Generation g = autoregressive_generate(model, prompt, GenerateOptions{.max_new_tokens = 20});
        CHECK(g.tokens == expected);
    }
    {  // The permutation matters: with wq and wk rows left in run.c's order, the tokens differ.
        Checkpoint ck = load_llama2c(path);
        for (LayerWeights& l : ck.weights.layers) {
            detail::permute_rope_rows(l.wq, cfg.num_attention_heads, cfg.hidden_size, /*to_hf=*/false);
            detail::permute_rope_rows(l.wk, cfg.num_key_value_heads, cfg.hidden_size, /*to_hf=*/false);
        }
        CpuModel unpermuted(ck.config, std::move(ck.weights));
        CHECK(autoregressive_generate(unpermuted, prompt, GenerateOptions{.max_new_tokens = 20}).tokens != expected);
    }
    // And the logits agree up to float rounding at every position (run.c sums in float, in its order).
    std::vector<int> all = prompt;
    all.insert(all.end(), expected.begin(), expected.end());
    all.pop_back();
    RunC fresh(path);
    const std::vector<float> ours = chain_logits(cfg, w, all);
    float worst = 0.0f;
    for (int pos = 0; pos < static_cast<int>(all.size()); ++pos) {
        const std::vector<float> theirs = fresh.forward(all[pos], pos);
        for (int i = 0; i < cfg.vocab_size; ++i)
            worst = std::max(worst, std::abs(theirs[i] - ours[static_cast<std::size_t>(pos) * cfg.vocab_size + i]));
    }
    CHECK(worst < 1e-4f);
}

TEST_CASE("a llama2.c version 2 (int8 Q8_0) file loads dequantized", "[llama2c]") {
    const bool tied = GENERATE(true, false);
    Config cfg = test::tiny_config(/*gqa=*/true);
    cfg.tie_word_embeddings = tied;
    const Weights w = random_weights(cfg, 5, 0.3f);
    const fs::path v1 = scratch("q_v1.bin"), v2 = scratch("q_v2.bin"), round = scratch("q_round.bin");
    save_llama2c(v1, cfg, w, Llama2cVersion::kFloat32);
    const std::vector<float> expected = to_version2(v1, v2, cfg, 16);
    const Checkpoint ck = load_llama2c(v2);
    CHECK(ck.config.tie_word_embeddings == tied);
    // Saved again as version 1, the payload is the dequantized values in llama2.c's layout.
    save_llama2c(round, ck.config, ck.weights, Llama2cVersion::kFloat32);
    const std::string b = read_bytes(round);
    REQUIRE(b.size() == 256 + expected.size() * 4);
    CHECK(std::memcmp(b.data() + 256, expected.data(), expected.size() * 4) == 0);
    // Quantized, the model stays close to the original: every logit within 5% of the largest.
    const std::vector<int> tokens = {1, 8, 30};
    const std::vector<float> a = chain_logits(cfg, w, tokens), q = chain_logits(ck.config, ck.weights, tokens);
    float worst = 0.0f, largest = 0.0f;
    for (std::size_t i = 0; i < a.size(); ++i) {
        worst = std::max(worst, std::abs(q[i] - a[i]));
        largest = std::max(largest, std::abs(a[i]));
    }
    CAPTURE(worst, largest);
    CHECK(worst < 0.05f * largest);
}

TEST_CASE("save_llama2c refuses a model llama2.c cannot express", "[llama2c][errors]") {
    Config cfg = test::tiny_config();
    const Weights w = random_weights(cfg, 1);
    cfg.rope_theta = 500000.0f;
    CHECK_THROWS_WITH(save_llama2c(scratch("theta.bin"), cfg, w),
                      Catch::Contains("[specdec.llama2c]") && Catch::Contains("run.c fixes them at 10000 and 1e-5"));
}

// ---- tokenizer.bin

namespace {

/// A tokenizer.bin by hand: <unk>, <s>, </s> (spelled as tokenizer.py writes them), the 256 byte tokens
/// <0x00>..<0xFF>, then `extra` with their scores.
std::string tokenizer_bin(const std::vector<std::pair<std::string, float>>& extra, int max_len = 7) {
    std::vector<std::pair<std::string, float>> all = {{"<unk>", 0.0f}, {"\n<s>\n", 0.0f}, {"\n</s>\n", 0.0f}};
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        all.emplace_back(name, 0.0f);
    }
    all.insert(all.end(), extra.begin(), extra.end());
    std::string s;
    append(s, std::int32_t{max_len});
    for (const auto& [t, score] : all) {
        append(s, score);
        append(s, static_cast<std::int32_t>(t.size()));
        s += t;
    }
    return s;
}

// Ids from 259: " " and letters score low; the merges' scores order them.
const std::vector<std::pair<std::string, float>> kExtra = {
    {" ", -100.0f},  // 259
    {"a", -100.0f},  // 260
    {"b", -100.0f},  // 261
    {"c", -100.0f},  // 262
    {"ab", 5.0f},    // 263
    {"bc", 6.0f},    // 264
    {" a", 3.0f},    // 265
    {"abc", 4.0f},   // 266
    {"aa", 1.0f},    // 267
    {"\xC3\xA9", -100.0f},  // 268: é, one token of two bytes
    {"low", -1e11f},        // 269: a score at or below run.c's -1e10 floor never merges
    {"l", -100.0f},         // 270
    {"o", -100.0f},         // 271
    {"w", -100.0f},         // 272
    {"lo", -1e11f},         // 273
    {"ow", -1e11f},         // 274
};

}  // namespace

TEST_CASE("llama2.c's tokenizer encodes and decodes as run.c does", "[llama2c][tokenizer]") {
    const fs::path path = scratch("tokenizer.bin");
    write_bytes(path, tokenizer_bin(kExtra));
    const Llama2cTokenizer tok = Llama2cTokenizer::load(path);
    REQUIRE(tok.vocab_size() == 259 + static_cast<int>(kExtra.size()));
    CHECK(tok.max_token_length() == 7);

    SECTION("the dummy prefix, then the pair of highest score first") {
        // " a b c": bc (6) first, then a+bc = abc (4); " abc" is not a token.
        CHECK(tok.encode("abc", false, false) == std::vector<int>{259, 266});
        CHECK(tok.encode("abc", true, true) == std::vector<int>{1, 259, 266, 2});
        CHECK(tok.encode("ab", false, false) == std::vector<int>{259, 263});  // ab (5) beats " a" (3)
        CHECK(tok.encode("", true, false) == std::vector<int>{1});            // no dummy prefix for empty text
    }
    SECTION("among pairs of equal score the leftmost merges first") {
        // " a a a a": " a" (3), then "aa" (1) at two places: the left one.
        CHECK(tok.encode("aaaa", false, false) == std::vector<int>{265, 267, 260});
    }
    SECTION("scores at or below -1e10 never merge") {
        CHECK(tok.encode("low", false, false) == std::vector<int>{259, 270, 271, 272});
    }
    SECTION("code points not in the vocabulary fall back to their bytes, id = byte + 3") {
        CHECK(tok.encode("\xC3\xA9", false, false) == std::vector<int>{259, 268});  // é is a token
        const std::string euro = "\xE2\x82\xAC", emoji = "\xF0\x9F\x98\x80";
        CHECK(tok.encode(euro, false, false) == std::vector<int>{259, 0xE2 + 3, 0x82 + 3, 0xAC + 3});
        CHECK(tok.encode("x" + emoji, false, false) == std::vector<int>{259, 'x' + 3, 0xF0 + 3, 0x9F + 3, 0x98 + 3, 0x80 + 3});
        // A character split across byte tokens decodes back to its bytes.
        for (const std::string& text : {euro, "a" + emoji + "bc\xC3\xA9", std::string("ab\xFF\x80")})
            CHECK(tok.decode(tok.encode(text, true, false)) == text);
    }
    SECTION("decode strips the dummy prefix after BOS only, and prints control tokens as nothing") {
        CHECK(tok.decode(std::vector<int>{1, 259, 266, 2}) == "abc");
        CHECK(tok.decode(std::vector<int>{259, 266}) == " abc");
        CHECK(tok.decode(std::vector<int>{1, 265, 265}) == "a a");
        CHECK(tok.piece(1, 265) == "a");
        CHECK(tok.piece(0x41 + 3, 3 + 0x0A) == "\n");
        CHECK_THROWS_WITH(tok.decode(std::vector<int>{1, 999}), Catch::Contains("token id 999 is outside the vocabulary"));
    }
    SECTION("save writes the file back byte for byte") {
        const fs::path again = scratch("tokenizer_again.bin");
        tok.save(again);
        CHECK(read_bytes(again) == read_bytes(path));
        const Llama2cTokenizer back = Llama2cTokenizer::load(again);
        CHECK(back.encode("aaaa abc\xE2\x82\xAC") == tok.encode("aaaa abc\xE2\x82\xAC"));
        const Llama2cTokenizer built = Llama2cTokenizer::from_vocab({"a", " ", "b"}, {0.0f, 0.0f, 0.0f});
        built.save(again);
        CHECK(Llama2cTokenizer::load(again).max_token_length() == 1);
    }
}

TEST_CASE("llama2.c's tokenizer refuses what run.c would turn into garbage", "[llama2c][tokenizer][errors]") {
    const Llama2cTokenizer small = Llama2cTokenizer::from_vocab({"<unk>", "<s>", "</s>", "a", "b"}, {0, 0, 0, 0, 0});
    CHECK_THROWS_WITH(small.encode("a", false, false), Catch::Contains("no \" \" token for the dummy prefix"));
    const Llama2cTokenizer spaced = Llama2cTokenizer::from_vocab({"<unk>", "<s>", "</s>", " ", "a"}, {0, 0, 0, 0, 0});
    CHECK(spaced.encode("a", true, true) == std::vector<int>{1, 3, 4, 2});
    CHECK_THROWS_WITH(spaced.encode("b", false, false),
                      Catch::Contains("byte 0x62 at offset 0 is not in the vocabulary, and its fallback token 101 is past"));
}

}  // namespace test_llama2c
