// tests/fuzz/fuzz_bench_config.cpp — arbitrary bytes as the benchmark's methods.json:
// bench::parse_methods (examples/bench/methods.hpp, what specdec_bench's load_methods calls), then the
// promises its limits make: draft nodes within kMaxTreeNodes, one autoregressive baseline, unique
// names. Run through scripts/fuzz.sh.
// SPDX-License-Identifier: MIT
#include <optional>
#include <set>

#include "examples/bench/methods.hpp"
#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace specdec::bench;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    std::optional<std::vector<MethodSpec>> methods;
    try {
        methods = parse_methods(text, "methods.json");
    } catch (const specdec::error&) {
        return 0;
    }
    FUZZ_CHECK(!methods->empty(), "at least one method");
    std::set<std::string> names;
    int baselines = 0;
    for (const MethodSpec& m : *methods) {
        FUZZ_CHECK(!m.name.empty() && names.insert(m.name).second, "names are non-empty and unique");
        baselines += m.kind == MethodKind::kAutoregressive;
        // specdec_bench sizes the models' scratch space as max(256, 2 * widest + 8) from this.
        const long nodes = draft_nodes(m);
        FUZZ_CHECK(nodes >= 0 && nodes <= kMaxTreeNodes, "draft_nodes within kMaxTreeNodes");
        (void)method_name(m.kind);
        (void)draw_name(m.draw);
    }
    FUZZ_CHECK(baselines == 1, "exactly one autoregressive baseline");
    return 0;
}
