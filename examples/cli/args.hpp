// examples/cli/args.hpp — the specdec command's flags: declared per subcommand, parsed strictly.
// SPDX-License-Identifier: MIT
#pragma once

// A subcommand declares its flags (name, whether it takes a value, help text); parse() accepts only
// those. `--flag value` and `--flag=value` both work; positional arguments are kept in order. A
// misspelt flag, a missing value or a malformed number is a UsageError: the command prints it with
// the subcommand's usage and exits 2 (a mistake in the call), apart from specdec::error (exit 1: the
// call was well formed but the files or values were not).

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace specdec::cli {

/// A malformed command line; printed as "specdec <command>: <message>", exit status 2.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Flag {
    std::string name;       // without the leading "--"
    std::string value;      // the value's placeholder in the help ("PATH", "T"); empty = a switch
    std::string help;
};

/// The candidate one or two edits (Levenshtein) from `name`, the nearest first; "" when none is: the
/// "did you mean" of unknown options and unknown commands.
inline std::string closest_name(const std::vector<std::string>& candidates, const std::string& name) {
    const auto distance = [](const std::string& a, const std::string& b) {
        std::vector<std::size_t> row(b.size() + 1);
        for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
        for (std::size_t i = 1; i <= a.size(); ++i) {
            std::size_t diag = row[0];
            row[0] = i;
            for (std::size_t j = 1; j <= b.size(); ++j) {
                const std::size_t up = row[j];
                row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
                diag = up;
            }
        }
        return row[b.size()];
    };
    std::size_t best = 3;
    std::string pick;
    for (const std::string& c : candidates) {
        const std::size_t d = distance(c, name);
        if (d < best) best = d, pick = c;
    }
    return pick;
}

class Args {
public:
    /// Parses argv[first..argc) against `flags`; "--help"/"-h" sets help() and stops checking.
    Args(int argc, char** argv, int first, const std::vector<Flag>& flags) {
        for (int i = first; i < argc; ++i) {
            const std::string_view a = argv[i];
            if (a == "--help" || a == "-h") {
                help_ = true;
                return;
            }
            if (a.substr(0, 7) == "--help=") throw UsageError("option '--help' takes no value: '" + std::string(a) + "'");
            if (a == "--") {  // everything after is positional
                for (++i; i < argc; ++i) positional_.emplace_back(argv[i]);
                break;
            }
            if (a.size() < 2 || a.substr(0, 2) != "--") {
                if (a.size() > 1 && a[0] == '-')
                    throw UsageError("unknown option '" + std::string(a) + "' (options are spelt --name)");
                positional_.emplace_back(a);
                continue;
            }
            std::string name(a.substr(2));
            std::optional<std::string> inline_value;
            if (const auto eq = name.find('='); eq != std::string::npos) {
                inline_value = name.substr(eq + 1);
                name.resize(eq);
            }
            const Flag* f = find(flags, name);
            if (f == nullptr) throw UsageError("unknown option '--" + name + "'" + suggestion(flags, name));
            if (f->value.empty()) {
                if (inline_value) throw UsageError("option '--" + name + "' takes no value");
                if (values_.count(name) != 0) throw UsageError("option '--" + name + "' is given twice");
                values_[name] = "";
                continue;
            }
            if (values_.count(name) != 0)  // last-wins would drop the first silently: which one was meant?
                throw UsageError("option '--" + name + "' is given twice ('" + values_[name] + "' and '" +
                                 (inline_value ? *inline_value : i + 1 < argc ? std::string(argv[i + 1]) : std::string()) + "')");
            if (inline_value) {
                if (inline_value->empty()) throw UsageError("option '--" + name + "' needs a value (" + f->value + "), got an empty one");
                values_[name] = *inline_value;
            } else {
                if (i + 1 >= argc) throw UsageError("option '--" + name + "' needs a value (" + f->value + ")");
                // `--target --prompt x` is a forgotten value, not a target named "--prompt": a value that is
                // one of the flags is refused (a value that really starts with -- goes as --name=VALUE).
                const std::string_view next = argv[i + 1];
                if (next == "--help" || next == "-h" ||
                    (next.substr(0, 2) == "--" && find(flags, std::string(next.substr(2, next.find('=') - 2))) != nullptr))
                    throw UsageError("option '--" + name + "' needs a value (" + f->value + "), found the option '" +
                                     std::string(next) + "'; a value that starts with -- goes as --" + name + "=VALUE");
                values_[name] = argv[++i];
            }
        }
    }

    bool help() const { return help_; }
    const std::vector<std::string>& positional() const { return positional_; }
    bool has(const std::string& name) const { return values_.count(name) != 0; }

