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

function(specdec_course_checker target checker file)
    add_executable(${target} ${specdec_course}/${checker})
    # Relative to this folder (an include directory): the command line holds no absolute path, so ccache
    # reuses the object from a checkout in another folder (scripts/test.sh).
    target_include_directories(${target} PRIVATE ${specdec_course})
    target_compile_definitions(${target} PRIVATE "COURSE_FILE=\"${file}\"")
    specdec_program(${target})
    target_link_libraries(${target} PRIVATE specdec::compiled)
    # -Og: a checker runs tiny models for under a second; check_ex6 compiled in 19 s at -O3, 14 s at -O1
    # and 9.5 s at -Og (GCC 12).
    target_compile_options(${target} PRIVATE -Og)
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
        specdec_course_checker(course_${stem} ${checker} planted/${planted_file})
        specdec_course_expect_failure("course/${ex} ${title}/planted wrong, ${wrong}, fails" course_${stem} "${regex}")
    endforeach()
endfunction()

specdec_course(ex1 "chain sampling" check_ex1.cpp ex1_chain_sampling.hpp
    "ex1_always_accept.hpp|always accept|FAIL sampling"
    "ex1_no_residual.hpp|no residual|FAIL sampling"
    "ex1_target_as_q.hpp|target's law as q|FAIL sampling"
    "ex1_rng_reuse.hpp|one coin for accept and residual|FAIL same coordinates")

specdec_course(ex2 "multi-draft sampling" check_ex2.cpp ex2_multi_draft.hpp
    "ex2_no_renormalise.hpp|q not renormalised without replacement|FAIL without replacement: sampling"
    "ex2_no_residual_update.hpp|no residual update between siblings|FAIL with replacement: sampling")

specdec_course(ex3 "top-k tree" check_ex3.cpp ex3_topk_tree.hpp
    "ex3_parent_off_by_one.hpp|parent off by one|FAIL .*hangs from node"
    "ex3_not_top_k.hpp|children not the top-k|FAIL .*expected token")

specdec_course(ex4 "n-gram drafter" check_ex4.cpp ex4_ngram_drafter.hpp
    "ex4_off_by_one_kv.hpp|observe commits the root twice (off-by-one KV)|FAIL .*observe\\(\\) must append"
    "ex4_match_position.hpp|drafts the matched token itself|FAIL .*prompt lookup drafts"
    "ex4_wrong_law.hpp|a wrong recorded law|FAIL sampling")

specdec_course(ex5 "cascade level" check_ex5.cpp ex5_cascade_level.hpp
    "ex5_accept_unchecked.hpp|Max-Gram's tokens kept without the reviewer's argmax|FAIL .*library's cascade level drafts"
    "ex5_row_off_by_one.hpp|the reviewer's row read one position late|FAIL .*library's cascade level drafts"
    "ex5_wrong_law.hpp|chosen tokens recorded as sampled|FAIL sampling")

specdec_course(ex6 "forward KL distillation" check_ex6.cpp ex6_forward_kl.hpp
    "ex6_reverse_kl.hpp|the reverse KL, the draft law first, as the loss|FAIL the loss"
    "ex6_sign_flipped.hpp|the gradient's sign flipped|FAIL the gradient added to dlogits"
    "ex6_no_softmax_jacobian.hpp|the gradient w.r.t. q, the softmax Jacobian missing|FAIL the gradient added to dlogits")

specdec_course(ex7 "speedup model" check_ex7.cpp ex7_speedup_model.hpp
    "ex7_no_bonus.hpp|no bonus token|FAIL expected_tokens"
    "ex7_free_verification.hpp|verification taken as free|FAIL predicted_speedup")

specdec_course(ex8 "typical acceptance" check_ex8.cpp ex8_typical_acceptance.hpp
    "ex8_greedy_measure.hpp|the loss measured at temperature 0|FAIL your measurement samples at temperature 1"
    "ex8_wrong_threshold.hpp|max(epsilon, ...) for min(epsilon, ...)|FAIL the rule")
