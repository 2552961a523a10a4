file(REMOVE_RECURSE
  "CMakeFiles/tests_methods_glide_cape.dir/tests/methods/glide_cape/test_cape.cpp.o"
  "CMakeFiles/tests_methods_glide_cape.dir/tests/methods/glide_cape/test_cape.cpp.o.d"
  "CMakeFiles/tests_methods_glide_cape.dir/tests/methods/glide_cape/test_glide.cpp.o"
  "CMakeFiles/tests_methods_glide_cape.dir/tests/methods/glide_cape/test_glide.cpp.o.d"
  "tests_methods_glide_cape"
  "tests_methods_glide_cape.pdb"
  "tests_methods_glide_cape_tests-98e47c4.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/tests_methods_glide_cape.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
