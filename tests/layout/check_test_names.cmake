# tests/layout/check_test_names.cmake — every test name prints. Catch2 v2's console reporter wraps a test
# case's or section's name with its continuation lines indented to just after the name's first ": ";
# when that is past the 79-column line there is no room left and the reporter loops forever, printing
# the name's tail, as soon as the case warns or fails (ctest then runs out of memory buffering it). So
# the first ": " of a name must end by column 60. Run by ctest: cmake -DROOT=<source dir> -P check_test_names.cmake.

file(GLOB_RECURSE sources ${ROOT}/tests/*.cpp ${ROOT}/tests/*.cu)
set(bad "")
foreach(src IN LISTS sources)
    file(READ ${src} text)
    string(REGEX MATCHALL "(TEST_CASE|SECTION)\\(\"[^\"]*\"" names "${text}")
    foreach(name IN LISTS names)
        string(REGEX REPLACE "^[A-Z_]+\\(\"" "" name "${name}")
        string(REGEX REPLACE "\"$" "" name "${name}")
        string(FIND "${name}" ": " at)
        if(at GREATER 58)
            file(RELATIVE_PATH rel ${ROOT} ${src})
            string(APPEND bad "  ${rel}: \"${name}\" (its first \": \" ends at column ${at} + 2)\n")
        endif()
    endforeach()
endforeach()
if(NOT bad STREQUAL "")
    message(FATAL_ERROR "test names whose first \": \" ends past column 60 make Catch2 v2's reporter loop when "
                        "they warn or fail; say it with \";\" or \",\" instead:\n${bad}")
endif()
