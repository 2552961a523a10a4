file(REMOVE_RECURSE
  "CMakeFiles/tests_core.dir/tests/core/test_rng_sampling.cpp.o"
  "CMakeFiles/tests_core.dir/tests/core/test_rng_sampling.cpp.o.d"
  "CMakeFiles/tests_core.dir/tests/core/test_tree.cpp.o"
  "CMakeFiles/tests_core.dir/tests/core/test_tree.cpp.o.d"
  "CMakeFiles/tests_core.dir/tests/core/test_tree_mask.cpp.o"
  "CMakeFiles/tests_core.dir/tests/core/test_tree_mask.cpp.o.d"
  "CMakeFiles/tests_core.dir/tests/core/test_tree_pruned.cpp.o"
  "CMakeFiles/tests_core.dir/tests/core/test_tree_pruned.cpp.o.d"
  "tests_core"
  "tests_core.pdb"
  "tests_core_tests-98e47c4.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/tests_core.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
