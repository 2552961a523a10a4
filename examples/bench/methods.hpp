// examples/bench/methods.hpp — the benchmark's method list (methods.json), parsed into plain structs.
// SPDX-License-Identifier: MIT
#pragma once

// methods.json is a JSON array; each entry names one configuration of one method:
//
//     [
//       {"name": "autoregressive", "method": "autoregressive"},
//       {"name": "SD small g4", "method": "chain", "drafter": "small", "gamma": 4},
//       {"name": "tree small 4-2-2-1", "method": "tree", "drafter": "small",
//        "k_config": [4, 2, 2, 1], "draw": "without_replacement"}
//     ]
//
// Strings end here: "method" becomes a MethodKind and "draw" a DrawPolicy, so the harness composes
// policies with a switch, never by comparing strings. Unknown fields are errors (a misspelt "gama"
// would otherwise silently run the default). An optional "about" string is kept for the report.

#include <algorithm>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "specdec.hpp"

namespace specdec::bench {

enum class MethodKind {
    kAutoregressive,  // the target alone, one token per forward: the baseline of speedup and losslessness
    kChain,           // vanilla SD (Leviathan et al. 2023; Chen et al. 2023): a chain of gamma drafts
    kTree,            // a k-ary token tree (SpecInfer; MCSD's k-config)
};

struct MethodSpec {
    std::string name;            // unique; labels the table, the charts and the CSV
    MethodKind kind = MethodKind::kAutoregressive;
    std::string drafter;         // model folder under --models (chain, tree); empty for autoregressive
    int gamma = 0;               // chain: drafts per step
    std::vector<int> k_config;   // tree: children per node at each depth, e.g. (4, 2, 2, 1)
    DrawPolicy draw = DrawPolicy::kTopK;  // tree: how siblings are drawn from the draft distribution q
    std::string about;           // free text for the report
};

/// Limits that keep a configuration inside the models' scratch space (ModelOptions::max_tree_nodes
/// is 256 by default; the root and a drafter's catch-up chain need room too).
inline constexpr int kMaxGamma = 64;
inline constexpr long kMaxTreeNodes = 240;

inline const char* method_name(MethodKind k) {
    switch (k) {
        case MethodKind::kAutoregressive: return "autoregressive";
        case MethodKind::kChain: return "chain";
        case MethodKind::kTree: return "tree";
    }
    return "?";
}

inline const char* draw_name(DrawPolicy d) {
    switch (d) {
        case DrawPolicy::kTopK: return "topk";
        case DrawPolicy::kSampleWithReplacement: return "with_replacement";
        case DrawPolicy::kSampleWithoutReplacement: return "without_replacement";
    }
    return "?";
}

/// Draft nodes of a k-ary tree: k0 + k0 k1 + k0 k1 k2 + ...
inline long tree_nodes(const std::vector<int>& k_config) {
    long total = 0, level = 1;
    for (int k : k_config) total += (level *= k);
    return total;
}

namespace parsing {

/// Everything one entry's messages need: "<file>: entry 2 ('tree small'), field 'draw': ..."
class EntryReader {
public:
    EntryReader(const json::Value& v, std::string origin, std::size_t index)
        : v_(v), origin_(std::move(origin)), index_(index) {}

    [[noreturn]] void fail(const std::string& field, const std::string& what) const {
        std::string where = origin_ + ": entry " + std::to_string(index_);
        if (!name_.empty()) where += " ('" + name_ + "')";
        if (!field.empty()) where += ", field '" + field + "'";
        specdec::detail::fail("bench", where + ": " + what);
    }

    const json::Value* find(const char* field) const { return v_.find(field); }

    const json::Value& need(const char* field, const char* for_what) const {
        const json::Value* f = v_.find(field);
        if (f == nullptr) fail(field, std::string("missing (") + for_what + ")");
        return *f;
    }

    std::string string(const char* field, const json::Value& f) const {
        if (!f.is_string()) fail(field, std::string("expected a string, got ") + json::kind_name(f.kind()));
        return f.as_string();
    }

