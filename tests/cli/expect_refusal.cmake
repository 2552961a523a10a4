# tests/cli/expect_refusal.cmake — one refusal checked: the program exits 1 with a message that starts with
# `[specdec.<prefix>] ` followed by `regex`. Included by the scripts that check a program's arguments.

# expect_refusal_of(<prefix> <regex> <program> [args...]), run in ${WORK}.
function(expect_refusal_of prefix regex program)
    get_filename_component(name ${program} NAME)
    execute_process(COMMAND ${program} ${ARGN} WORKING_DIRECTORY ${WORK}
        OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc TIMEOUT 30)
    if(NOT rc STREQUAL "1")
        message(FATAL_ERROR "${name} ${ARGN}: exit status ${rc}, expected 1; stderr:\n${err}")
    endif()
    if(NOT err MATCHES "^\\[specdec\\.${prefix}\\] ${regex}")
        message(FATAL_ERROR "${name} ${ARGN}: expected a message matching '${regex}', got:\n${err}")
    endif()
endfunction()
