// tests/fuzz/fuzz_sentencepiece.cpp — SentencePiece's tokenizer.model (a protobuf ModelProto) from the
// input. A model that loads must encode fixed texts to ids in its vocabulary (or refuse with
// specdec::error), with and without BOS, and decode them; anything else is a specdec::error. Run through
// scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "detail/io/sentencepiece.hpp"
#include "fuzz_common.hpp"

namespace {

constexpr char kBytes[] = "\x00\x01\xFF\xFE stray \x80\x80\x80 \xC3 utf-8 \xE2\x96\x81";  // NUL, stray bytes, a literal "▁"

constexpr std::array<std::string_view, 4> kTexts = {
    "",
    "Once upon a time,  there was a little girl named Lily.\n",
    "h\xC3\xA9llo w\xC3\xB6rld \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E \xF0\x9F\x99\x82",
    std::string_view(kBytes, sizeof kBytes - 1),
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::filesystem::path& dir = fuzz::scratch_dir("sentencepiece");
    fuzz::write_file(dir / "tokenizer.model", {data, size});
    std::optional<specdec::Llama2cTokenizer> tok;
    try {
        tok = specdec::load_sentencepiece_model(dir / "tokenizer.model");
    } catch (const specdec::error&) {
        return 0;
    }
    const int V = tok->vocab_size();
    FUZZ_CHECK(V >= 259, "a loaded model holds the byte pieces");
    for (std::string_view text : kTexts) {
        for (bool bos : {false, true}) {
            std::vector<int> ids;
            try {
                ids = tok->encode(text, bos, false);
            } catch (const specdec::error&) {
                continue;  // no "▁" piece for the dummy prefix
            }
            for (int id : ids) FUZZ_CHECK(id >= 0 && id < V, "encode returns ids in the vocabulary");
            (void)tok->decode(ids);
        }
    }
    return 0;
}
