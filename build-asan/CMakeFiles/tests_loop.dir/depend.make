# Empty dependencies file for tests_loop.
# This may be replaced when dependencies are built.
