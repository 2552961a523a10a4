file(REMOVE_RECURSE
  "CMakeFiles/specdec_catch_main.dir/tests/main.cpp.o"
  "CMakeFiles/specdec_catch_main.dir/tests/main.cpp.o.d"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/specdec_catch_main.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
