# Empty compiler generated dependencies file for tests_methods_glide_cape.
# This may be replaced when dependencies are built.
