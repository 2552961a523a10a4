// tests/fuzz/fuzz_checkpoint.cpp — a model folder from one input: the first 4 bytes (little-endian) are the
// length of config.json, the rest is model.safetensors (fuzz_common.hpp's split). Runs load_config and
// load_checkpoint; what loads must validate against its config. Run through scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include "detail/io/checkpoint.hpp"
#include "fuzz_common.hpp"

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::filesystem::path& dir = fuzz::scratch_dir("checkpoint");
    const fuzz::TwoParts parts = fuzz::split(data, size);
    fuzz::write_file(dir / "config.json", parts.first);
    fuzz::write_file(dir / "model.safetensors", parts.second);
    std::optional<specdec::Config> config;
    try {
        config = specdec::load_config(dir / "config.json");
    } catch (const specdec::error&) {
    }
    if (config) config->validate();  // outside the try: what load_config returns is a valid config
    std::optional<specdec::Checkpoint> ck;
    try {
        ck = specdec::load_checkpoint(dir);
    } catch (const specdec::error&) {
        return 0;
    }
    specdec::validate(ck->weights, ck->config);  // outside the try: loaded weights fit their config
    return 0;
}
