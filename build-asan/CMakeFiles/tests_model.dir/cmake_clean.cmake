file(REMOVE_RECURSE
  "CMakeFiles/tests_model.dir/tests/model/test_attention_paths.cpp.o"
  "CMakeFiles/tests_model.dir/tests/model/test_attention_paths.cpp.o.d"
  "CMakeFiles/tests_model.dir/tests/model/test_matmul.cpp.o"
  "CMakeFiles/tests_model.dir/tests/model/test_matmul.cpp.o.d"
  "CMakeFiles/tests_model.dir/tests/model/test_model.cpp.o"
  "CMakeFiles/tests_model.dir/tests/model/test_model.cpp.o.d"
  "CMakeFiles/tests_model.dir/tests/model/test_model_inputs.cpp.o"
  "CMakeFiles/tests_model.dir/tests/model/test_model_inputs.cpp.o.d"
  "tests_model"
  "tests_model.pdb"
  "tests_model_tests-98e47c4.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/tests_model.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
