// tests/fuzz/fuzz_gguf.cpp — arbitrary bytes as a .gguf file: read_gguf_header, every tensor of a type
// specdec reads dequantized; then load_gguf. A model that loads must validate, survive save_gguf and
// load_gguf bit for bit (F32), and run one forward (unless CpuModel refuses its context with
// specdec::error); a tokenizer that loads must encode fixed texts to ids in its vocabulary (or refuse with
// specdec::error) and decode them. Run through scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "detail/io/gguf.hpp"
#include "detail/model/cpu_model.hpp"
#include "fuzz_common.hpp"

namespace {

constexpr char kBytes[] = "\x00\xFF stray \x80 \xC3";  // NUL, a stray continuation byte, a cut character

constexpr std::array<std::string_view, 4> kTexts = {
    "", "Once upon a time, there was a little girl named Lily.", "h\xC3\xA9llo \xE6\x97\xA5\xE6\x9C\xAC \xF0\x9F\x99\x82",
    std::string_view(kBytes, sizeof kBytes - 1)};

bool same_bits(const specdec::Weights& a, const specdec::Weights& b, const specdec::Config& c) {
    std::vector<const std::vector<float>*> xs, ys;
    specdec::for_each_tensor(a, c, [&](const std::string&, const std::vector<float>& t, std::size_t) { xs.push_back(&t); });
    specdec::for_each_tensor(b, c, [&](const std::string&, const std::vector<float>& t, std::size_t) { ys.push_back(&t); });
    for (std::size_t i = 0; i < xs.size(); ++i)
        if (xs[i]->size() != ys[i]->size() || std::memcmp(xs[i]->data(), ys[i]->data(), xs[i]->size() * 4) != 0) return false;
    return xs.size() == ys.size();
}

void fuzz_header(const std::filesystem::path& path) {
    try {
        const specdec::GgufFile f = specdec::read_gguf_header(path);
        for (const specdec::GgufTensorInfo& t : f.tensors()) {
            // open() promises every tensor in bounds and sized to its type's blocks.
            FUZZ_CHECK(f.find_tensor(t.name) == &t, "names are unique");
            FUZZ_CHECK(f.data(t).size() == t.bytes, "data(t) holds t.bytes");
            if (t.elements() > (1 << 20)) continue;
            std::vector<float> out(static_cast<std::size_t>(t.elements()));
            try {
                specdec::detail::gguf_dequantize(t.type, f.data(t), out.data(), t.elements());
            } catch (const specdec::error&) {  // a type specdec does not dequantize
            }
        }
        (void)specdec::GgufTokenizer::from_gguf(f);
    } catch (const specdec::error&) {
    }
}

void fuzz_model(const std::filesystem::path& path) {
    std::optional<specdec::GgufModel> m;
    try {
        m = specdec::load_gguf(path);
    } catch (const specdec::error&) {
        return;
    }
    // Outside a try: what loads is a valid model of the config it came with, and round-trips exactly.
    m->config.validate();
    specdec::validate(m->weights, m->config);
    const std::filesystem::path again = path.parent_path() / "again.gguf";
    const specdec::GgufTokenizer* tok = m->tokenizer ? &*m->tokenizer : nullptr;
    specdec::save_gguf(again, m->config, m->weights, tok, specdec::GgufSaveType::kF32);
    const specdec::GgufModel back = specdec::load_gguf(again);
    FUZZ_CHECK(same_bits(back.weights, m->weights, m->config), "save_gguf then load_gguf is exact (F32)");
    if (tok != nullptr) {
        FUZZ_CHECK(back.tokenizer.has_value(), "a tokenizer is written back");
        for (std::string_view text : kTexts) {
            std::vector<int> ids;
            try {
                ids = tok->encode(text);
            } catch (const specdec::error&) {  // e.g. a byte the vocabulary cannot spell
                continue;
            }
            for (int id : ids) FUZZ_CHECK(id >= 0 && id < tok->vocab_size(), "ids are in the vocabulary");
            (void)tok->decode(ids);
            FUZZ_CHECK(back.tokenizer->encode(text) == ids, "the written tokenizer encodes the same");
        }
    }
    std::optional<specdec::CpuModel> built;
    try {
        built.emplace(m->config, std::move(m->weights));
    } catch (const specdec::error&) {
        return;
    }
    const specdec::Rows r = built->forward(specdec::Tree::chain(std::vector<int>{0}), 0);
    FUZZ_CHECK(r.data.size() == static_cast<std::size_t>(m->config.vocab_size), "one row of logits");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::filesystem::path path = fuzz::scratch_dir("gguf") / "model.gguf";
    fuzz::write_file(path, {data, size});
    fuzz_header(path);
    fuzz_model(path);
    return 0;
}
