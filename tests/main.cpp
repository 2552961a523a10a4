// The Catch2 entry point, shared by every test file of the suite.
#define CATCH_CONFIG_MAIN
#include "catch.hpp"
