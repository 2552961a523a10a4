
# Consider dependencies only in project.
set(CMAKE_DEPENDS_IN_PROJECT_ONLY OFF)

# The set of languages for which implicit dependencies are needed:
set(CMAKE_DEPENDS_LANGUAGES
  )

# The set of dependency files which are needed:
set(CMAKE_DEPENDS_DEPENDENCY_FILES
  "/work/wt-io/tests/methods/cs_drafting/test_cascade.cpp" "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_cascade.cpp.o" "gcc" "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_cascade.cpp.o.d"
  "/work/wt-io/tests/methods/cs_drafting/test_cascade_analytics.cpp" "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_cascade_analytics.cpp.o" "gcc" "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_cascade_analytics.cpp.o.d"
  "/work/wt-io/tests/methods/cs_drafting/test_max_gram.cpp" "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_max_gram.cpp.o" "gcc" "CMakeFiles/tests_methods_cs_drafting.dir/tests/methods/cs_drafting/test_max_gram.cpp.o.d"
  )

# Targets to which this target links.
set(CMAKE_TARGET_LINKED_INFO_FILES
  )

# Fortran module output directory.
set(CMAKE_Fortran_TARGET_MODULE_DIR "")
