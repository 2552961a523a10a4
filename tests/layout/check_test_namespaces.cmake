# tests/layout/check_test_namespaces.cmake — every test file that a unity build batches with others keeps
# its body in a namespace named for the file. A unity build (CMakeLists.txt) compiles several test files
# of a folder as one translation unit; their anonymous namespaces then merge, and two files' helpers of
# one name (a `fresh_dir`, a `kDir`) clash, or worse, overload each other. Files that compile alone
# (tests/core, tests/cuda, a file marked SKIP_UNITY_BUILD_INCLUSION) are exempt. Run by ctest:
# cmake -DROOT=<source dir> -P check_test_namespaces.cmake.

file(GLOB_RECURSE sources RELATIVE ${ROOT} ${ROOT}/tests/*/test_*.cpp)
file(READ ${ROOT}/CMakeLists.txt cmake_text)
set(bad "")
foreach(rel IN LISTS sources)
    if(rel MATCHES "^tests/(core|cuda|layout|consumer|fuzz)/")
        continue()
    endif()
    string(FIND "${cmake_text}" "${rel} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON" alone)
    if(NOT alone EQUAL -1)
        continue()
    endif()
    get_filename_component(stem ${rel} NAME_WE)
    file(READ ${ROOT}/${rel} text)
    string(FIND "${text}" "\nnamespace ${stem} {" open)
    string(FIND "${text}" "\n}  // namespace ${stem}\n" close)
    string(REGEX MATCH "\n[^\n]*[^ \n][^\n]*\n*$" last_line "${text}")
    if(open EQUAL -1 OR close EQUAL -1 OR NOT last_line MATCHES "^\n}  // namespace ${stem}\n*$")
        string(APPEND bad "  ${rel}: wants `namespace ${stem} {` after its includes and `}  // namespace ${stem}` as its last line\n")
    endif()
endforeach()
if(NOT bad STREQUAL "")
    message(FATAL_ERROR "test files batched into one translation unit must keep their bodies apart:\n${bad}")
endif()
