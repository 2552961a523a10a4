# Empty compiler generated dependencies file for tests_methods_edd_pct.
# This may be replaced when dependencies are built.
