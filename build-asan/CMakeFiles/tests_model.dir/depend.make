# Empty dependencies file for tests_model.
# This may be replaced when dependencies are built.
