# tests/policies/fail/check_messages.cmake — a malformed policy is told, by name, what it lacks.
# Run by ctest: cmake -DCXX=<compiler> -DROOT=<source dir> -P check_messages.cmake. Compiles
# malformed_policies.cpp (which must fail) and looks for one message per malformed composition, and
# for no trace of the concept's verdict as a whole.

execute_process(
    COMMAND ${CXX} -std=c++20 -fsyntax-only -I${ROOT} ${ROOT}/tests/policies/fail/malformed_policies.cpp
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(APPEND out "${err}")
if(status EQUAL 0)
    message(FATAL_ERROR "malformed_policies.cpp compiled; every composition in it should have been refused")
endif()
set(expected
    "specdec: a Proposer needs `void observe(const StepOutcome& outcome)`"
    "specdec: draft(after, limit, ctx) must return specdec::Draft"
    "specdec: an Acceptor needs `AcceptResult accept(const Tree& tree, Rows target_logits, const StepContext& ctx)`"
    "specdec: a TreeBuilder needs `Tree build(P& proposer, int root_token, const StepContext& ctx)`"
    "specdec: a LanguageModel needs `void truncate(int n)`"
    "specdec: accept(tree, target_logits, ctx) must return specdec::AcceptResult"
    "specdec: TargetInitialisedTree needs a drafter that scores nodes")
set(missing "")
foreach(message IN LISTS expected)
    string(FIND "${out}" "${message}" at)
    if(at EQUAL -1)
        string(APPEND missing "\n  ${message}")
    endif()
endforeach()
foreach(verdict "no operand of the disjunction" "no matching function")
    string(FIND "${out}" "${verdict}" at)
    if(NOT at EQUAL -1)
        string(APPEND missing "\n  (and the compiler said '${verdict}', the unreadable answer these checks replace)")
    endif()
endforeach()
if(missing)
    message(FATAL_ERROR "the compiler's errors lack:${missing}\nIts output:\n${out}")
endif()
string(REGEX MATCHALL "error: " errors "${out}")
list(LENGTH errors n)
list(LENGTH expected n_expected)
message(STATUS "${n_expected} malformed compositions, ${n} errors, each naming what is missing")
