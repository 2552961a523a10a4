// specdec/detail/core/compiled.hpp — where the heavy bodies are compiled: in every translation unit,
// or once per program.
// SPDX-License-Identifier: MIT
//
// Header-only use (the default) compiles the CPU model's forward pass and the file readers in every
// translation unit that calls them: most of a small program's compile time is their code generation.
// A program may instead compile them once, stb-style:
// - one translation unit defines SPECDEC_IMPLEMENTATION before including specdec.hpp (CMake's
//   `specdec::compiled` target is that unit, built once as a static library);
// - every other unit defines SPECDEC_COMPILED (linking `specdec::compiled` defines it): it sees the
//   declarations only, and the linker takes the bodies from the library.
// Templates (policies, the loop) stay in the headers either way.
#pragma once

#if defined(SPECDEC_IMPLEMENTATION)
#define SPECDEC_BODIES 1
#define SPECDEC_INLINE  // one strong definition, in this unit
#elif defined(SPECDEC_COMPILED)
#define SPECDEC_BODIES 0
#define SPECDEC_INLINE  // declarations of the library's definitions
#else
#define SPECDEC_BODIES 1
#define SPECDEC_INLINE inline
#endif
