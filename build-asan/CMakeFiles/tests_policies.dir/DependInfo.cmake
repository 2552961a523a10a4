
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wt-io/tests/policies/test_model_proposer.cpp" "CMakeFiles/tests_policies.dir/tests/policies/test_model_proposer.cpp.o" "gcc" "CMakeFiles/tests_policies.dir/tests/policies/test_model_proposer.cpp.o.d"
  "/work/wt-io/tests/policies/test_next_token.cpp" "CMakeFiles/tests_policies.dir/tests/policies/test_next_token.cpp.o" "gcc" "CMakeFiles/tests_policies.dir/tests/policies/test_next_token.cpp.o.d"
  "/work/wt-io/tests/policies/test_policy_checks.cpp" "CMakeFiles/tests_policies.dir/tests/policies/test_policy_checks.cpp.o" "gcc" "CMakeFiles/tests_policies.dir/tests/policies/test_policy_checks.cpp.o.d"
  "/work/wt-io/tests/policies/test_prompt_lookup.cpp" "CMakeFiles/tests_policies.dir/tests/policies/test_prompt_lookup.cpp.o" "gcc" "CMakeFiles/tests_policies.dir/tests/policies/test_prompt_lookup.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
