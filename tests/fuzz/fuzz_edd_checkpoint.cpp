// tests/fuzz/fuzz_edd_checkpoint.cpp — an EDD drafter folder from one input: the first 4 bytes
// (little-endian) are the length of config.json, the rest is model.safetensors (fuzz_common.hpp's
// split). Runs load_edd_checkpoint; what loads must validate against its config. Run through scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include "detail/methods/edd_pct/edd.hpp"
#include "fuzz_common.hpp"

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::filesystem::path& dir = fuzz::scratch_dir("edd_checkpoint");
    const fuzz::TwoParts parts = fuzz::split(data, size);
    fuzz::write_file(dir / "config.json", parts.first);
    fuzz::write_file(dir / "model.safetensors", parts.second);
    std::optional<specdec::EddCheckpoint> ck;
    try {
        ck = specdec::load_edd_checkpoint(dir);
    } catch (const specdec::error&) {
        return 0;
    }
    ck->config.validate();  // outside the try: what loaded is valid and fits its config
    specdec::validate(ck->weights, ck->config);
    FUZZ_CHECK(ck->target_layer >= 0, "edd_target_layer >= 0");
    return 0;
}
