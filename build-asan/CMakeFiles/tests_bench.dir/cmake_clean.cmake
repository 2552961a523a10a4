file(REMOVE_RECURSE
  "CMakeFiles/tests_bench.dir/tests/bench/test_bench_config.cpp.o"
  "CMakeFiles/tests_bench.dir/tests/bench/test_bench_config.cpp.o.d"
  "tests_bench"
  "tests_bench.pdb"
  "tests_bench_tests-98e47c4.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/tests_bench.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
