# Empty compiler generated dependencies file for tests_methods_cs_drafting.
# This may be replaced when dependencies are built.
