# Empty dependencies file for tests_bench.
# This may be replaced when dependencies are built.
