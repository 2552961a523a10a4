// tests/fuzz/fuzz_safetensors.cpp — arbitrary bytes as a .safetensors file: SafetensorsFile::open, then
// every tensor read as float and as bfloat16 where its dtype allows. Run through scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include <cmath>

#include "detail/io/safetensors.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::filesystem::path path = fuzz::scratch_dir("safetensors") / "model.safetensors";
    fuzz::write_file(path, {data, size});
    try {
        const specdec::SafetensorsFile file = specdec::SafetensorsFile::open(path);
        (void)file.metadata();
        for (const specdec::TensorInfo& t : file.tensors()) {
            // open() promises every tensor in bounds and sized to its shape.
            FUZZ_CHECK(t.numel >= 0, "numel >= 0");
            FUZZ_CHECK(t.bytes.size() == static_cast<std::size_t>(t.numel) * specdec::dtype_size(t.dtype),
                       "bytes == numel * dtype size");
            FUZZ_CHECK(file.find(t.name) == &t, "find() returns the listed tensor");
            const bool floating = t.dtype == specdec::DType::kF32 || t.dtype == specdec::DType::kBF16 ||
                                  t.dtype == specdec::DType::kF16 || t.dtype == specdec::DType::kF64;
            try {
                const std::vector<float> f = file.read_floats(t);
                FUZZ_CHECK(floating, "read_floats accepts only F32/BF16/F16/F64");
                FUZZ_CHECK(f.size() == static_cast<std::size_t>(t.numel), "read_floats size");
                const std::vector<specdec::bf16> b = file.read_bf16(t);
                FUZZ_CHECK(b.size() == f.size(), "read_bf16 size");
            } catch (const specdec::error&) {
                FUZZ_CHECK(!floating, "a float tensor of a validated file reads");
            }
        }
        try {
            (void)file.get("model.layers.0.self_attn.q_proj.weight");  // the "closest names" hint path
        } catch (const specdec::error&) {
        }
    } catch (const specdec::error&) {
    }
    return 0;
}
