# scale_report on two small benchmark results (tests/data/scale_report: a 14M run and a 1B-cost run):
# the table carries each run's speedup and the cost-scaled label, the chart draws a line per method
# (the lossy one dashed) over both costs, and a folder without table.json is refused by name.
# Run by ctest: cmake -DSCALE_REPORT=... -DROOT=... -DWORK=... -P check_scale_report.cmake
file(REMOVE_RECURSE "${WORK}")
set(data "${ROOT}/tests/data/scale_report")
execute_process(COMMAND "${SCALE_REPORT}" "${WORK}" "${data}/1b" "${data}/14m" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "scale_report failed (${rc}): ${out}${err}")
endif()
file(READ "${WORK}/scale.md" md)
file(READ "${WORK}/scale.svg" svg)
foreach(want "| SD small g4 | 0 | 2.14 | 3.9 | 1.48× (2.14) | 2.21× (2.14) |"
             "1.14B: cost-scaled (widened demo target: same outputs, 1B cost)"
             "| TI small 2-4-3-1-1 | 1 | 3.58 | 74.9 | 0.41× (3.58) | 0.51× (3.61) |")
  string(FIND "${md}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "scale.md lacks '${want}':\n${md}")
  endif()
endforeach()
foreach(want "<svg" "simulation device" "1.14B (cost)" "TI small 2-4-3-1-1 (lossy at T &gt; 0, dashed)" "stroke-dasharray=\"6 3\"")
  string(FIND "${svg}" "${want}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "scale.svg lacks '${want}'")
  endif()
endforeach()
string(REGEX MATCHALL "<polyline" lines "${svg}")
list(LENGTH lines n)
if(NOT n EQUAL 4)  # 2 methods x 2 temperatures
  message(FATAL_ERROR "scale.svg draws ${n} lines, expected 4")
endif()
execute_process(COMMAND "${SCALE_REPORT}" "${WORK}/again" "${data}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(FIND "${err}" "table.json" at)
if(rc EQUAL 0 OR at EQUAL -1)
  message(FATAL_ERROR "a folder without table.json: exit ${rc}, message '${err}'")
endif()
