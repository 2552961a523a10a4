// tests/fuzz/fuzz_token_file.cpp — arbitrary bytes as a dataset token file: train::TokenFile, then
// check_vocab, every token read, and a batch of random training windows. Run through scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include <climits>
#include <optional>

#include "detail/train/dataset.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::filesystem::path path = fuzz::scratch_dir("token_file") / "tokens.bin";
    fuzz::write_file(path, {data, size});
    std::optional<specdec::train::TokenFile> file;
    try {
        file.emplace(path.string());
    } catch (const specdec::error&) {
        return 0;
    }
    // The header's count fits the bytes after it: every token is readable.
    FUZZ_CHECK(file->size() * static_cast<std::size_t>(file->bytes_per_token()) + 32 <= size, "count fits the file");
    for (int vocab : {0, 1, 256, 65536, INT_MAX}) {
        try {
            file->check_vocab(vocab);
            for (std::size_t i = 0; i < file->size(); ++i)
                FUZZ_CHECK((*file)[i] >= 0 && (*file)[i] < vocab, "check_vocab passed, so tokens are < vocab");
        } catch (const specdec::error&) {
        }
    }
    const std::size_t n = file->size();
    const int T = static_cast<int>(std::min<std::size_t>(n > 0 ? n - 1 : 0, 8));
    try {
        const specdec::train::Split split = specdec::train::split_tail(n, 0.25);
        const specdec::train::WindowBatch w = specdec::train::random_windows(*file, {0, n}, 2, std::max(T, 1), 7, 0);
        FUZZ_CHECK(w.inputs.size() == static_cast<std::size_t>(w.B) * w.T, "inputs are (B, T)");
        (void)split;
    } catch (const specdec::error&) {
    }
    return 0;
}
