// A path that names a FIFO (or a device) instead of a file: every reader refuses it at once, naming the
// path, where opening a FIFO without a writer would block forever.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "catch.hpp"
#include "helpers.hpp"

namespace test_not_regular_files {  // a unity build compiles several test files as one

using namespace specdec;
namespace fs = std::filesystem;

TEST_CASE("every reader refuses a FIFO at once, naming it", "[io][errors]") {
    const fs::path dir = fs::temp_directory_path() / ("specdec_fifo_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    const auto fifo = [&](const std::string& name) {
        const fs::path p = dir / name;
        REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
        return p;
    };
    const std::string said = "is not a regular file (a FIFO, socket or device)";
    CHECK_THROWS_WITH(load_config(fifo("config.json")), Catch::Contains("config.json: " + said));
    CHECK_THROWS_WITH(SafetensorsFile::open(fifo("model.safetensors")), Catch::Contains("model.safetensors") && Catch::Contains(said));
    CHECK_THROWS_WITH(read_gguf_header(fifo("m.gguf")), Catch::Contains("m.gguf") && Catch::Contains(said));
    CHECK_THROWS_WITH(Tokenizer::load(fifo("tokenizer.json")), Catch::Contains("tokenizer.json: " + said));
    CHECK_THROWS_WITH(load_llama2c(fifo("m.bin")), Catch::Contains("m.bin") && Catch::Contains(said));
    CHECK_THROWS_WITH(load_sentencepiece_model(fifo("tokenizer.model")), Catch::Contains("tokenizer.model: " + said));
    // A device is no file either.
    CHECK_THROWS_WITH(SafetensorsFile::open("/dev/null"), Catch::Contains(said));
    fs::remove_all(dir);
}

}  // namespace test_not_regular_files
