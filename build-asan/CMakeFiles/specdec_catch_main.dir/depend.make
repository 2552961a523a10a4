# Empty dependencies file for specdec_catch_main.
# This may be replaced when dependencies are built.
