// tests/fuzz/fuzz_prompts.cpp — arbitrary bytes as data/prompts.jsonl: example::read_prompts
// (examples/report.hpp, what the demos read prompts with), for a few prompt counts. Run through scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include "examples/report.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::filesystem::path path = fuzz::scratch_dir("prompts") / "prompts.jsonl";
    fuzz::write_file(path, {data, size});
    for (int count : {1, 3, 1000}) {
        try {
            const std::vector<example::Prompt> prompts = example::read_prompts(path.string(), count);
            FUZZ_CHECK(static_cast<int>(prompts.size()) <= count, "at most count prompts");
        } catch (const specdec::error&) {
            return 0;
        }
    }
    return 0;
}
