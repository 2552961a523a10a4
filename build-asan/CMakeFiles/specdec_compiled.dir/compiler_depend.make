# Empty compiler generated dependencies file for specdec_compiled.
# This may be replaced when dependencies are built.
