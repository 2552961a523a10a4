file(REMOVE_RECURSE
  "CMakeFiles/tests_methods_edd_pct.dir/tests/methods/edd_pct/test_edd.cpp.o"
  "CMakeFiles/tests_methods_edd_pct.dir/tests/methods/edd_pct/test_edd.cpp.o.d"
  "CMakeFiles/tests_methods_edd_pct.dir/tests/methods/edd_pct/test_pct.cpp.o"
  "CMakeFiles/tests_methods_edd_pct.dir/tests/methods/edd_pct/test_pct.cpp.o.d"
  "tests_methods_edd_pct"
  "tests_methods_edd_pct.pdb"
  "tests_methods_edd_pct_tests-98e47c4.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/tests_methods_edd_pct.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
