# Empty compiler generated dependencies file for tests_policies.
# This may be replaced when dependencies are built.
