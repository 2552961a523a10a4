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
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "specdec.hpp"

namespace specdec::bench {

enum class MethodKind {
    kAutoregressive,  // the target alone, one token per forward: the baseline of speedup and losslessness
    kChain,           // vanilla SD (Leviathan et al. 2023; Chen et al. 2023): a chain of gamma drafts
    kTree,            // a k-ary token tree (SpecInfer; MCSD's k-config)
    kExpanded,        // a chain with extra candidates beside it (GLIDE's CAPE, or a fixed number)
    kCascade,         // CS Drafting (Chen et al. 2024): reviewing drafters down to Max-Gram, a K-matrix
    kPct,             // EDD's pruned candidate tree: top-k children while the path confidence pays (edd-pct.txt §3.2)
    kEagle2,          // EAGLE-2's dynamic tree: expand the most confident nodes, keep the global top-N
    kTargetInit,      // improved MCSD: seeds drawn from the target, a k-config tree below each; LOSSY at T > 0
    kFork,            // improved MCSD's dynamic configuration: W sampled chains of depth D (static: no early stop)
    kLookup,          // prompt lookup (Saxena 2023; examples/prompt_lookup.hpp): no drafter model, a chain copied
                      // from what followed the text's last n-gram earlier on
    kText,            // a drafter with a tokenizer of its own drafting through the text (TextBridgeProposer)
    kRegistered,      // a composition a program registered (harness.hpp's register_method); never in methods.json
};

struct RegisteredMethod;  // compose.hpp: the registered composition's runner, acceptor and claim

struct MethodSpec {
    std::string name;            // unique; labels the table, the charts and the CSV
    MethodKind kind = MethodKind::kAutoregressive;
    std::string drafter;         // model folder under --models (chain, tree); empty for autoregressive
    int gamma = 0;               // chain: drafts per step
    std::vector<int> k_config;   // tree: children per node at each depth, e.g. (4, 2, 2, 1)
    DrawPolicy draw = DrawPolicy::kTopK;  // tree: how siblings are drawn from q; target_initialised: at T = 0 (draw_at_t0)
    ExpansionSizes sizes;        // expanded (and cascade with "children"): extra candidates per position
    int max_drafts = 32;         // expanded, cascade: cap on draft nodes verified per step
    std::vector<std::string> drafters;       // cascade: largest first, "maxgram" last; registered: the Llama folders it reads
    std::vector<std::vector<int>> k_matrix;  // cascade: CS Drafting's K-matrix, one row/column per drafter
    double lenience = 1.0;       // cascade: between the neural drafters (never at the target, App. B)
    int children = 0;            // cascade: 0 = a chain; n = n children of each lead node (the paper's 8)
    PrunedCandidateTree pct{};   // pct: expand_threshold 0 = s_d/s_t measured on the machine before the runs
    Eagle2Tree eagle2{};         // eagle2: total_tokens, depth, top_k
    int seeds = 2;               // target_initialised: target-initialised roots per step (the paper's 2)
    bool top_seeds_at_t0 = false;  // target_initialised: at T = 0 the `seeds` most likely tokens (lossy), not the argmax
    int width = 16, max_depth = 4;  // fork: W chains, depth D
    int max_ngram = 3;           // lookup: match the text's last max_ngram tokens, else fewer, down to 1
    std::string about;           // free text for the report
    std::shared_ptr<const RegisteredMethod> registered;  // registered: what register_method was given
};

/// The drafter name that means Max-Gram (models/bigram.json), not a model folder.
inline constexpr const char* kMaxGramName = "maxgram";

/// Limits that keep a configuration inside the models' scratch space (ModelOptions::max_tree_nodes
/// is 256 by default; the root and a drafter's catch-up chain need room too).
inline constexpr int kMaxGamma = 64;
inline constexpr long kMaxTreeNodes = 240;

inline const char* method_name(MethodKind k) {
    switch (k) {
        case MethodKind::kAutoregressive: return "autoregressive";
        case MethodKind::kChain: return "chain";
        case MethodKind::kTree: return "tree";
        case MethodKind::kExpanded: return "expanded";
        case MethodKind::kCascade: return "cascade";
        case MethodKind::kPct: return "pct";
        case MethodKind::kEagle2: return "eagle2";
        case MethodKind::kTargetInit: return "target_initialised";
        case MethodKind::kFork: return "fork";
        case MethodKind::kLookup: return "lookup";
        case MethodKind::kText: return "text";
        case MethodKind::kRegistered: return "registered";
    }
    return "?";
}

/// Draft nodes one verification may hold for this method (sizes the models' scratch space).
inline long draft_nodes(const MethodSpec& m) {
    switch (m.kind) {
        case MethodKind::kAutoregressive: return 0;
        case MethodKind::kChain: return m.gamma;
        case MethodKind::kTree: {  // saturates past the cap: 64 levels of 64 children would overflow
            long total = 0, level = 1;
            for (int k : m.k_config) {
                level = std::min(level * k, kMaxTreeNodes + 1);
                total = std::min(total + level, kMaxTreeNodes + 1);
            }
            return total;
        }
        case MethodKind::kExpanded: return m.max_drafts;
        case MethodKind::kCascade: {
            long widest = 0;  // the top draft, or one review's proposal + its bonus
            for (std::size_t r = 0; r < m.k_matrix.size(); ++r) {
                long row = 0;
                for (int b : m.k_matrix[r]) row += b;
                widest = std::max(widest, row + 1);
            }
            return m.children > 0 ? std::max<long>(widest, m.max_drafts) : widest;
        }
        case MethodKind::kPct: return m.pct.max_drafts;
        case MethodKind::kEagle2: return m.eagle2.total_tokens - 1;
        case MethodKind::kTargetInit: return std::min<long>(m.seeds * (1 + k_config_nodes(m.k_config)), kMaxTreeNodes + 1);
        case MethodKind::kFork: return static_cast<long>(m.width) * m.max_depth;
        case MethodKind::kLookup: return m.gamma;
        case MethodKind::kText: return m.gamma;
        case MethodKind::kRegistered: return m.max_drafts;  // MethodOptions::max_drafts
    }
    return 0;
}

inline const char* draw_name(DrawPolicy d) {
    switch (d) {
        case DrawPolicy::kTopK: return "topk";
        case DrawPolicy::kSampleWithReplacement: return "with_replacement";
        case DrawPolicy::kSampleWithoutReplacement: return "without_replacement";
    }
    return "?";
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

    double number(const char* field, const json::Value& f, double lo, double hi) const {
        if (!f.is_number()) fail(field, std::string("expected a number, got ") + json::kind_name(f.kind()));
        const double x = f.as_double();
        if (!(x >= lo && x <= hi)) fail(field, "value " + std::to_string(x) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return x;
    }

    std::vector<int> integers(const std::string& field, const json::Value& f, int lo, int hi) const {
        if (!f.is_array() || f.as_array().empty()) fail(field, "expected a non-empty array of integers");
        std::vector<int> out;
        for (std::size_t i = 0; i < f.as_array().size(); ++i) {
            const std::string name = field + "[" + std::to_string(i) + "]";
            out.push_back(integer(name.c_str(), f.as_array()[i], lo, hi));
        }
        return out;
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
    if (s == "expanded") return MethodKind::kExpanded;
    if (s == "cascade") return MethodKind::kCascade;
    if (s == "pct") return MethodKind::kPct;
    if (s == "eagle2") return MethodKind::kEagle2;
    if (s == "target_initialised") return MethodKind::kTargetInit;
    if (s == "fork") return MethodKind::kFork;
    if (s == "lookup") return MethodKind::kLookup;
    if (s == "text") return MethodKind::kText;
    r.fail("method", "unknown method \"" + s + "\"; known: autoregressive, chain, tree, expanded, cascade, pct, eagle2, "
                     "target_initialised, fork, lookup, text");
}

inline DrawPolicy parse_draw(const EntryReader& r, const std::string& s, const char* field = "draw") {
    if (s == "topk") return DrawPolicy::kTopK;
    if (s == "with_replacement") return DrawPolicy::kSampleWithReplacement;
    if (s == "without_replacement") return DrawPolicy::kSampleWithoutReplacement;
    r.fail(field, "unknown draw \"" + s + "\"; known: topk, with_replacement, without_replacement");
}

inline MethodSpec parse_entry(const json::Value& v, const std::string& origin, std::size_t index) {
    EntryReader r(v, origin, index);
    if (!v.is_object()) r.fail("", std::string("expected an object, got ") + json::kind_name(v.kind()));
    MethodSpec m;
    m.name = r.string("name", r.need("name", "every entry is named"));
    if (m.name.empty()) r.fail("name", "is empty");
    r.set_name(m.name);
    m.kind = parse_kind(r, r.string("method", r.need("method", "autoregressive, chain, tree, expanded, cascade, pct, eagle2, target_initialised, fork, lookup or text")));

    // Which fields each method takes; anything else is a typo or a field of another method.
    std::set<std::string> allowed{"name", "method", "about"};
    switch (m.kind) {
        case MethodKind::kAutoregressive: break;
        case MethodKind::kChain: allowed.insert({"drafter", "gamma"}); break;
        case MethodKind::kTree: allowed.insert({"drafter", "k_config", "draw"}); break;
        case MethodKind::kExpanded: allowed.insert({"drafter", "gamma", "expansion", "max_drafts"}); break;
        case MethodKind::kCascade: allowed.insert({"drafters", "k_matrix", "lenience", "children", "max_drafts"}); break;
        case MethodKind::kPct:
            allowed.insert({"drafter", "expand_threshold", "leaf_threshold", "width", "max_depth", "max_drafts", "prune",
                            "remove_leaves"});
            break;
        case MethodKind::kEagle2: allowed.insert({"drafter", "total_tokens", "depth", "top_k"}); break;
        case MethodKind::kTargetInit:
            allowed.insert({"drafter", "seeds", "k_config", "allow_lossy", "top_seeds_at_t0", "draw_at_t0"});
            break;
        case MethodKind::kFork: allowed.insert({"drafter", "width", "max_depth"}); break;
        case MethodKind::kLookup: allowed.insert({"gamma", "max_ngram"}); break;
        case MethodKind::kText: allowed.insert({"drafter", "gamma"}); break;
        case MethodKind::kRegistered: break;  // parse_kind never yields it
    }
    for (const json::Member& f : v.as_object())
        if (!allowed.count(f.key))
            r.fail(f.key, std::string("not a field of method '") + method_name(m.kind) + "'");
    if (const json::Value* a = r.find("about")) m.about = r.string("about", *a);

    const auto folder = [&](const char* field, const std::string& name) {
        if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
            r.fail(field, "\"" + name + "\" is not a folder name under --models");
        return name;
    };
    if (const json::Value* d = r.find("max_drafts")) m.max_drafts = r.integer("max_drafts", *d, 1, kMaxTreeNodes);
    const auto drafter = [&] {
        return folder("drafter", r.string("drafter", r.need("drafter", "the drafter's model folder under --models")));
    };
    switch (m.kind) {
        case MethodKind::kAutoregressive: return m;
        case MethodKind::kChain:
            m.drafter = folder("drafter", r.string("drafter", r.need("drafter", "the drafter's model folder under --models, e.g. \"small\"")));
            m.gamma = r.integer("gamma", r.need("gamma", "drafts per step"), 1, kMaxGamma);
            return m;
        case MethodKind::kTree: {
            m.drafter = folder("drafter", r.string("drafter", r.need("drafter", "the drafter's model folder under --models, e.g. \"small\"")));
            m.k_config = r.integers("k_config", r.need("k_config", "children per node at each depth, e.g. [4, 2, 2, 1]"), 1, 64);
            if (draft_nodes(m) > kMaxTreeNodes)
                r.fail("k_config", "the tree has more than " + std::to_string(kMaxTreeNodes) +
                                       " draft nodes, the most that fit in one verification");
            m.draw = parse_draw(r, r.string("draw", r.need("draw", "topk, with_replacement or without_replacement")));
            return m;
        }
        case MethodKind::kExpanded: {
            m.drafter = folder("drafter", r.string("drafter", r.need("drafter", "the drafter's model folder under --models")));
            m.gamma = r.integer("gamma", r.need("gamma", "chain drafts per step"), 1, m.max_drafts);
            const json::Value& e = r.need("expansion", "\"cape\" (7/5/3/1 by confidence) or an integer (a fixed number)");
            if (e.is_string()) {
                if (e.as_string() != "cape") r.fail("expansion", "unknown expansion \"" + e.as_string() + "\"; known: \"cape\" or an integer");
            } else {
                m.sizes = ExpansionSizes::fixed(r.integer("expansion", e, 0, 64));
            }
            return m;
        }
        case MethodKind::kCascade: {
            const json::Value& d = r.need("drafters", "largest first, \"maxgram\" last, e.g. [\"mid\", \"small\", \"maxgram\"]");
            if (!d.is_array()) r.fail("drafters", "expected an array of drafter names");
            for (std::size_t i = 0; i < d.as_array().size(); ++i) {
                const std::string field = "drafters[" + std::to_string(i) + "]";
                m.drafters.push_back(folder(field.c_str(), r.string(field.c_str(), d.as_array()[i])));
            }
            if (m.drafters.size() < 2 || m.drafters.size() > 3 || m.drafters.back() != kMaxGramName ||
                std::count(m.drafters.begin(), m.drafters.end(), std::string(kMaxGramName)) != 1)
                r.fail("drafters", "expected one or two model folders, largest first, then \"maxgram\"");
            const json::Value& k = r.need("k_matrix", "CS Drafting's K-matrix, one row and column per drafter");
            if (!k.is_array()) r.fail("k_matrix", "expected an array of rows");
            for (std::size_t i = 0; i < k.as_array().size(); ++i)
                m.k_matrix.push_back(r.integers("k_matrix[" + std::to_string(i) + "]", k.as_array()[i], 0, kMaxGamma));
            try {
                KMatrix{m.k_matrix}.validate();
            } catch (const specdec::error& err) {
                r.fail("k_matrix", err.what());
            }
            if (static_cast<std::size_t>(KMatrix{m.k_matrix}.size()) != m.drafters.size())
                r.fail("k_matrix", "has " + std::to_string(m.k_matrix.size()) + " rows for " +
                                       std::to_string(m.drafters.size()) + " drafters");
            if (const json::Value* l = r.find("lenience")) {
                if (m.drafters.size() != 3)
                    r.fail("lenience", "applies between two neural drafters only (CS Drafting App. B); this cascade has one");
                m.lenience = r.number("lenience", *l, 1.0, 1e6);
            }
            if (const json::Value* c = r.find("children")) {
                m.children = r.integer("children", *c, 0, 64);
                if (m.children > 0) m.sizes = ExpansionSizes::fixed(m.children - 1);
            }
            if (draft_nodes(m) > kMaxTreeNodes)
                r.fail("k_matrix", "drafts " + std::to_string(draft_nodes(m)) + " nodes, more than " +
                                       std::to_string(kMaxTreeNodes) + " fit in one verification");
            return m;
        }
        case MethodKind::kPct: {
            m.drafter = drafter();
            const json::Value& t = r.need("expand_threshold", "s_d/s_t in (0, 1], or \"measured\" (timed before the runs)");
            if (t.is_string()) {
                if (t.as_string() != "measured")
                    r.fail("expand_threshold", "unknown value \"" + t.as_string() + "\"; known: \"measured\" or a number");
                m.pct.expand_threshold = 0.0f;
            } else {
                m.pct.expand_threshold = static_cast<float>(r.number("expand_threshold", t, 1e-9, 1.0));
            }
            if (const json::Value* v = r.find("leaf_threshold")) m.pct.leaf_threshold = static_cast<float>(r.number("leaf_threshold", *v, 1e-9, 1.0));
            if (const json::Value* v = r.find("width")) m.pct.width = r.integer("width", *v, 1, 64);
            if (const json::Value* v = r.find("max_depth")) m.pct.max_depth = r.integer("max_depth", *v, 1, kMaxGamma);
            m.pct.max_drafts = r.find("max_drafts") ? m.max_drafts : 128;
            if (const json::Value* v = r.find("prune")) {
                const std::string p = r.string("prune", *v);
                if (p == "path") m.pct.prune = PctPrune::kPathProduct;
                else if (p == "token") m.pct.prune = PctPrune::kTokenConfidence;
                else r.fail("prune", "unknown value \"" + p + "\"; known: \"path\" (Eq. 5) or \"token\" (Table 3's ablation)");
            }
            if (const json::Value* v = r.find("remove_leaves")) {
                if (!v->is_bool()) r.fail("remove_leaves", "expected true or false");
                m.pct.remove_leaves = v->as_bool();
            }
            return m;
        }
        case MethodKind::kEagle2: {
            m.drafter = drafter();
            if (const json::Value* v = r.find("total_tokens")) m.eagle2.total_tokens = r.integer("total_tokens", *v, 2, kMaxTreeNodes + 1);
            if (const json::Value* v = r.find("depth")) m.eagle2.depth = r.integer("depth", *v, 1, kMaxGamma);
            if (const json::Value* v = r.find("top_k")) m.eagle2.top_k = r.integer("top_k", *v, 1, 64);
            return m;
        }
        case MethodKind::kTargetInit: {
            m.drafter = drafter();
            // A lossy method runs only when its entry says so (DESIGN: lossy is a label and an opt-in).
            const json::Value& lossy = r.need("allow_lossy", "true: the method's sampled output does not follow the "
                                                             "target's distribution (improved MCSD §3.1)");
            if (!lossy.is_bool() || !lossy.as_bool())
                r.fail("allow_lossy", "must be true: target-initialised candidates are lossy at temperature > 0");
            m.seeds = r.integer("seeds", r.need("seeds", "target-initialised roots per step, e.g. 2"), 1, 16);
            m.k_config = r.integers("k_config", r.need("k_config", "the draft tree below each seed, e.g. [4, 3, 1, 1]"), 1, 64);
            if (draft_nodes(m) > kMaxTreeNodes)
                r.fail("k_config", "the forest has more than " + std::to_string(kMaxTreeNodes) +
                                       " nodes, the most that fit in one verification");
            if (const json::Value* v = r.find("top_seeds_at_t0")) {
                if (!v->is_bool()) r.fail("top_seeds_at_t0", "expected true or false");
                m.top_seeds_at_t0 = v->as_bool();
            }
            m.draw = DrawPolicy::kSampleWithoutReplacement;  // MCSD's draw, TargetInitialisedTree's default
            if (const json::Value* v = r.find("draw_at_t0")) m.draw = parse_draw(r, r.string("draw_at_t0", *v), "draw_at_t0");
            return m;
        }
        case MethodKind::kFork: {
            m.drafter = drafter();
            m.width = r.integer("width", r.need("width", "W: parallel chains"), 1, 64);
            m.max_depth = r.integer("max_depth", r.need("max_depth", "D: drafts per chain"), 1, kMaxGamma);
            if (draft_nodes(m) > kMaxTreeNodes)
                r.fail("width", "W x D is more than " + std::to_string(kMaxTreeNodes) + " nodes, the most that fit in one verification");
            return m;
        }
        case MethodKind::kLookup:  // no drafter: the text is the draft's source
            m.gamma = r.integer("gamma", r.need("gamma", "tokens copied per step"), 1, kMaxGamma);
            if (const json::Value* v = r.find("max_ngram")) m.max_ngram = r.integer("max_ngram", *v, 1, 64);
            return m;
        case MethodKind::kText:  // a Llama drafter whose folder holds its own tokenizer.json
            m.drafter = drafter();
            m.gamma = r.integer("gamma", r.need("gamma", "target tokens drafted per step"), 1, kMaxGamma);
            return m;
        case MethodKind::kRegistered: return m;
    }
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
