# examples/course/course.cmake — the course's checkers as ctest entries, label `course` (README.md here).
# Each exercise's checker is one program compiled from a student's file (COURSE_FILE). Two modes:
# - suite (default when solutions/ is present): the checker is built against the reference solution
#   (must pass), the starter (must fail, saying "not implemented") and each planted wrong solution (must
#   fail with the message named below): the suite proves every checker has power;
# - grade (SPECDEC_COURSE_GRADE=ON, the default in a handout without solutions/): one entry per exercise,
#   the checker against the student's file, passing when the file is right.
set(specdec_course ${CMAKE_CURRENT_LIST_DIR})
if(EXISTS ${specdec_course}/solutions)
    set(specdec_course_grade_default OFF)
else()
    set(specdec_course_grade_default ON)
endif()
option(SPECDEC_COURSE_GRADE "Grade the course exercises (examples/course/ex*.hpp) instead of testing the checkers"
    ${specdec_course_grade_default})

# The flags of every checker, and of course_pch below: the same for all, so they share one precompiled
# header.
function(specdec_course_flags target)
    target_include_directories(${target} PRIVATE ${specdec_course})
    specdec_program(${target})
    target_link_libraries(${target} PRIVATE specdec::compiled)
    # -Og: a checker runs tiny models for under a second; check_ex6 compiled in 19 s at -O3, 14 s at -O1
    # and 9.5 s at -Og (GCC 12). Through a precompiled header GCC 12 no longer treats its own intrinsics
    # headers (avx512fintrin.h) as system headers and reports their deliberate `__Y = __Y` as
    # uninitialized: those two warnings are off here.
    target_compile_options(${target} PRIVATE -Og -Wno-uninitialized -Wno-maybe-uninitialized)
endfunction()

# The headers every checker reads (the library, grading.hpp, the trainer's), precompiled once: reading them
# was 40% of a checker's compile (10.1 s without, 6.1 s with). A target of its own, so that building one
# exercise's checker never needs another's student file to compile.
file(GENERATE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/course/course_pch.cpp
    CONTENT "// Generated: the unit that builds the course checkers' precompiled header (course.cmake).\n")
add_library(course_pch OBJECT ${CMAKE_CURRENT_BINARY_DIR}/course/course_pch.cpp)
specdec_course_flags(course_pch)
target_precompile_headers(course_pch PRIVATE ${specdec_course}/grading.hpp
    ${PROJECT_SOURCE_DIR}/detail/train/optimizer.hpp ${PROJECT_SOURCE_DIR}/detail/train/trainable_llama.hpp)

function(specdec_course_checker target checker file)
    # A two-line source names the student's file (relative to this folder) and includes the checker: a
    # -D per checker would forbid the shared precompiled header.
    set(src ${CMAKE_CURRENT_BINARY_DIR}/course/${target}.cpp)
    file(GENERATE OUTPUT ${src} CONTENT "#define COURSE_FILE \"${file}\"\n#include \"${checker}\"\n")
    add_executable(${target} ${src})
    specdec_course_flags(${target})
    target_precompile_headers(${target} REUSE_FROM course_pch)
endfunction()

