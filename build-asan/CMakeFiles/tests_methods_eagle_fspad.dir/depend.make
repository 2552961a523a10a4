# Empty dependencies file for tests_methods_eagle_fspad.
# This may be replaced when dependencies are built.
