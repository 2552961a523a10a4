file(REMOVE_RECURSE
  "CMakeFiles/tests_methods_eagle_fspad.dir/tests/methods/eagle_fspad/test_eagle2_tree.cpp.o"
  "CMakeFiles/tests_methods_eagle_fspad.dir/tests/methods/eagle_fspad/test_eagle2_tree.cpp.o.d"
  "CMakeFiles/tests_methods_eagle_fspad.dir/tests/methods/eagle_fspad/test_feature_drafter.cpp.o"
  "CMakeFiles/tests_methods_eagle_fspad.dir/tests/methods/eagle_fspad/test_feature_drafter.cpp.o.d"
  "tests_methods_eagle_fspad"
  "tests_methods_eagle_fspad.pdb"
  "tests_methods_eagle_fspad_tests-98e47c4.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/tests_methods_eagle_fspad.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
