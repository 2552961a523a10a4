# examples/course/expect_failure.cmake — proves a checker has power: runs PROGRAM (a checker compiled
# from the starter or from a planted wrong solution) and passes only if it exits non-zero AND prints
# REGEX (the message a student would read). Usage: cmake -DPROGRAM=... -DREGEX=... -P expect_failure.cmake
execute_process(COMMAND ${PROGRAM} OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
message("${out}${err}")
if(rc EQUAL 0)
    message(FATAL_ERROR "the checker PASSED a file it must fail: it has no power against this mistake")
endif()
if(NOT "${out}${err}" MATCHES "${REGEX}")
    message(FATAL_ERROR "the checker failed (exit ${rc}) but without the expected message: ${REGEX}")
endif()
message("the checker failed as it must (exit ${rc}), saying: ${REGEX}")
