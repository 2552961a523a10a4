# tests/layout/check_manual.cmake — code shown in the manual is code that compiles: the example at the top
# of specdec.hpp is examples/00_first_composition.cpp, and the prompt-lookup proposer shown in
# docs/writing_a_policy.md is examples/prompt_lookup.hpp. Run by ctest: cmake -DROOT=<source dir> -P
# check_manual.cmake. The examples are built (and tested); this keeps the copies from drifting.

file(STRINGS ${ROOT}/specdec.hpp manual)
set(in_example FALSE)
set(code "")
foreach(line IN LISTS manual)
    if(line MATCHES "^// ## A complete example")
        set(in_example TRUE)
    elseif(in_example AND line MATCHES "^//     ")
        string(REGEX REPLACE "^//     " "" line "${line}")
        string(APPEND code "${line}\n")
    elseif(in_example AND NOT code STREQUAL "" AND NOT line MATCHES "^//$")
        break()  # the first prose line after the code ends the example
    endif()
endforeach()
if(code STREQUAL "")
    message(FATAL_ERROR "specdec.hpp: no indented example under '## A complete example'")
endif()

file(READ ${ROOT}/examples/00_first_composition.cpp example)
string(REPLACE "\n\n" "\n" example_lines "${example}")  # the manual's copy has no blank lines
string(FIND "${example_lines}" "${code}" at)
if(at EQUAL -1)
    message(FATAL_ERROR "the example at the top of specdec.hpp differs from examples/00_first_composition.cpp; "
                        "the manual's code is:\n${code}")
endif()
string(REGEX MATCHALL "\n" lines "${code}")
list(LENGTH lines n)
message(STATUS "the manual's example is examples/00_first_composition.cpp (${n} lines)")

file(READ ${ROOT}/docs/writing_a_policy.md doc)
string(FIND "${doc}" "This is `examples/prompt_lookup.hpp`:\n\n```cpp\n" at)
if(at EQUAL -1)
    message(FATAL_ERROR "docs/writing_a_policy.md: no ```cpp block after 'This is `examples/prompt_lookup.hpp`:'")
endif()
string(SUBSTRING "${doc}" ${at} -1 doc)
string(FIND "${doc}" "```cpp\n" open)
math(EXPR open "${open} + 7")
string(SUBSTRING "${doc}" ${open} -1 doc)
string(FIND "${doc}" "```" close)
string(SUBSTRING "${doc}" 0 ${close} shown)
file(READ ${ROOT}/examples/prompt_lookup.hpp header)
string(FIND "${header}" "${shown}" at)
if(at EQUAL -1)
    message(FATAL_ERROR "the proposer shown in docs/writing_a_policy.md differs from examples/prompt_lookup.hpp; "
                        "the page shows:\n${shown}")
endif()
message(STATUS "the proposer in docs/writing_a_policy.md is examples/prompt_lookup.hpp")
