# Empty dependencies file for tests_methods_mcsd.
# This may be replaced when dependencies are built.