# A planted wrong solution is the reference solution with a few lines changed, kept as the change alone:
# planted/NAME.mutation holds why (the "#" lines) and hunks in the form of a merge conflict,
#     <<<<<<< solutions/FILE
#     the lines as the solution has them
#     =======
#     the lines as planted
#     >>>>>>> planted
# Applied here into the build folder. The first part of each hunk must occur exactly once in the
# solution, so a solution edited under a mutation stops the configure instead of planting another bug.
function(specdec_course_mutant mutation out_var)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${mutation})
    file(READ ${mutation} rest)
    get_filename_component(stem ${mutation} NAME_WE)
    set(solution "")
    while(TRUE)
        string(FIND "${rest}" "<<<<<<< " at)
        if(at EQUAL -1)
            break()
        endif()
        string(SUBSTRING "${rest}" ${at} -1 rest)
        string(FIND "${rest}" "\n" eol)
        math(EXPR length "${eol} - 8")
        string(SUBSTRING "${rest}" 8 ${length} file)
        string(SUBSTRING "${rest}" ${eol} -1 rest)  # "\nthe lines as they are\n=======\nas planted\n>>>>>>> planted"
        string(FIND "${rest}" "\n=======\n" sep)
        string(FIND "${rest}" "\n>>>>>>> planted" end)
        if(sep EQUAL -1 OR end LESS sep)
            message(FATAL_ERROR "${mutation}: a hunk for ${file} without its \"=======\" and \">>>>>>> planted\" lines")
        endif()
        if(solution STREQUAL "")
            set(solution ${file})
            set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${specdec_course}/${solution})
            file(READ ${specdec_course}/${solution} source)
        elseif(NOT file STREQUAL solution)
            message(FATAL_ERROR "${mutation}: hunks for two files, ${solution} and ${file}")
        endif()
        string(SUBSTRING "${rest}" 1 ${sep} old)  # with its last newline
        math(EXPR new_at "${sep} + 9")
        math(EXPR length "${end} - ${sep} - 8")  # 0 when the lines are removed
        string(SUBSTRING "${rest}" ${new_at} ${length} new)
        string(FIND "${source}" "${old}" first)
        string(FIND "${source}" "${old}" last REVERSE)
        if(first EQUAL -1 OR NOT first EQUAL last)
            message(FATAL_ERROR "${mutation}: these lines must occur exactly once in ${solution}; has the "
                "solution changed under the planted bug?\n${old}")
        endif()
        string(REPLACE "${old}" "${new}" source "${source}")
        math(EXPR end "${end} + 16")
        string(SUBSTRING "${rest}" ${end} -1 rest)
    endwhile()
    if(solution STREQUAL "")
        message(FATAL_ERROR "${mutation}: no \"<<<<<<< solutions/FILE\" hunk")
    endif()
    set(out ${CMAKE_CURRENT_BINARY_DIR}/course/planted/${stem}.hpp)
    set(source "// Generated by course.cmake: ${solution} with planted/${stem}.mutation applied.\n${source}")
    set(previous "")
    if(EXISTS ${out})
        file(READ ${out} previous)
    endif()
    if(NOT source STREQUAL previous)  # rewritten only when it changes, so checkers rebuild only then
        file(WRITE ${out} "${source}")
    endif()
    set(${out_var} ${out} PARENT_SCOPE)
endfunction()

function(specdec_course_expect_failure name program regex)
    add_test(NAME "${name}" COMMAND ${CMAKE_COMMAND} -DPROGRAM=$<TARGET_FILE:${program}> "-DREGEX=${regex}"
        -P ${specdec_course}/expect_failure.cmake)
    set_tests_properties("${name}" PROPERTIES LABELS course)
endfunction()

# specdec_course(ex1 "chain sampling" check_ex1.cpp ex1_chain_sampling.hpp
#     "planted file|what it gets wrong|message regex" ...)
function(specdec_course ex title checker file)
    specdec_course_checker(course_${ex} ${checker} ${file})
    if(SPECDEC_COURSE_GRADE)
        add_test(NAME "course/${ex} ${title}/your file passes" COMMAND course_${ex})
        set_tests_properties("course/${ex} ${title}/your file passes" PROPERTIES LABELS course)
        return()
    endif()
    specdec_course_checker(course_${ex}_solution ${checker} solutions/${file})
    add_test(NAME "course/${ex} ${title}/the reference solution passes" COMMAND course_${ex}_solution)
    set_tests_properties("course/${ex} ${title}/the reference solution passes" PROPERTIES LABELS course)
    specdec_course_expect_failure("course/${ex} ${title}/the starter fails, not implemented" course_${ex}
        "not implemented")
    foreach(planted ${ARGN})
        string(REPLACE "|" ";" parts "${planted}")
        list(GET parts 0 planted_file)
        list(GET parts 1 wrong)
        list(GET parts 2 regex)
        get_filename_component(stem ${planted_file} NAME_WE)
        specdec_course_mutant(${specdec_course}/planted/${planted_file} planted_source)
        specdec_course_checker(course_${stem} ${checker} ${planted_source})
        specdec_course_expect_failure("course/${ex} ${title}/planted wrong, ${wrong}, fails" course_${stem} "${regex}")
    endforeach()
endfunction()

specdec_course(ex1 "chain sampling" check_ex1.cpp ex1_chain_sampling.hpp
    "ex1_always_accept.mutation|always accept|FAIL sampling"
    "ex1_no_residual.mutation|no residual|FAIL sampling"
    "ex1_target_as_q.mutation|target's law as q|FAIL sampling"
    "ex1_rng_reuse.mutation|one coin for accept and residual|FAIL same coordinates"
    "ex1_top_p_ignored.mutation|a hand-written law that forgets top-p|FAIL sampling with top-k and top-p")

