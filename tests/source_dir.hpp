// The repository's folder, for tests that read shipped files (models/, data/, tests/data/). Defined in a
// file the build generates (CMakeLists.txt), not as a compile definition: the test sources then compile
// the same in every checkout, so ccache reuses them across clones in other folders (scripts/test.sh).
#pragma once

const char* specdec_source_dir();
#define SPECDEC_SOURCE_DIR specdec_source_dir()
