file(REMOVE_RECURSE
  "CMakeFiles/tests_train.dir/tests/train/test_kernels.cpp.o"
  "CMakeFiles/tests_train.dir/tests/train/test_kernels.cpp.o.d"
  "CMakeFiles/tests_train.dir/tests/train/test_train.cpp.o"
  "CMakeFiles/tests_train.dir/tests/train/test_train.cpp.o.d"
  "tests_train"
  "tests_train.pdb"
  "tests_train_tests-98e47c4.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/tests_train.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
