# tests/cli/check_train_demo.cmake — train_demo refuses a malformed flag before it reads or trains anything.
# Run by ctest: cmake -DTRAIN_DEMO=<the built program> -DWORK=<an empty scratch dir> -P check_train_demo.cmake.
# It runs in WORK, where there is no models/ and no build/data: a flag checked late would fail there on a
# missing file instead, and the message checks below would catch it. No case can start a training run.

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

include(${CMAKE_CURRENT_LIST_DIR}/expect_refusal.cmake)
function(expect_refusal regex)
    expect_refusal_of(train_demo "${regex}" ${TRAIN_DEMO} ${ARGN})
endfunction()

# A count is a whole number: read as a double and cast, 0.5 gives 0 and 1e10 INT_MIN, both "no override",
# which would start the whole run of train.json.
expect_refusal("--steps 0\\.5: expected a whole number in \\[1, 2147483647\\]" model small --steps 0.5)
expect_refusal("--steps 1e10: expected a whole number" model small --steps 1e10)
expect_refusal("--steps 99999999999: expected a whole number" model small --steps 99999999999)
expect_refusal("--steps -3: expected a whole number" model small --steps -3)
expect_refusal("--checkpoint-every 2\\.5: expected a whole number" model small --checkpoint-every 2.5)
expect_refusal("--batch 0: expected a whole number" eagle eagle --batch 0)
expect_refusal("--max-seconds nan: expected a positive number of seconds" eagle eagle --max-seconds nan)
expect_refusal("--max-seconds inf: expected a positive number of seconds" eagle eagle --max-seconds inf)
expect_refusal("--device 'tpu' is neither cpu nor cuda" model small --device tpu)
# Well-formed flags, no token files: the message says which command makes them.
expect_refusal("no token files in build/data \\(train\\.bin, test\\.bin\\): run `train_demo tokenizer` first"
    model small --steps 3)
