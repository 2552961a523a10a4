file(REMOVE_RECURSE
  "libspecdec_compiled.a"
)
