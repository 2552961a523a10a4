# cmake/cuda.cmake — the CUDA backend's interface target, tests and benchmark.
# Included by CMakeLists.txt after include(CTest); when no CUDA compiler is found (or SPECDEC_CUDA is
# OFF, or under SPECDEC_SANITIZE) it says so and returns, and the CPU build goes on unchanged.

if(DEFINED SPECDEC_CUDA AND NOT SPECDEC_CUDA)
    message(STATUS "specdec: CUDA backend skipped (SPECDEC_CUDA is OFF)")
    return()
endif()
if(SPECDEC_SANITIZE)
    # ASan's shadow memory and the CUDA driver do not mix; compute-sanitizer checks the CUDA code instead
    # (scripts/gpu_check.sh).
    message(STATUS "specdec: CUDA backend skipped under SPECDEC_SANITIZE (use compute-sanitizer: scripts/gpu_check.sh)")
    return()
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
    message(STATUS "specdec: CUDA backend skipped: no CUDA compiler found (put nvcc on PATH or set CMAKE_CUDA_COMPILER)")
    return()
endif()
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)  # A100, H100; must be set before enable_language
endif()
enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
message(STATUS "specdec: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, architectures ${CMAKE_CUDA_ARCHITECTURES})")

# ---- the backend: headers (kernels.cuh, detail/cuda/*.cuh) + the CUDA runtime and cuBLASLt -------------
add_library(specdec_cuda INTERFACE)
add_library(specdec::cuda ALIAS specdec_cuda)
target_link_libraries(specdec_cuda INTERFACE specdec::specdec CUDA::cudart CUDA::cublasLt)

# C++20 for nvcc is passed as a flag: CMake 3.25 does not know nvcc's C++20 option, so CUDA_STANDARD 20
# fails at generation ("requires the language dialect CUDA20").
target_compile_options(specdec_cuda INTERFACE $<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>)

# Warnings are errors for nvcc's own diagnostics and for the host code it hands to g++.
# Relaxed: nvcc's front end does not know `#pragma GCC unroll` (detail/model/matmul.hpp, for g++), which it
# reports as warning 1675; g++ still sees and applies the pragma.
# The CPU bodies come from specdec::compiled: nvcc's host pass then skips their code generation (a third of
# a test file's compile time).
function(specdec_cuda_program target)
    target_link_libraries(${target} PRIVATE specdec::cuda specdec::compiled)
    target_compile_options(${target} PRIVATE
        "$<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings;-diag-suppress=1675;-Xcompiler=-Wall,-Wextra,-Werror>"
        "$<$<COMPILE_LANGUAGE:CXX>:-Wall;-Wextra;-Wpedantic;-Werror>")
endfunction()

if(BUILD_TESTING)
    add_executable(specdec_cuda_tests tests/cuda/main.cpp tests/cuda/test_cuda.cu tests/cuda/test_cuda_train.cu
                                     tests/cuda/test_cuda_state_drafters.cu)
    target_include_directories(specdec_cuda_tests PRIVATE tests)
    target_link_libraries(specdec_cuda_tests PRIVATE Catch2::Catch2)  # its own runner (main.cpp)
    specdec_cuda_program(specdec_cuda_tests)
    # One ctest entry per case, as for the CPU suites. Exit code 77 = no usable GPU (tests/cuda/main.cpp):
    # reported as skipped, never as passed; listing the cases needs no GPU.
    catch_discover_tests(specdec_cuda_tests TEST_PREFIX "cuda/" EXTRA_ARGS --warn NoAssertions
        PROPERTIES SKIP_RETURN_CODE 77 LABELS cuda)
endif()

if(SPECDEC_BUILD_EXAMPLES)
    add_executable(bench_cuda examples/bench/bench_cuda.cu)
    specdec_cuda_program(bench_cuda)
    # Speculative generation timed on the GPU, beside autoregressive decoding (specdec_bench's prompts).
    add_executable(bench_cuda_spec examples/bench/bench_cuda_spec.cu)
    target_link_libraries(bench_cuda_spec PRIVATE specdec::bench_harness)
    specdec_cuda_program(bench_cuda_spec)
    if(BUILD_TESTING)
        # Its command line is checked before any GPU is touched: these run on any machine.
        add_test(NAME bench_cuda_spec/rejects_an_unknown_target_scale
                 COMMAND bench_cuda_spec --target-scale demo,13b WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
        set_tests_properties(bench_cuda_spec/rejects_an_unknown_target_scale PROPERTIES LABELS cuda
            PASS_REGULAR_EXPRESSION "\\[specdec\\.bench\\] argument --target-scale = 'demo,13b': '13b' is neither demo.*110m, 1b and 7b")
        add_test(NAME bench_cuda_spec/rejects_an_unknown_option
                 COMMAND bench_cuda_spec --gamma 3 WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
        set_tests_properties(bench_cuda_spec/rejects_an_unknown_option PROPERTIES LABELS cuda
            PASS_REGULAR_EXPRESSION "\\[specdec\\.bench\\] unknown argument '--gamma'.*usage: bench_cuda_spec")
        add_test(NAME bench_cuda_spec/rejects_an_unknown_method
                 COMMAND bench_cuda_spec --methods chain,medusa WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
        set_tests_properties(bench_cuda_spec/rejects_an_unknown_method PROPERTIES LABELS cuda
            PASS_REGULAR_EXPRESSION "\\[specdec\\.bench\\] argument --methods = 'chain,medusa': 'medusa' is not a method of bench_cuda_spec; known: chain, tree, mcsd, cs-drafting, glide-cape, edd-pct, eagle2")
        add_test(NAME bench_cuda_spec/rejects_a_methods_file_without_the_entry
                 COMMAND bench_cuda_spec --methods tree --methods-file examples/bench/methods_glide.json
                 WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
        set_tests_properties(bench_cuda_spec/rejects_a_methods_file_without_the_entry PROPERTIES LABELS cuda
            PASS_REGULAR_EXPRESSION "\\[specdec\\.bench\\] examples/bench/methods_glide.json: no entry named \"tree small top2 2-2-1\" \\(--methods tree runs it\\)")
        add_test(NAME bench_cuda_spec/rejects_a_missing_models_folder
                 COMMAND bench_cuda_spec --models no_such_folder WORKING_DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR})
        set_tests_properties(bench_cuda_spec/rejects_a_missing_models_folder PROPERTIES LABELS cuda
            PASS_REGULAR_EXPRESSION "\\[specdec\\.bench\\] no_such_folder/target: no model here")
    endif()
    # train_demo ... --device cuda: the GPU trainers (examples/feature_trainer.hpp, examples/lm_trainer.hpp)
    target_sources(train_demo PRIVATE examples/feature_trainer_cuda.cu examples/lm_trainer_cuda.cu)
    # train_demo was made before the architectures were set above (CMakeLists.txt's examples loop), so its
    # CUDA_ARCHITECTURES is empty unless the command line gave them: set it, or a plain `cmake -S . -B b`
    # (scripts/demo.sh) fails to generate where nvcc is found.
    set_target_properties(train_demo PROPERTIES CUDA_ARCHITECTURES "${CMAKE_CUDA_ARCHITECTURES}")
    target_compile_definitions(train_demo PRIVATE SPECDEC_TRAIN_DEMO_CUDA=1)
    specdec_cuda_program(train_demo)
endif()
