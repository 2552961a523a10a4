file(REMOVE_RECURSE
  "CMakeFiles/tests_methods_mcsd.dir/tests/methods/mcsd/test_decision_model.cpp.o"
  "CMakeFiles/tests_methods_mcsd.dir/tests/methods/mcsd/test_decision_model.cpp.o.d"
  "CMakeFiles/tests_methods_mcsd.dir/tests/methods/mcsd/test_fork_mask.cpp.o"
  "CMakeFiles/tests_methods_mcsd.dir/tests/methods/mcsd/test_fork_mask.cpp.o.d"
  "CMakeFiles/tests_methods_mcsd.dir/tests/methods/mcsd/test_mcsd.cpp.o"
  "CMakeFiles/tests_methods_mcsd.dir/tests/methods/mcsd/test_mcsd.cpp.o.d"
  "tests_methods_mcsd"
  "tests_methods_mcsd.pdb"
  "tests_methods_mcsd_tests-98e47c4.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/tests_methods_mcsd.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
