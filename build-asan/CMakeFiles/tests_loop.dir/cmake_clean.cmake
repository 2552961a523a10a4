file(REMOVE_RECURSE
  "CMakeFiles/tests_loop.dir/tests/loop/test_committed_hidden.cpp.o"
  "CMakeFiles/tests_loop.dir/tests/loop/test_committed_hidden.cpp.o.d"
  "CMakeFiles/tests_loop.dir/tests/loop/test_context_limit.cpp.o"
  "CMakeFiles/tests_loop.dir/tests/loop/test_context_limit.cpp.o.d"
  "CMakeFiles/tests_loop.dir/tests/loop/test_generate.cpp.o"
  "CMakeFiles/tests_loop.dir/tests/loop/test_generate.cpp.o.d"
  "CMakeFiles/tests_loop.dir/tests/loop/test_lossless_sampling.cpp.o"
  "CMakeFiles/tests_loop.dir/tests/loop/test_lossless_sampling.cpp.o.d"
  "CMakeFiles/tests_loop.dir/tests/loop/test_metrics.cpp.o"
  "CMakeFiles/tests_loop.dir/tests/loop/test_metrics.cpp.o.d"
  "CMakeFiles/tests_loop.dir/tests/loop/test_soak.cpp.o"
  "CMakeFiles/tests_loop.dir/tests/loop/test_soak.cpp.o.d"
  "tests_loop"
  "tests_loop.pdb"
  "tests_loop_tests-98e47c4.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/tests_loop.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
