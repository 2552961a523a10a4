# Empty dependencies file for tests_core.
# This may be replaced when dependencies are built.
