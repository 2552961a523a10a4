file(REMOVE_RECURSE
  "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_cascade.cpp.o"
  "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_cascade.cpp.o.d"
  "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_cascade_analytics.cpp.o"
  "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_cascade_analytics.cpp.o.d"
  "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_max_gram.cpp.o"
  "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_max_gram.cpp.o.d"
  "tests_methods_cs_drafting"
  "tests_methods_cs_drafting.pdb"
  "tests_methods_cs_drafting_tests-98e47c4.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/tests_methods_cs_drafting.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
