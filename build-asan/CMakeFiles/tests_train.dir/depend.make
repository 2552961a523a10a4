# Empty dependencies file for tests_train.
# This may be replaced when dependencies are built.
