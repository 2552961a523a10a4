# tests/cli/check_lesson_args.cmake — the lessons' optional arguments (examples/05..10: a prompt count, a
# thread count, a mode) are refused when malformed, before anything is loaded.
# Run by ctest: cmake -DBIN_DIR=<folder of the built examples> -DWORK=<an empty scratch dir> -P check_lesson_args.cmake.
# It runs in WORK, where there are no models: an argument checked late would fail on a missing file instead.

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

include(${CMAKE_CURRENT_LIST_DIR}/expect_refusal.cmake)
function(expect_refusal regex program)
    expect_refusal_of(example "${regex}" ${BIN_DIR}/${program} ${ARGN})
endfunction()

# std::atoi reads these as 0 or negative prompts: the lesson would run none and print "tau -nan", exit 0.
expect_refusal("argument 1 \\(n_prompts\\) is 'abc': expected a whole number in \\[1, 100000\\]" 08_prompt_lookup abc)
expect_refusal("argument 1 \\(n_prompts\\) is '0'" 08_prompt_lookup 0)
expect_refusal("argument 1 \\(n_prompts\\) is '-2'" 06_cs_drafting -2)
expect_refusal("argument 1 \\(n_prompts\\) is '3\\.5'" 07_glide_cape 3.5)
expect_refusal("argument 1 \\(n_prompts\\) is 'x'" 09_edd_pct x)
expect_refusal("argument 1 \\(n_prompts\\) is '1e3'" 10_eagle_fspad 1e3)
expect_refusal("argument 2 \\(threads\\) is '-1': expected a whole number in \\[0, 1024\\]" 05_demo 8 -1)
# A mode that is not one of the lesson's is not read as the default.
expect_refusal("argument 3 \\(weights\\) is 'f16': expected bf16 or f32" 05_demo 8 1 f16)
expect_refusal("argument 2 \\(tree budget\\) is 'quarter': expected full or half" 10_eagle_fspad 1 quarter)