    int integer(const char* field, const json::Value& f, int lo, int hi) const {
        if (!f.is_integer()) fail(field, std::string("expected an integer, got ") + json::kind_name(f.kind()));
        const std::int64_t n = f.as_int();
        if (n < lo || n > hi)
            fail(field, "value " + std::to_string(n) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return static_cast<int>(n);
    }

    void set_name(std::string name) { name_ = std::move(name); }

private:
    const json::Value& v_;
    std::string origin_;
    std::size_t index_;
    std::string name_;
};

inline MethodKind parse_kind(const EntryReader& r, const std::string& s) {
    if (s == "autoregressive") return MethodKind::kAutoregressive;
    if (s == "chain") return MethodKind::kChain;
    if (s == "tree") return MethodKind::kTree;
    r.fail("method", "unknown method \"" + s + "\"; known: autoregressive, chain, tree");
}

inline DrawPolicy parse_draw(const EntryReader& r, const std::string& s) {
    if (s == "topk") return DrawPolicy::kTopK;
    if (s == "with_replacement") return DrawPolicy::kSampleWithReplacement;
    if (s == "without_replacement") return DrawPolicy::kSampleWithoutReplacement;
    r.fail("draw", "unknown draw \"" + s + "\"; known: topk, with_replacement, without_replacement");
}

inline MethodSpec parse_entry(const json::Value& v, const std::string& origin, std::size_t index) {
    EntryReader r(v, origin, index);
    if (!v.is_object()) r.fail("", std::string("expected an object, got ") + json::kind_name(v.kind()));
    MethodSpec m;
    m.name = r.string("name", r.need("name", "every entry is named"));
    if (m.name.empty()) r.fail("name", "is empty");
    r.set_name(m.name);
    m.kind = parse_kind(r, r.string("method", r.need("method", "autoregressive, chain or tree")));

    // Which fields each method takes; anything else is a typo or a field of another method.
    std::set<std::string> allowed{"name", "method", "about"};
    switch (m.kind) {
        case MethodKind::kAutoregressive: break;
        case MethodKind::kChain: allowed.insert({"drafter", "gamma"}); break;
        case MethodKind::kTree: allowed.insert({"drafter", "k_config", "draw"}); break;
    }
    for (const json::Member& f : v.as_object())
        if (!allowed.count(f.key))
            r.fail(f.key, std::string("not a field of method '") + method_name(m.kind) + "'");
    if (const json::Value* a = r.find("about")) m.about = r.string("about", *a);

    if (m.kind == MethodKind::kAutoregressive) return m;
    m.drafter = r.string("drafter", r.need("drafter", "the drafter's model folder under --models, e.g. \"small\""));
    if (m.drafter.empty() || m.drafter.find('/') != std::string::npos || m.drafter == "." || m.drafter == "..")
        r.fail("drafter", "\"" + m.drafter + "\" is not a folder name under --models");
    if (m.kind == MethodKind::kChain) {
        m.gamma = r.integer("gamma", r.need("gamma", "drafts per step"), 1, kMaxGamma);
        return m;
    }
    const json::Value& k = r.need("k_config", "children per node at each depth, e.g. [4, 2, 2, 1]");
    if (!k.is_array() || k.as_array().empty())
        r.fail("k_config", "expected a non-empty array of integers >= 1, e.g. [4, 2, 2, 1]");
    for (std::size_t d = 0; d < k.as_array().size(); ++d) {
        const std::string field = "k_config[" + std::to_string(d) + "]";
        m.k_config.push_back(r.integer(field.c_str(), k.as_array()[d], 1, 64));
    }
    if (tree_nodes(m.k_config) > kMaxTreeNodes)
        r.fail("k_config", "the tree has " + std::to_string(tree_nodes(m.k_config)) + " draft nodes, more than " +
                               std::to_string(kMaxTreeNodes) + " fit in one verification");
    m.draw = parse_draw(r, r.string("draw", r.need("draw", "topk, with_replacement or without_replacement")));
    return m;
}

}  // namespace parsing

/// Parses methods.json text; `origin` (the file name) starts every message.
inline std::vector<MethodSpec> parse_methods(std::string_view text, const std::string& origin) {
    const json::Value root = json::parse(text, origin);
    if (!root.is_array() || root.as_array().empty())
        specdec::detail::fail("bench", origin + ": expected a non-empty JSON array of method entries");
    std::vector<MethodSpec> out;
    for (std::size_t i = 0; i < root.as_array().size(); ++i) {
        MethodSpec m = parsing::parse_entry(root.as_array()[i], origin, i);
        for (const MethodSpec& seen : out)
            if (seen.name == m.name)
                specdec::detail::fail("bench", origin + ": entry " + std::to_string(i) + ", field 'name': \"" + m.name +
                                                   "\" is used by an earlier entry (names label the results)");
        out.push_back(std::move(m));
    }
    const auto n_baseline = std::count_if(out.begin(), out.end(), [](const MethodSpec& m) {
        return m.kind == MethodKind::kAutoregressive;
    });
    if (n_baseline != 1)
        specdec::detail::fail("bench", origin + ": needs exactly one \"autoregressive\" entry (the baseline of "
                                                "speedup and losslessness), found " + std::to_string(n_baseline));
    return out;
}

inline std::vector<MethodSpec> load_methods(const std::filesystem::path& path) {
    return parse_methods(specdec::detail::read_text_file(path, "bench"), path.string());
}

}  // namespace specdec::bench
