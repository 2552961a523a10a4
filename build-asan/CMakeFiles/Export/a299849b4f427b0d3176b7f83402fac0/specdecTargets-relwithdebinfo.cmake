#----------------------------------------------------------------
# Generated CMake target import file for configuration "RelWithDebInfo".
#----------------------------------------------------------------

# Commands may need to know the format version.
set(CMAKE_IMPORT_FILE_VERSION 1)

# Import target "specdec::compiled" for configuration "RelWithDebInfo"
set_property(TARGET specdec::compiled APPEND PROPERTY IMPORTED_CONFIGURATIONS RELWITHDEBINFO)
set_target_properties(specdec::compiled PROPERTIES
  IMPORTED_LINK_INTERFACE_LANGUAGES_RELWITHDEBINFO "CXX"
  IMPORTED_LOCATION_RELWITHDEBINFO "${_IMPORT_PREFIX}/lib/libspecdec_compiled.a"
  )

list(APPEND _cmake_import_check_targets specdec::compiled )
list(APPEND _cmake_import_check_files_for_specdec::compiled "${_IMPORT_PREFIX}/lib/libspecdec_compiled.a" )

# Commands beyond this point should not need to know the version.
set(CMAKE_IMPORT_FILE_VERSION)
