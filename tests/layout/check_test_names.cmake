# tests/layout/check_test_names.cmake — every test name prints. Catch2 v2's console reporter wraps a test
# case's or section's name with its continuation lines indented to just after the name's first ": ";
# when that is past the 79-column line there is no room left and the reporter loops forever, printing
# the name's tail, as soon as the case warns or fails (ctest then runs out of memory buffering it). So
# the first ": " of a name must end by column 60. And a name holds no ";": catch_discover_tests turns the
# names into a CMake list, so a ";" splits one case into two ctest entries whose filters match no case,
# and both pass without running it. Run by ctest: cmake -DROOT=<source dir> -P check_test_names.cmake.

file(GLOB_RECURSE sources ${ROOT}/tests/*.cpp ${ROOT}/tests/*.cu)
set(bad "")
set(split "")
foreach(src IN LISTS sources)
    file(READ ${src} text)
    string(REPLACE ";" "@semicolon@" text "${text}")  # before the text becomes a list of names
    string(REGEX MATCHALL "(TEST_CASE|SECTION)\\(\"[^\"]*\"" names "${text}")
    foreach(name IN LISTS names)
        set(is_case FALSE)
        if(name MATCHES "^TEST_CASE")
            set(is_case TRUE)  # a ctest entry (a SECTION is not one)
        endif()
        string(REGEX REPLACE "^[A-Z_]+\\(\"" "" name "${name}")
        string(REGEX REPLACE "\"$" "" name "${name}")
        if(is_case AND name MATCHES "@semicolon@")
            file(RELATIVE_PATH rel ${ROOT} ${src})
            string(REPLACE "@semicolon@" "<;>" shown "${name}")
            string(APPEND split "  ${rel}: \"${shown}\"\n")
        endif()
        string(REPLACE "@semicolon@" ";" name "${name}")
        string(FIND "${name}" ": " at)
        if(at GREATER 58)
            file(RELATIVE_PATH rel ${ROOT} ${src})
            string(APPEND bad "  ${rel}: \"${name}\" (its first \": \" ends at column ${at} + 2)\n")
        endif()
    endforeach()
endforeach()
if(NOT split STREQUAL "")
    message(FATAL_ERROR "test names with a semicolon (shown <;>) become two ctest entries that match no case, "
                        "so the case never runs: say it with \",\" instead:\n${split}")
endif()
if(NOT bad STREQUAL "")
    message(FATAL_ERROR "test names whose first \": \" ends past column 60 make Catch2 v2's reporter loop when "
                        "they warn or fail: say it with \",\" instead:\n${bad}")
endif()
