// Generated: the one translation unit that compiles specdec's bodies.
#define SPECDEC_IMPLEMENTATION
#include "specdec.hpp"
