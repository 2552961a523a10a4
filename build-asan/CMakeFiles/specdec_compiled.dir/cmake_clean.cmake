file(REMOVE_RECURSE
  "CMakeFiles/specdec_compiled.dir/specdec_implementation.cpp.o"
  "CMakeFiles/specdec_compiled.dir/specdec_implementation.cpp.o.d"
  "libspecdec_compiled.a"
  "libspecdec_compiled.pdb"
)

# Per-language clean rules from dependency scanning.
foreach(lang CXX)
  include(CMakeFiles/specdec_compiled.dir/cmake_clean_${lang}.cmake OPTIONAL)
endforeach()
