
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wt-io/tests/io/test_checkpoint.cpp" "CMakeFiles/tests_io.dir/tests/io/test_checkpoint.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_checkpoint.cpp.o.d"
  "/work/wt-io/tests/io/test_command_files.cpp" "CMakeFiles/tests_io.dir/tests/io/test_command_files.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_command_files.cpp.o.d"
  "/work/wt-io/tests/io/test_deferred_matrices.cpp" "CMakeFiles/tests_io.dir/tests/io/test_deferred_matrices.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_deferred_matrices.cpp.o.d"
  "/work/wt-io/tests/io/test_gguf.cpp" "CMakeFiles/tests_io.dir/tests/io/test_gguf.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_gguf.cpp.o.d"
  "/work/wt-io/tests/io/test_gguf_golden.cpp" "CMakeFiles/tests_io.dir/tests/io/test_gguf_golden.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_gguf_golden.cpp.o.d"
  "/work/wt-io/tests/io/test_gguf_llama_cpp.cpp" "CMakeFiles/tests_io.dir/tests/io/test_gguf_llama_cpp.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_gguf_llama_cpp.cpp.o.d"
  "/work/wt-io/tests/io/test_hf_config.cpp" "CMakeFiles/tests_io.dir/tests/io/test_hf_config.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_hf_config.cpp.o.d"
  "/work/wt-io/tests/io/test_hf_golden.cpp" "CMakeFiles/tests_io.dir/tests/io/test_hf_golden.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_hf_golden.cpp.o.d"
  "/work/wt-io/tests/io/test_json.cpp" "CMakeFiles/tests_io.dir/tests/io/test_json.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_json.cpp.o.d"
  "/work/wt-io/tests/io/test_llama2c.cpp" "CMakeFiles/tests_io.dir/tests/io/test_llama2c.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_llama2c.cpp.o.d"
  "/work/wt-io/tests/io/test_malformed_corpus.cpp" "CMakeFiles/tests_io.dir/tests/io/test_malformed_corpus.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_malformed_corpus.cpp.o.d"
  "/work/wt-io/tests/io/test_safetensors.cpp" "CMakeFiles/tests_io.dir/tests/io/test_safetensors.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_safetensors.cpp.o.d"
  "/work/wt-io/tests/io/test_sharded_checkpoint.cpp" "CMakeFiles/tests_io.dir/tests/io/test_sharded_checkpoint.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_sharded_checkpoint.cpp.o.d"
  "/work/wt-io/tests/io/test_tokenizer.cpp" "CMakeFiles/tests_io.dir/tests/io/test_tokenizer.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_tokenizer.cpp.o.d"
  "/work/wt-io/tests/io/test_tokenizer_golden.cpp" "CMakeFiles/tests_io.dir/tests/io/test_tokenizer_golden.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_tokenizer_golden.cpp.o.d"
  "/work/wt-io/tests/io/test_vocab_compat.cpp" "CMakeFiles/tests_io.dir/tests/io/test_vocab_compat.cpp.o" "gcc" "CMakeFiles/tests_io.dir/tests/io/test_vocab_compat.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
