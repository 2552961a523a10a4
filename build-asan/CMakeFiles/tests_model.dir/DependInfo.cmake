
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wt-io/tests/model/test_attention_paths.cpp" "CMakeFiles/tests_model.dir/tests/model/test_attention_paths.cpp.o" "gcc" "CMakeFiles/tests_model.dir/tests/model/test_attention_paths.cpp.o.d"
  "/work/wt-io/tests/model/test_matmul.cpp" "CMakeFiles/tests_model.dir/tests/model/test_matmul.cpp.o" "gcc" "CMakeFiles/tests_model.dir/tests/model/test_matmul.cpp.o.d"
  "/work/wt-io/tests/model/test_model.cpp" "CMakeFiles/tests_model.dir/tests/model/test_model.cpp.o" "gcc" "CMakeFiles/tests_model.dir/tests/model/test_model.cpp.o.d"
  "/work/wt-io/tests/model/test_model_inputs.cpp" "CMakeFiles/tests_model.dir/tests/model/test_model_inputs.cpp.o" "gcc" "CMakeFiles/tests_model.dir/tests/model/test_model_inputs.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