    std::string text(const std::string& name, std::string fallback = "") const {
        const auto it = values_.find(name);
        return it == values_.end() ? fallback : it->second;
    }
    /// The value of a required flag.
    std::string need(const std::string& name) const {
        const auto it = values_.find(name);
        if (it == values_.end()) throw UsageError("option '--" + name + "' is required");
        return it->second;
    }
    long integer(const std::string& name, long fallback, long lo, long hi) const {
        const auto it = values_.find(name);
        if (it == values_.end()) return fallback;
        long v = 0;
        const std::string& s = it->second;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size())
            throw UsageError("option '--" + name + "': '" + s + "' is not an integer");
        if (v < lo || v > hi)
            throw UsageError("option '--" + name + "': " + s + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return v;
    }
    std::uint64_t unsigned64(const std::string& name, std::uint64_t fallback) const {
        const auto it = values_.find(name);
        if (it == values_.end()) return fallback;
        std::uint64_t v = 0;
        const std::string& s = it->second;
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec != std::errc() || end != s.data() + s.size())
            throw UsageError("option '--" + name + "': '" + s + "' is not a non-negative integer");
        return v;
    }
    /// `lo_open`: lo itself is outside the range, (lo, hi] (top-p's nucleus mass).
    double number(const std::string& name, double fallback, double lo, double hi, bool lo_open = false) const {
        const auto it = values_.find(name);
        if (it == values_.end()) return fallback;
        const std::string& s = it->second;
        double v = 0;  // from_chars, as the integers: no leading space or '+', no hex
        const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc::result_out_of_range)
            throw UsageError("option '--" + name + "': '" + s + "' is beyond what a double holds");
        if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v))
            throw UsageError("option '--" + name + "': '" + s + "' is not a number");
        if (v < lo || (lo_open && v == lo) || v > hi)
            throw UsageError("option '--" + name + "': " + s + " is outside " + (lo_open ? "(" : "[") + trim(lo) + ", " +
                             trim(hi) + "]");
        return v;
    }
    /// A comma-separated list of integers in [lo, hi], e.g. "2,2,1".
    std::vector<int> integers(const std::string& name, std::vector<int> fallback, int lo, int hi) const {
        const auto it = values_.find(name);
        if (it == values_.end()) return fallback;
        std::vector<int> out;
        const std::string& s = it->second;
        std::size_t start = 0;
        while (true) {
            const std::size_t comma = s.find(',', start);
            const std::string part = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
            int v = 0;
            const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
            if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v < lo || v > hi)
                throw UsageError("option '--" + name + "': '" + s + "' is not a comma-separated list of integers in [" +
                                 std::to_string(lo) + ", " + std::to_string(hi) + "]");
            out.push_back(v);
            if (comma == std::string::npos) break;
            start = comma + 1;
        }
        return out;
    }

private:
    static const Flag* find(const std::vector<Flag>& flags, const std::string& name) {
        for (const Flag& f : flags)
            if (f.name == name) return &f;
        return nullptr;
    }
    /// " (did you mean --x?)" for a flag one or two edits away, one the name begins (--temp), or one
    /// other tools call by another name (--draft-model); else "; see --help".
    static std::string suggestion(const std::vector<Flag>& flags, const std::string& name) {
        std::vector<std::string> names;
        for (const Flag& f : flags) names.push_back(f.name);
        std::string pick = closest_name(names, name);
        if (pick.empty() && name.size() >= 2) {  // a prefix: every flag it begins, so --top names both top-p and top-k
            for (const std::string& n : names)
                if (n.compare(0, name.size(), name) == 0) pick += (pick.empty() ? "" : " or --") + n;
        }
        // The names of llama.cpp, vLLM and transformers for the same settings.
        static const std::pair<const char*, const char*> kAliases[] = {
            {"draft-model", "draft"},        {"model", "target"},           {"target-model", "target"},
            {"max-tokens", "max-new-tokens"}, {"n-predict", "max-new-tokens"}, {"num-threads", "threads"},
            {"draft-max", "gamma"},          {"num-speculative-tokens", "gamma"}};
        if (pick.empty())
            for (const auto& [alias, flag] : kAliases)
                if (name == alias && find(flags, flag) != nullptr) pick = flag;
        return pick.empty() ? "; see --help" : " (did you mean --" + pick + "?)";
    }
    static std::string trim(double v) {
        std::string s = std::to_string(v);
        while (s.size() > 1 && s.back() == '0') s.pop_back();
        if (!s.empty() && s.back() == '.') s.pop_back();
        return s;
    }

    bool help_ = false;
    std::vector<std::string> positional_;
    std::map<std::string, std::string> values_;
};

/// The help text of a subcommand: its synopsis, then one line per flag.
inline std::string usage_text(const std::string& synopsis, const std::string& about, const std::vector<Flag>& flags) {
    std::string out = "usage: " + synopsis + "\n\n" + about + "\n";
    if (!flags.empty()) out += "\noptions:\n";
    for (const Flag& f : flags) {
        std::string left = "  --" + f.name + (f.value.empty() ? "" : " " + f.value);
        if (left.size() < 28) left.resize(28, ' ');
        else left += "\n" + std::string(28, ' ');
        out += left + f.help + "\n";
    }
    out += "  --help                    this text\n";
    return out;
}

}  // namespace specdec::cli