specdec_course(ex2 "multi-draft sampling" check_ex2.cpp ex2_multi_draft.hpp
    "ex2_no_renormalise.mutation|q not renormalised without replacement|FAIL without replacement: sampling"
    "ex2_no_residual_update.mutation|no residual update between siblings|FAIL with replacement: sampling"
    "ex2_top_p_ignored.mutation|a hand-written law that forgets top-p|FAIL with replacement: sampling with top-k and top-p"
    "ex2_order_swapped.mutation|q updated before p's residual without replacement|hint: after each rejected sibling x, in this order")

specdec_course(ex3 "top-k tree" check_ex3.cpp ex3_topk_tree.hpp
    "ex3_parent_off_by_one.mutation|parent off by one|FAIL .*hangs from node"
    "ex3_not_top_k.mutation|children not the top-k|FAIL .*expected token"
    "ex3_forward_per_node.mutation|one draft forward per node instead of per depth|FAIL one draft forward per depth"
    "ex3_records_logit.mutation|the logit recorded as draft_prob|FAIL every child is recorded as chosen.*records draft_prob"
    "ex3_topk_recorded_as_sampled.mutation|top-k children recorded as sampled with a law|FAIL every child is recorded as chosen.*has a law recorded")

specdec_course(ex4 "n-gram drafter" check_ex4.cpp ex4_ngram_drafter.hpp
    "ex4_off_by_one_kv.mutation|observe commits the root twice (off-by-one KV)|FAIL .*observe\\(\\) must append"
    "ex4_match_position.mutation|drafts the matched token itself|FAIL .*prompt lookup drafts"
    "ex4_wrong_law.mutation|a wrong recorded law|FAIL sampling"
    "ex4_max_draft_ignored.mutation|max_draft ignored|FAIL .*max_draft 3.*prompt lookup drafts")

specdec_course(ex5 "cascade level" check_ex5.cpp ex5_cascade_level.hpp
    "ex5_accept_unchecked.mutation|Max-Gram's tokens kept without the reviewer's argmax|FAIL .*library's cascade level drafts"
    "ex5_row_off_by_one.mutation|the reviewer's row read one position late|FAIL .*library's cascade level drafts"
    "ex5_wrong_law.mutation|chosen tokens recorded as sampled|FAIL sampling"
    "ex5_ask_once.mutation|Max-Gram asked only once|FAIL .*2 tokens per call.*library's cascade level drafts"
    "ex5_room_ignored.mutation|the room ignored|FAIL with the room binding")

specdec_course(ex6 "forward KL distillation" check_ex6.cpp ex6_forward_kl.hpp
    "ex6_reverse_kl.mutation|the reverse KL, the draft law first, as the loss|FAIL the loss"
    "ex6_sign_flipped.mutation|the gradient's sign flipped|FAIL the gradient added to dlogits"
    "ex6_no_softmax_jacobian.mutation|the gradient w.r.t. q, the softmax Jacobian missing|FAIL the gradient added to dlogits"
    "ex6_no_max_subtraction.mutation|sum of exp without the maximum subtracted|FAIL large logits"
    "ex6_log_of_softmax.mutation|log q as the log of the float softmax|FAIL large logits")

specdec_course(ex7 "speedup model" check_ex7.cpp ex7_speedup_model.hpp
    "ex7_no_bonus.mutation|no bonus token|FAIL expected_tokens"
    "ex7_free_verification.mutation|verification taken as free|FAIL predicted_speedup"
    "ex7_wide_alpha1_guard.mutation|the alpha = 1 limit returned for alpha above 0.99|FAIL expected_tokens.*alpha 0.995")

specdec_course(ex8 "typical acceptance" check_ex8.cpp ex8_typical_acceptance.hpp
    "ex8_greedy_measure.mutation|the loss measured at temperature 0|FAIL your measurement samples at temperature 1"
    "ex8_wrong_threshold.mutation|max(epsilon, ...) for min(epsilon, ...)|FAIL the rule"
    "ex8_argmax_bonus.mutation|the next token as p's argmax|FAIL the next token is drawn from p"
    "ex8_residual_bonus.mutation|the next token from the residual norm(max(0, p - q))|FAIL the next token is drawn from p"
    "ex8_unprocessed_p.mutation|softmax(logits) for the processed p|FAIL the rule"
    "ex8_measures_other_acceptor.mutation|the loss measured on another acceptor|FAIL it measures")
