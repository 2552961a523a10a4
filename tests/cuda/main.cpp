// The entry point of the CUDA tests: without a usable GPU it says why and exits 77, which ctest's
// SKIP_RETURN_CODE reports as skipped (Catch2 v2 has no SKIP) — never as passed. Compiled by the host
// compiler, so Catch2's implementation does not go through nvcc.
#define CATCH_CONFIG_RUNNER
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

#include "catch.hpp"

int main(int argc, char** argv) {
    constexpr int kSkipped = 77;
    // Listing the cases (ctest's discovery after the link) needs no GPU.
    for (int i = 1; i < argc; ++i)
        if (std::strncmp(argv[i], "--list", 6) == 0) return Catch::Session().run(argc, argv);
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess) {
        std::fprintf(stderr, "specdec CUDA tests skipped: cudaGetDeviceCount failed: %s (%s)\n", cudaGetErrorName(status),
                     cudaGetErrorString(status));
        return kSkipped;
    }
    if (devices == 0) {
        std::fprintf(stderr, "specdec CUDA tests skipped: no CUDA device found\n");
        return kSkipped;
    }
    return Catch::Session().run(argc, argv);
}
