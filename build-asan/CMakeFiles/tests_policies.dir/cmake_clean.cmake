file(REMOVE_RECURSE
  "CMakeFiles/tests_policies.dir/tests/policies/test_model_proposer.cpp.o"
  "CMakeFiles/tests_policies.dir/tests/policies/test_model_proposer.cpp.o.d"
  "CMakeFiles/tests_policies.dir/tests/policies/test_next_token.cpp.o"
  "CMakeFiles/tests_policies.dir/tests/policies/test_next_token.cpp.o.d"
  "CMakeFiles/tests_policies.dir/tests/policies/test_policy_checks.cpp.o"
  "CMakeFiles/tests_policies.dir/tests/policies/test_policy_checks.cpp.o.d"
  "CMakeFiles/tests_policies.dir/tests/policies/test_prompt_lookup.cpp.o"
  "CMakeFiles/tests_policies.dir/tests/policies/test_prompt_lookup.cpp.o.d"
  "tests_policies"
  "tests_policies.pdb"
  "tests_policies_tests-98e47c4.cmake"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/tests_policies.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
