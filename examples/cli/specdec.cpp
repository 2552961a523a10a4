// specdec — the command: generate text with speculative decoding, convert and inspect model files.
//
//   specdec generate --target PATH [--draft PATH] [--method ar|sd|tree|cs|glide|edd|pct|eagle2|lookup|text]
//                    --prompt TEXT
//   specdec convert IN OUT [--dtype f32|bf16|f16|q8_0] [--tokenizer PATH] [--force]
//   specdec inspect PATH [--tokenizer PATH]
//
// PATH is an HF folder (config.json, model.safetensors, tokenizer.json), a llama2.c .bin (with its
// tokenizer.bin) or a .gguf file (model_files.hpp says which formats this build reads). `specdec
// COMMAND --help` lists each command's options. Exit status: 0 done, 1 a file or value the library
// refused (printed as "specdec: <message>"), 2 a malformed command line.
//
// Built and installed beside the header: `cmake --build build --target specdec_command` makes
// build/specdec; `cmake --install build --prefix DIR` puts it in DIR/bin.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "args.hpp"
#include "convert.hpp"
#include "generate.hpp"
#include "inspect.hpp"

using namespace specdec::cli;

namespace {

// CMakeLists.txt's project(VERSION): the build passes no definition, so it is kept equal here, and the
// cli test `messages` compares the two.
const char* const kVersion = "0.1.0";

const char* kUsage =
    "usage: specdec COMMAND [options]\n"
    "\n"
    "Speculative decoding of Llama-style models, and their files.\n"
    "\n"
    "commands:\n"
    "  generate   decode a prompt with a target (and a drafter), streaming the text; tau, tok/s, speedup\n"
    "  convert    convert a model between an HF folder, a llama2.c .bin and a .gguf file\n"
    "  inspect    print a model's config, tensors, tokenizer and size\n"
    "\n"
    "`specdec COMMAND --help` (or `specdec help COMMAND`) describes each command; `specdec --version` prints\n"
    "the version. PATH is an HF folder, a llama2.c .bin or a .gguf file.\n";

struct Command {
    const char* name;
    const std::vector<Flag>& (*flags)();
    std::string (*usage)();
    int (*run)(const Args&);
};

const Command kCommands[] = {
    {"generate", generate_flags, generate_usage, run_generate},
    {"convert", convert_flags, convert_usage, run_convert},
    {"inspect", inspect_flags, inspect_usage, run_inspect},
};

int run(int argc, char** argv) {
    if (argc < 2) {
        std::fputs(kUsage, stderr);
        return 2;
    }
    std::string_view name = argv[1];
    if (name == "--version") {
        std::printf("specdec %s\n", kVersion);
        return 0;
    }
    if (name.substr(0, 7) == "--help=" || name.substr(0, 10) == "--version=") {
        std::fprintf(stderr, "specdec: option '%.*s' takes no value\n", static_cast<int>(name.find('=')), argv[1]);
        return 2;
    }
    if (name == "--help" || name == "-h" || (name == "help" && argc == 2)) {
        std::fputs(kUsage, stdout);
        return 0;
    }
    const bool help_of = name == "help";  // `specdec help generate` is `specdec generate --help`
    if (help_of) {
        if (argc > 3) {
            std::fprintf(stderr, "specdec help: expected one COMMAND, got %d\n", argc - 2);
            return 2;
        }
        name = argv[2];
    }
    for (const Command& c : kCommands) {
        if (name != c.name) continue;
        if (help_of) {
            std::fputs(c.usage().c_str(), stdout);
            return 0;
        }
        try {
            const Args args(argc, argv, 2, c.flags());
            if (args.help()) {
                std::fputs(c.usage().c_str(), stdout);
                return 0;
            }
            return c.run(args);
        } catch (const UsageError& e) {
            std::fprintf(stderr, "specdec %s: %s\n(`specdec %s --help` lists the options)\n", c.name, e.what(), c.name);
            return 2;
        }
    }
    std::vector<std::string> names;
    for (const Command& c : kCommands) names.push_back(c.name);
    const std::string pick = closest_name(names, std::string(name));
    const std::string shown(name);
    if (!pick.empty()) {
        std::fprintf(stderr, "specdec: unknown command '%s' (did you mean '%s'?)\n", shown.c_str(), pick.c_str());
        return 2;
    }
    std::fprintf(stderr, "specdec: unknown command '%s'\n\n%s", shown.c_str(), kUsage);
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        const int rc = run(argc, argv);
        // Output that could not be written (a full disk, a closed pipe) is a failure, not a success.
        if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
            std::fprintf(stderr, "specdec: writing the output failed (stdout)\n");
            return 1;
        }
        return rc;
    } catch (const specdec::error& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "specdec: %s\n", e.what());
    } catch (const std::bad_alloc&) {
        std::fflush(stdout);
        std::fprintf(stderr, "specdec: out of memory\n");
    } catch (const std::filesystem::filesystem_error& e) {  // a folder that cannot be made, a file not written
        std::fflush(stdout);
        std::fprintf(stderr, "specdec: [specdec.cli] %s\n", e.what());
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "specdec: %s\n", e.what());
    }
    return 1;
}
