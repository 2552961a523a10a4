
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wt-io/tests/loop/test_committed_hidden.cpp" "CMakeFiles/tests_loop.dir/tests/loop/test_committed_hidden.cpp.o" "gcc" "CMakeFiles/tests_loop.dir/tests/loop/test_committed_hidden.cpp.o.d"
  "/work/wt-io/tests/loop/test_context_limit.cpp" "CMakeFiles/tests_loop.dir/tests/loop/test_context_limit.cpp.o" "gcc" "CMakeFiles/tests_loop.dir/tests/loop/test_context_limit.cpp.o.d"
  "/work/wt-io/tests/loop/test_generate.cpp" "CMakeFiles/tests_loop.dir/tests/loop/test_generate.cpp.o" "gcc" "CMakeFiles/tests_loop.dir/tests/loop/test_generate.cpp.o.d"
  "/work/wt-io/tests/loop/test_lossless_sampling.cpp" "CMakeFiles/tests_loop.dir/tests/loop/test_lossless_sampling.cpp.o" "gcc" "CMakeFiles/tests_loop.dir/tests/loop/test_lossless_sampling.cpp.o.d"
  "/work/wt-io/tests/loop/test_metrics.cpp" "CMakeFiles/tests_loop.dir/tests/loop/test_metrics.cpp.o" "gcc" "CMakeFiles/tests_loop.dir/tests/loop/test_metrics.cpp.o.d"
  "/work/wt-io/tests/loop/test_soak.cpp" "CMakeFiles/tests_loop.dir/tests/loop/test_soak.cpp.o" "gcc" "CMakeFiles/tests_loop.dir/tests/loop/test_soak.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
