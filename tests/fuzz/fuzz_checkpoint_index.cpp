// tests/fuzz/fuzz_checkpoint_index.cpp — a sharded model folder from one input: the first 4 bytes (little-endian)
// are the length of model.safetensors.index.json, the rest is its shard model-00001-of-00001.safetensors
// (fuzz_common.hpp's split); config.json is a fixed valid one (make_seeds.cpp's tiny(1, false)). Runs
// load_checkpoint, which reads the index; what loads must validate against its config. Run through
// scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include "detail/io/checkpoint.hpp"
#include "fuzz_common.hpp"

#include <optional>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::filesystem::path& dir = fuzz::scratch_dir("checkpoint_index");
    static const bool configured = [&] {
        specdec::save_config(specdec::Config{.hidden_size = 4, .intermediate_size = 4, .num_hidden_layers = 1,
                                             .num_attention_heads = 2, .num_key_value_heads = 1, .vocab_size = 8,
                                             .max_position_embeddings = 16},
                             dir / "config.json");
        return true;
    }();
    (void)configured;
    const fuzz::TwoParts parts = fuzz::split(data, size);
    fuzz::write_file(dir / "model.safetensors.index.json", parts.first);
    fuzz::write_file(dir / "model-00001-of-00001.safetensors", parts.second);
    std::optional<specdec::Checkpoint> ck;
    try {
        ck = specdec::load_checkpoint(dir);
    } catch (const specdec::error&) {
        return 0;
    }
    specdec::validate(ck->weights, ck->config);  // outside the try: loaded weights fit their config
    return 0;
}
