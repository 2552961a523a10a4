# CMake generated Testfile for 
# Source directory: /work/wt-io
# Build directory: /work/wt-io/build-asan
# 
# This file includes the relevant testing commands required for 
# testing this directory and lists subdirectories to be tested as well.
include("/work/wt-io/build-asan/tests_bench_include-98e47c4.cmake")
include("/work/wt-io/build-asan/tests_core_include-98e47c4.cmake")
include("/work/wt-io/build-asan/tests_io_include-98e47c4.cmake")
include("/work/wt-io/build-asan/tests_loop_include-98e47c4.cmake")
include("/work/wt-io/build-asan/tests_methods_cs_drafting_include-98e47c4.cmake")
include("/work/wt-io/build-asan/tests_methods_eagle_fspad_include-98e47c4.cmake")
include("/work/wt-io/build-asan/tests_methods_edd_pct_include-98e47c4.cmake")
include("/work/wt-io/build-asan/tests_methods_glide_cape_include-98e47c4.cmake")
include("/work/wt-io/build-asan/tests_methods_mcsd_include-98e47c4.cmake")
include("/work/wt-io/build-asan/tests_model_include-98e47c4.cmake")
include("/work/wt-io/build-asan/tests_policies_include-98e47c4.cmake")
include("/work/wt-io/build-asan/tests_train_include-98e47c4.cmake")
add_test([=[layout/includes flow one way through detail/]=] "/usr/bin/cmake" "-DROOT=/work/wt-io" "-P" "/work/wt-io/tests/layout/check_includes.cmake")
set_tests_properties([=[layout/includes flow one way through detail/]=] PROPERTIES  LABELS "layout" _BACKTRACE_TRIPLES "/work/wt-io/CMakeLists.txt;137;add_test;/work/wt-io/CMakeLists.txt;0;")
add_test([=[layout/code in the manual and in docs/writing_a_policy.md is the code of the examples]=] "/usr/bin/cmake" "-DROOT=/work/wt-io" "-P" "/work/wt-io/tests/layout/check_manual.cmake")
set_tests_properties([=[layout/code in the manual and in docs/writing_a_policy.md is the code of the examples]=] PROPERTIES  LABELS "layout" _BACKTRACE_TRIPLES "/work/wt-io/CMakeLists.txt;140;add_test;/work/wt-io/CMakeLists.txt;0;")
add_test([=[layout/every test name prints (Catch2 v2 loops on a late colon)]=] "/usr/bin/cmake" "-DROOT=/work/wt-io" "-P" "/work/wt-io/tests/layout/check_test_names.cmake")
set_tests_properties([=[layout/every test name prints (Catch2 v2 loops on a late colon)]=] PROPERTIES  LABELS "layout" _BACKTRACE_TRIPLES "/work/wt-io/CMakeLists.txt;144;add_test;/work/wt-io/CMakeLists.txt;0;")
add_test([=[policies/a malformed policy is told by name which member it lacks]=] "/usr/bin/cmake" "-DCXX=/usr/bin/c++" "-DROOT=/work/wt-io" "-P" "/work/wt-io/tests/policies/fail/check_messages.cmake")
set_tests_properties([=[policies/a malformed policy is told by name which member it lacks]=] PROPERTIES  LABELS "policies;errors" _BACKTRACE_TRIPLES "/work/wt-io/CMakeLists.txt;176;add_test;/work/wt-io/CMakeLists.txt;0;")
