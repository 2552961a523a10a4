// examples/bench/report_html.hpp — the benchmark's results as one self-contained HTML page.
// SPDX-License-Identifier: MIT
#pragma once

// The page is readable offline and forever: no network, no scripts, no web fonts — inline CSS and
// inline SVG only. Sections: setup, the table, speedup bars with min–max whiskers, acceptance per
// draft position, tokens-per-step histograms, and case studies where every generated token is
// coloured by how it was produced (the GLIDE paper's case-study tables, §5).
//
// Plain functions from the results struct to strings; each section is one function.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "bench_results.hpp"
#include "specdec.hpp"

namespace specdec::bench::html {

// ---- text --------------------------------------------------------------------------------------------

/// Escapes text for HTML element content and attribute values (svg.hpp's XML escape serves both).
inline std::string escape(std::string_view s) { return specdec::detail::xml_escape(s); }

/// printf into a std::string (numbers and coordinates; text goes through escape()).
template <class... A>
std::string strf(const char* f, A... args) {
    char buf[512];
    std::snprintf(buf, sizeof buf, f, args...);
    return buf;
}

inline std::string number(const char* f, double v) { return std::isfinite(v) ? strf(f, v) : std::string("–"); }

// ---- colours -----------------------------------------------------------------------------------------

/// Temperatures are the series of the bar charts; methods are the series of the line chart.
inline const char* temperature_color(std::size_t i) {
    static const char* const c[] = {"#3b6fb6", "#e08a2e", "#6a9f3a", "#8e5ba8"};
    return c[i % std::size(c)];
}

inline const char* method_color(std::size_t i) {
    static const char* const c[] = {"#444444", "#2a9d8f", "#d1495b", "#7b5ea7", "#e9a03b", "#3a86c8", "#8a6d3b", "#c05fa0"};
    return c[i % std::size(c)];
}

/// Case-study backgrounds: the target's own token plain, drafts from light (depth 1) to dark (deep).
inline constexpr int kDepthColors = 6;
inline const char* depth_background(int depth) {
    static const char* const c[kDepthColors + 1] = {"#ffffff", "#d3eecf", "#97d493", "#54b05a",
                                                     "#2a8a4a", "#1b6a6e", "#16425b"};
    return c[std::clamp(depth, 0, kDepthColors)];
}
inline const char* depth_text(int depth) { return depth >= 4 ? "#ffffff" : "#111111"; }

// ---- the results, reorganised for drawing ------------------------------------------------------------

/// The method names in file order (rows are temperature-major, so the first temperature's rows).
inline std::vector<std::string> method_names(const Results& r) {
    std::vector<std::string> names;
    for (const MethodResult& m : r.rows)
        if (std::find(names.begin(), names.end(), m.spec.name) == names.end()) names.push_back(m.spec.name);
    return names;
}

inline std::size_t method_index(const Results& r, const std::string& name) {
    const std::vector<std::string> names = method_names(r);
    return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

inline const MethodResult* find_row(const Results& r, const std::string& name, float temperature) {
    for (const MethodResult& m : r.rows)
        if (m.spec.name == name && m.temperature == temperature) return &m;
    return nullptr;
}

inline bool is_baseline(const MethodResult& m) { return m.spec.kind == MethodKind::kAutoregressive; }

inline std::string temperature_label(float t) { return t == 0.0f ? "T = 0 (greedy)" : strf("T = %g", t); }

inline std::string describe(const MethodSpec& m) {
    switch (m.kind) {
        case MethodKind::kAutoregressive: return "target alone";
        case MethodKind::kChain: return "chain, drafter " + m.drafter + ", gamma " + std::to_string(m.gamma);
        case MethodKind::kTree: {
            std::string k;
            for (std::size_t i = 0; i < m.k_config.size(); ++i) k += (i ? "," : "") + std::to_string(m.k_config[i]);
            return "tree (" + k + "), drafter " + m.drafter + ", " + draw_name(m.draw);
        }
        case MethodKind::kExpanded:
            return "chain + expansions, drafter " + m.drafter + ", gamma " + std::to_string(m.gamma) +
                   (m.sizes.sizes.size() == 1 ? ", " + std::to_string(m.sizes.sizes[0]) + " extra per position"
                                              : std::string(", CAPE sizes"));
        case MethodKind::kCascade: {
            std::string d, k;
            for (std::size_t i = 0; i < m.drafters.size(); ++i) {
                if (i > 0) d += " <- ";
                d += m.drafters[i];
            }
            for (std::size_t r = 0; r < m.k_matrix.size(); ++r) {
                k += r ? ",[" : "[";
                for (std::size_t c = 0; c < m.k_matrix[r].size(); ++c) {
                    if (c > 0) k += ",";
                    k += std::to_string(m.k_matrix[r][c]);
                }
                k += "]";
            }
            return "cascade target <- " + d + ", K [" + k + "]" + (m.lenience > 1 ? strf(", l %g", m.lenience) : "") +
                   (m.children > 0 ? ", " + std::to_string(m.children) + " children per lead node" : "");
        }
        case MethodKind::kPct:
            return "PCT, drafter " + m.drafter + ", expand at path confidence >= " +
                   (m.pct.expand_threshold > 0 ? strf("%g", m.pct.expand_threshold) : std::string("s_d/s_t measured")) +
                   (m.pct.prune == PctPrune::kTokenConfidence ? " (own confidence)" : "") + ", width " +
                   std::to_string(m.pct.width) + ", depth <= " + std::to_string(m.pct.max_depth) +
                   (m.pct.remove_leaves ? strf(", leaves < %g removed", m.pct.leaf_threshold) : std::string(", leaves kept"));
        case MethodKind::kEagle2:
            return "EAGLE-2 tree, drafter " + m.drafter + ", " + std::to_string(m.eagle2.total_tokens) + " tokens, depth " +
                   std::to_string(m.eagle2.depth) + ", top-" + std::to_string(m.eagle2.top_k);
        case MethodKind::kTargetInit: {
            std::string k;
            for (std::size_t i = 0; i < m.k_config.size(); ++i) k += (i ? "," : "") + std::to_string(m.k_config[i]);
            return "target-initialised (LOSSY): " + std::to_string(m.seeds) + " seeds, tree (" + k + ") below each, drafter " +
                   m.drafter + "; at T = 0 " + (m.top_seeds_at_t0 ? "the top seeds" : "one seed") + ", drafts " + draw_name(m.draw);
        }
        case MethodKind::kRegistered: {  // register_method in the program that ran: its drafters, its about
            std::string d;
            for (const std::string& n : m.drafters) d += (d.empty() ? ", drafters " : ", ") + n;
            return "registered by the program" + d;
        }
        case MethodKind::kFork:
            return "fork of " + std::to_string(m.width) + " chains, depth " + std::to_string(m.max_depth) + ", drafter " +
                   m.drafter;
        case MethodKind::kText:
            return "chain through the text, drafter " + m.drafter + " with its own tokenizer, gamma " + std::to_string(m.gamma);
        case MethodKind::kLookup:
            return "prompt lookup (no drafter model), gamma " + std::to_string(m.gamma) + ", n-grams of " +
                   std::to_string(m.max_ngram) + " down to 1";
    }
    return "";
}

// ---- page frame --------------------------------------------------------------------------------------

inline std::string style() {
    return R"(<style>
body{margin:0;background:#f6f7f9;color:#1d2330;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",Arial,sans-serif}
main{max-width:1140px;margin:0 auto;padding:24px 28px 48px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:18px;margin:34px 0 8px;padding-top:6px;border-top:1px solid #dde1e7}
h3{font-size:15px;margin:18px 0 6px}
p.lead{color:#4a5261;margin:2px 0 14px}
.card{background:#fff;border:1px solid #e1e4ea;border-radius:8px;padding:14px 16px;margin:10px 0}
.setup{display:grid;grid-template-columns:auto 1fr;gap:2px 16px;font-size:13px}
.setup b{color:#4a5261;font-weight:600}
code{font:12px ui-monospace,"DejaVu Sans Mono",monospace;background:#eef0f4;padding:1px 4px;border-radius:4px}
table.results{border-collapse:collapse;width:100%;font-size:12.5px;background:#fff}
table.results th{background:#2f3a4d;color:#fff;font-weight:600;padding:6px 6px;text-align:right;vertical-align:bottom}
table.results th:first-child{text-align:left}
table.results td{padding:5px 6px;border-bottom:1px solid #eceef2;text-align:right;white-space:nowrap}
table.results td:last-child{white-space:normal;text-align:left;min-width:110px}
table.results td:first-child{text-align:left}
table.results tr.temp td{background:#e9edf3;font-weight:600;text-align:left;color:#2f3a4d}
table.results tr.base td{color:#5a6272}
.sub{color:#8a92a0;font-size:11px}
.yes{color:#1f7a3d;font-weight:600}
.no{color:#b3261e;font-weight:700}
.dist{color:#5a6272}
.swatch{display:inline-block;width:11px;height:11px;border-radius:2px;vertical-align:-1px;margin-right:4px}
svg{max-width:100%;height:auto}
.charts{display:flex;flex-wrap:wrap;gap:12px}
.charts .card{margin:0}
.legend{font-size:12px;color:#39404d;margin:6px 0 2px}
.legend span.key{margin-right:14px;white-space:nowrap}
.case{margin:14px 0 22px}
.case .prompt{color:#5a6272;font-style:italic;margin:4px 0 8px}
.case table{border-collapse:collapse;width:100%}
.case td{vertical-align:top;padding:6px 8px;border-top:1px solid #eceef2}
.case td.m{width:150px;font-weight:600;font-size:12px;color:#39404d}
.text{white-space:pre-wrap;font:13px/1.9 ui-monospace,"DejaVu Sans Mono",monospace;word-break:break-word}
.text span{border-radius:3px;padding:1px 0;box-shadow:inset -1px 0 0 #ffffff}
.text span.d0{box-shadow:inset 0 -1px 0 #c9ced6}
dl.notes{font-size:12.5px;color:#39404d;display:grid;grid-template-columns:max-content 1fr;gap:3px 14px}
dl.notes dt{font-weight:600}
dl.notes dd{margin:0}
</style>
)";
}

inline std::string setup_section(const Results& r) {
    std::string s = "<div class=\"card setup\">\n";
    const auto row = [&](const std::string& k, const std::string& v) { s += "<b>" + escape(k) + "</b><span>" + v + "</span>\n"; };
    row("machine", escape(r.machine) + strf(", %d thread%s used; weights ", r.threads, r.threads == 1 ? "" : "s") +
                       escape(r.weights));
    if (!r.target_label.empty()) row("target", "<b>" + escape(r.target_label) + "</b>");
    std::string models;
    for (const ModelInfo& m : r.models) {
        models += (models.empty() ? "" : "; ") + escape(m.name) + strf(": %d layers × %d wide, %.2fM matrix parameters",
                                                                        m.config.num_hidden_layers, m.config.hidden_size,
                                                                        m.matrix_params / 1e6);
        if (&m != &r.models.front() && m.matrix_params > 0)
            models += strf(" (1/%.1f of the target)", double(r.models.front().matrix_params) / m.matrix_params);
    }
    row("models", models);
    std::string temps;
    for (float t : r.temperatures) temps += (temps.empty() ? "" : ", ") + strf("%g", t);
    row("workload", strf("%d prompts (even across kinds) × %d new tokens exactly (EOS ignored) × %d repeats; "
                           "temperatures ",
                           r.n_prompts, r.max_new, r.repeats) +
                        temps + strf("; seed %llu", static_cast<unsigned long long>(r.seed)));
    row("order", "per temperature, repeat and prompt every method runs in turn (drift hits all alike), same seed per "
                 "(prompt, repeat); one untimed warm-up generation per method first");
    row("run", "<code>" + escape(r.command) + "</code> at " + escape(r.started));
    return s + "</div>\n";
}

// ---- the table ---------------------------------------------------------------------------------------

inline std::string lossless_cell(const MethodResult& m) {
    if (is_baseline(m)) return "<span class=\"dist\">reference</span>";
    const bool checked = m.exact_check || !m.check_report.empty();
    const bool bad = m.exact_check ? m.n_mismatched > 0 && m.claims_lossless
                                   : !m.claims_lossless || m.check_report.rfind("NOT", 0) == 0;
    return std::string("<span class=\"") + (bad ? "no" : checked ? "yes" : "dist") + "\">" + escape(lossless_text(m)) +
           "</span>";
}

inline std::string with_spread(const char* f, const Spread& s) {
    return number(f, s.median) + " <span class=\"sub\">" + number(f, s.lo) + "–" + number(f, s.hi) + "</span>";
}

inline std::string table_section(const Results& r) {
    std::string s = "<table class=\"results\">\n<tr>"
                    "<th>method</th>"
                    "<th title=\"tokens per target forward, bonus included\">tau</th>"
                    "<th title=\"accepted / (accepted + rejections): Leviathan et al., GLIDE\">α token</th>"
                    "<th title=\"(accepted + 1) / depth per step: EDD\">α EDD</th>"
                    "<th title=\"longest accepted / max draft length: MCSD\">α MCSD</th>"
                    "<th title=\"draft nodes verified per target forward\">nodes</th>"
                    "<th>tokens/s <span class=\"sub\">min–max</span></th>"
                    "<th>speedup <span class=\"sub\">min–max</span></th>"
                    "<th title=\"cost per forward = matrix parameters\">SWI params</th>"
                    "<th title=\"cost per forward = measured seconds (target: median one-token forward; drafter: mean forward)\">SWI measured</th>"
                    "<th title=\"(1-a^(g+1))/((1-a)(g c+1)), chains only\">expected</th>"
                    "<th>draft share</th>"
                    "<th style=\"text-align:left\">lossless</th></tr>\n";
    for (float t : r.temperatures) {
        s += "<tr class=\"temp\"><td colspan=\"13\">" + escape(temperature_label(t)) + "</td></tr>\n";
        for (const MethodResult& m : r.rows) {
            if (m.temperature != t) continue;
            const bool base = is_baseline(m);
            const Summary& u = m.summary;
            s += std::string(base ? "<tr class=\"base\">" : "<tr>");
            s += "<td title=\"" + escape(m.spec.about) + "\"><span class=\"swatch\" style=\"background:" +
                 std::string(method_color(method_index(r, m.spec.name))) + "\"></span>" + escape(m.spec.name) +
                 "<br><span class=\"sub\">" + escape(describe(m.spec)) +
                 (std::isfinite(m.pct_threshold)
                      ? escape(", s_d/s_t = " + number("%.4f", m.pct_threshold) +
                               (m.pct_threshold_measured ? " (measured in this run)" : " (set by the entry)"))
                      : std::string()) +
                 "</span></td>";
            s += "<td>" + number("%.2f", u.tau) + "</td>";
            s += "<td>" + (base ? "–" : number("%.3f", u.alpha_token)) + "</td>";
            s += "<td>" + (base ? "–" : number("%.3f", u.alpha_depth)) + "</td>";
            s += "<td>" + (base ? "–" : number("%.3f", u.alpha_longest)) + "</td>";
            s += "<td>" + (base ? "–" : number("%.1f", u.nodes_per_step)) + "</td>";
            s += "<td>" + with_spread("%.0f", m.tokens_per_s) + "</td>";
            s += "<td><b>" + number("%.2f×", m.speedup.median) + "</b> <span class=\"sub\">" + number("%.2f", m.speedup.lo) +
                 "–" + number("%.2f", m.speedup.hi) + "</span></td>";
            s += "<td>" + number("%.2f", m.swi_params) + "</td>";
            s += "<td>" + number("%.2f", m.swi_measured) + "</td>";
            s += "<td>" + number("%.2f×", m.expected_speedup) + "</td>";
            s += "<td>" + (base ? "–" : number("%.0f%%", 100 * u.draft_share())) + "</td>";
            s += "<td>" + lossless_cell(m) + "</td></tr>\n";
        }
    }
    return s + "</table>\n";
}

// ---- speedup bars ------------------------------------------------------------------------------------

/// Horizontal bars: one group per speculative method, one bar per temperature, whiskers min–max over
/// repeats, a dashed line at 1 (autoregressive).
inline std::string speedup_chart(const Results& r) {
    std::vector<std::string> names;
    for (const std::string& n : method_names(r))
        if (const MethodResult* m = find_row(r, n, r.temperatures.front()); m && !is_baseline(*m)) names.push_back(n);
    const std::size_t nt = r.temperatures.size();
    double hi = 1.0;
    for (const MethodResult& m : r.rows)
        if (!is_baseline(m) && std::isfinite(m.speedup.hi)) hi = std::max(hi, m.speedup.hi);
    const specdec::detail::Ticks ticks = specdec::detail::nice_ticks(0.0, hi * 1.08, 6);
    const double bar = 20, gap = 4, group_gap = 18, left = 190, right = 1040, top = 34;
    const double group_h = nt * bar + (nt - 1) * gap;
    const double bottom = top + names.size() * (group_h + group_gap);
    const int width = 1080, height = static_cast<int>(bottom + 44);
    const auto px = [&](double x) { return left + (x - ticks.lo) / (ticks.hi - ticks.lo) * (right - left); };

    std::string s = strf("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                           "font-family=\"system-ui,DejaVu Sans,Arial,sans-serif\" font-size=\"12\">\n",
                           width, height, width, height);
    for (double x = ticks.lo; x <= ticks.hi + 1e-9; x += ticks.step) {
        s += strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e8ec\"/>\n", px(x), top - 6, px(x), bottom);
        s += strf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#5a6272\">", px(x), bottom + 16) +
             specdec::detail::number(x, ticks.step) + "×</text>\n";
    }
    for (std::size_t ti = 0; ti < nt; ++ti)  // legend
        s += strf("<rect x=\"%.1f\" y=\"6\" width=\"12\" height=\"12\" rx=\"2\" fill=\"%s\"/><text x=\"%.1f\" y=\"16\">",
                    left + 150.0 * ti, temperature_color(ti), left + 150.0 * ti + 17) +
             escape(temperature_label(r.temperatures[ti])) + "</text>\n";
    for (std::size_t g = 0; g < names.size(); ++g) {
        const double y0 = top + g * (group_h + group_gap);
        s += strf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-weight=\"600\">", left - 10, y0 + group_h / 2 + 4) +
             escape(names[g]) + "</text>\n";
        for (std::size_t ti = 0; ti < nt; ++ti) {
            const MethodResult* m = find_row(r, names[g], r.temperatures[ti]);
            if (m == nullptr || !std::isfinite(m->speedup.median)) continue;
            const double y = y0 + ti * (bar + gap), cy = y + bar / 2;
            s += strf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" rx=\"2\" fill=\"%s\" fill-opacity=\"0.85\"/>\n",
                        px(0), y, px(m->speedup.median) - px(0), bar, temperature_color(ti));
            s += strf("<path d=\"M%.1f %.1fH%.1fM%.1f %.1fV%.1fM%.1f %.1fV%.1f\" stroke=\"#1d2330\" stroke-width=\"1.4\"/>\n",
                        px(m->speedup.lo), cy, px(m->speedup.hi), px(m->speedup.lo), cy - 6, cy + 6, px(m->speedup.hi),
                        cy - 6, cy + 6);
            s += strf("<text x=\"%.1f\" y=\"%.1f\" fill=\"#1d2330\">%.2f×</text>\n",
                        std::max(px(m->speedup.hi), px(m->speedup.median)) + 6, cy + 4, m->speedup.median);
        }
    }
    s += strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#b3261e\" stroke-dasharray=\"5 4\" stroke-width=\"1.5\"/>\n",
                px(1), top - 6, px(1), bottom);
    s += strf("<text x=\"%.1f\" y=\"%.1f\" fill=\"#b3261e\" font-size=\"11\" text-anchor=\"middle\">autoregressive = 1×</text>\n",
                px(1), bottom + 32);
    s += strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1d2330\"/>\n", left, top - 6, left, bottom);
    return s + "</svg>\n";
}

// ---- acceptance per draft position -------------------------------------------------------------------

/// Share of steps whose draft reached position d that accepted at least d drafts, one line per method.
inline std::string acceptance_chart(const Results& r, float temperature) {
    const int width = 496, height = 300;
    const double left = 52, right = width - 16.0, top = 30, bottom = height - 74.0;
    std::size_t depth = 1;
    for (const MethodResult& m : r.rows)
        if (m.temperature == temperature) depth = std::max(depth, m.summary.accept_at_position.size());
    const auto px = [&](double d) { return depth == 1 ? (left + right) / 2 : left + (d - 1) / (depth - 1.0) * (right - left); };
    const auto py = [&](double a) { return bottom - a * (bottom - top); };

    std::string s = strf("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                           "font-family=\"system-ui,DejaVu Sans,Arial,sans-serif\" font-size=\"12\">\n",
                           width, height, width, height);
    s += strf("<text x=\"%.1f\" y=\"18\" font-weight=\"600\" font-size=\"13\">", left) + escape(temperature_label(temperature)) +
         "</text>\n";
    for (int i = 0; i <= 5; ++i) {
        const double a = i / 5.0;
        s += strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e8ec\"/>"
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#5a6272\">%.1f</text>\n",
                    left, py(a), right, py(a), left - 6, py(a) + 4, a);
    }
    for (std::size_t d = 1; d <= depth; ++d)
        s += strf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#5a6272\">%zu</text>\n", px(d), bottom + 16, d);
    s += strf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#39404d\">draft position d</text>\n",
                (left + right) / 2, bottom + 32);
    s += strf("<text transform=\"translate(14,%.1f) rotate(-90)\" text-anchor=\"middle\" fill=\"#39404d\">"
                "P(accepted ≥ d | reached d)</text>\n", (top + bottom) / 2);
    int legend = 0;
    for (const MethodResult& m : r.rows) {
        if (m.temperature != temperature || is_baseline(m) || m.summary.accept_at_position.empty()) continue;
        const char* color = method_color(method_index(r, m.spec.name));
        const std::vector<double>& a = m.summary.accept_at_position;
        std::string points;
        for (std::size_t d = 0; d < a.size(); ++d) points += strf("%.1f,%.1f ", px(d + 1.0), py(a[d]));
        s += std::string("<polyline fill=\"none\" stroke-width=\"2.2\" stroke=\"") + color + "\" points=\"" + points + "\"/>\n";
        for (std::size_t d = 0; d < a.size(); ++d)
            s += strf("<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"/>\n", px(d + 1.0), py(a[d]), color);
        const double lx = left + (legend % 2) * 220.0, ly = bottom + 48 + (legend / 2) * 16.0;
        s += strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>"
                    "<text x=\"%.1f\" y=\"%.1f\">", lx, ly - 4, lx + 18, ly - 4, color, lx + 24, ly) +
             escape(m.spec.name) + "</text>\n";
        ++legend;
    }
    s += strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1d2330\"/>", left, bottom, right, bottom);
    s += strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1d2330\"/>\n", left, top, left, bottom);
    return s + "</svg>\n";
}

// ---- tokens-per-step histograms ----------------------------------------------------------------------

/// One small chart per speculative method: the share of steps that yielded k tokens (tau's
/// distribution), one bar per temperature.
inline std::string tau_histogram(const Results& r, const std::string& name) {
    const int width = 310, height = 210;
    const double left = 44, right = width - 10.0, top = 44, bottom = height - 34.0;
    std::size_t kmax = 1;
    double ymax = 0.0;
    std::vector<const MethodResult*> rows;
    for (float t : r.temperatures) {
        const MethodResult* m = find_row(r, name, t);
        rows.push_back(m);
        if (m == nullptr) continue;
        kmax = std::max(kmax, m->tau_hist.size() - 1);
        long total = 0;
        for (long c : m->tau_hist) total += c;
        for (long c : m->tau_hist) ymax = std::max(ymax, total ? double(c) / total : 0.0);
    }
    const specdec::detail::Ticks yt = specdec::detail::nice_ticks(0.0, std::max(ymax, 0.05), 4);
    const double slot = (right - left) / kmax, bw = slot * 0.8 / r.temperatures.size();
    const auto py = [&](double v) { return bottom - v / yt.hi * (bottom - top); };

    std::string s = strf("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                           "font-family=\"system-ui,DejaVu Sans,Arial,sans-serif\" font-size=\"11\">\n",
                           width, height, width, height);
    s += strf("<text x=\"%.1f\" y=\"16\" font-weight=\"600\" font-size=\"13\">", left) + escape(name) + "</text>\n";
    std::string taus = "tau ";
    for (std::size_t ti = 0; ti < rows.size(); ++ti)
        if (rows[ti]) taus += (ti ? " · " : "") + number("%.2f", rows[ti]->summary.tau) + strf(" (T=%g)", r.temperatures[ti]);
    s += strf("<text x=\"%.1f\" y=\"32\" fill=\"#5a6272\">", left) + escape(taus) + "</text>\n";
    for (double y = yt.lo; y <= yt.hi + 1e-9; y += yt.step)
        s += strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e6e8ec\"/>"
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#5a6272\">%.0f%%</text>\n",
                    left, py(y), right, py(y), left - 5, py(y) + 4, 100 * y);
    for (std::size_t k = 1; k <= kmax; ++k)
        s += strf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#5a6272\">%zu</text>\n",
                    left + (k - 0.5) * slot, bottom + 14, k);
    s += strf("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" fill=\"#39404d\">tokens per target forward</text>\n",
                (left + right) / 2, bottom + 28);
    for (std::size_t ti = 0; ti < rows.size(); ++ti) {
        if (rows[ti] == nullptr) continue;
        long total = 0;
        for (long c : rows[ti]->tau_hist) total += c;
        for (std::size_t k = 1; k < rows[ti]->tau_hist.size(); ++k) {
            const double v = total ? double(rows[ti]->tau_hist[k]) / total : 0.0;
            const double x = left + (k - 1) * slot + slot * 0.1 + ti * bw;
            s += strf("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\" fill-opacity=\"0.85\">"
                        "<title>%zu tokens: %.1f%% of steps</title></rect>\n",
                        x, py(v), bw, bottom - py(v), temperature_color(ti), k, 100 * v);
        }
    }
    s += strf("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#1d2330\"/>\n", left, bottom, right, bottom);
    return s + "</svg>\n";
}

// ---- case studies ------------------------------------------------------------------------------------

inline std::string depth_legend(int max_depth) {
    std::string s = "<div class=\"legend\">";
    s += "<span class=\"key\"><span class=\"swatch\" style=\"background:#fff;border:1px solid #c9ced6\"></span>the "
         "target's own token (bonus / correction)</span>";
    for (int d = 1; d <= std::min(max_depth, kDepthColors); ++d)
        s += strf("<span class=\"key\"><span class=\"swatch\" style=\"background:%s\"></span>accepted draft, depth %d%s</span>",
                    depth_background(d), d, d == kDepthColors && max_depth > kDepthColors ? "+" : "");
    return s + "</div>\n";
}

/// Generated text may hold control bytes and broken UTF-8 (an untrained model emits anything): such
/// bytes are spelled "<0x15>" so they stay visible in any font; newlines and valid characters stay.
inline std::string visible(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
        bool ok = n > 0 && i + n <= s.size() && ((b >= 0x20 && b != 0x7F) || b == '\n' || n > 1);
        for (std::size_t j = 1; ok && j < n; ++j) ok = (static_cast<unsigned char>(s[i + j]) & 0xC0) == 0x80;
        if (ok) {
            out.append(s.substr(i, n));
            i += n;
        } else {
            out += strf("<0x%02X>", b);
            ++i;
        }
    }
    return out;
}

inline std::string case_text(const std::vector<Piece>& pieces) {
    std::string s = "<div class=\"text\">";
    for (const Piece& p : pieces) {
        const std::string tip = p.depth == 0 ? "target" : "draft, depth " + std::to_string(p.depth);
        if (p.depth == 0)
            s += "<span class=\"d0\" title=\"" + tip + "\">" + escape(visible(p.text)) + "</span>";
        else
            s += strf("<span style=\"background:%s;color:%s\" title=\"", depth_background(p.depth), depth_text(p.depth)) +
                 tip + "\">" + escape(visible(p.text)) + "</span>";
    }
    return s + "</div>";
}

inline std::string case_studies_section(const Results& r) {
    int max_depth = 1;
    for (const CaseStudy& c : r.cases)
        for (const auto& out : c.outputs)
            for (const Piece& p : out) max_depth = std::max(max_depth, p.depth);
    std::string s = depth_legend(max_depth);
    for (const CaseStudy& c : r.cases) {
        s += "<div class=\"card case\"><h3>" + escape(c.prompt_id) + " <span class=\"sub\">" + escape(c.kind) + ", " +
             escape(temperature_label(c.temperature)) + "</span></h3>\n";
        s += "<div class=\"prompt\">" + escape(c.prompt_text) + " …</div>\n<table>\n";
        for (std::size_t i = 0; i < c.outputs.size(); ++i) {
            int drafted = 0, tokens = 0;
            for (const Piece& p : c.outputs[i]) {
                drafted += p.depth > 0 ? p.n_tokens : 0;
                tokens += p.n_tokens;
            }
            s += "<tr><td class=\"m\"><span class=\"swatch\" style=\"background:" +
                 std::string(method_color(method_index(r, c.methods[i]))) + "\"></span>" + escape(c.methods[i]) +
                 strf("<br><span class=\"sub\">%d of %d tokens drafted</span>", drafted, tokens) +
                 "</td><td>" + case_text(c.outputs[i]) + "</td></tr>\n";
        }
        s += "</table></div>\n";
    }
    return s;
}

// ---- notes -------------------------------------------------------------------------------------------

inline std::string notes_section() {
    return R"(<dl class="notes">
<dt>tau</dt><dd>tokens committed per target forward, bonus included (EDD, FSPAD, Spec-Bench); pooled over all prompts and repeats.</dd>
<dt>α token</dt><dd>accepted drafts / (accepted + rejections): the per-token acceptance α of Leviathan et al. and GLIDE, the maximum-likelihood estimate under i.i.d. acceptance.</dd>
<dt>α EDD</dt><dd>(accepted + 1) / draft depth, summed over steps (EDD).</dd>
<dt>α MCSD</dt><dd>longest accepted draft / maximum draft length, summed over steps (MCSD).</dd>
<dt>tokens/s</dt><dd>per repeat: new tokens of all prompts / their walltime (prefill of target and drafter included); median over repeats, min–max in grey.</dd>
<dt>speedup</dt><dd>per repeat: autoregressive walltime / the method's walltime, same prompts and seeds; median and min–max over repeats.</dd>
<dt>SWI</dt><dd>standardized walltime improvement (CS Drafting, §5): the cost of the same tokens decoded autoregressively over the method's cost, with a fixed cost per forward of each model — matrix parameters read (<i>params</i>), or measured seconds (<i>measured</i>): the median one-token target forward of the autoregressive baseline, and the mean drafter forward of the method. Every target call is priced alike, so the gap to the measured speedup is what verifying a wide tree costs beyond one token, plus overheads.</dd>
<dt>expected</dt><dd>chains only: (1 − α<sup>γ+1</sup>) / ((1 − α)(γc + 1)), Leviathan et al. Thm 3.8, with α = α token and c = drafter forward / target forward, the measured seconds of the SWI.</dd>
<dt>draft share</dt><dd>share of step time spent drafting (the rest: verify, accept, commit).</dd>
<dt>lossless</dt><dd>at T = 0 every output must equal the autoregressive output token for token, on every prompt and repeat; the cell says “greedy identity measured: k/n prompts identical to autoregressive”. At T &gt; 0 losslessness is a statement about distributions, which a handful of prompts cannot check: the cell says “not checked in this run” and names the acceptor that ran and its precondition (the suite's chi-square tests, tests/loop/test_lossless_sampling.cpp, cover the acceptors, not every composition), unless the run was given --check-lossless N: then a registered method claiming losslessness shows check::check_lossless's verdict on the first two tokens of the first prompt over N runs, with its planted lossy control.</dd>
</dl>
)";
}

// ---- the page ----------------------------------------------------------------------------------------

inline std::string report_html(const Results& r) {
    std::string s = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                    "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
                    "<title>specdec benchmark</title>\n" + style() + "</head>\n<body>\n<main>\n";
    s += "<h1>specdec benchmark</h1>\n<p class=\"lead\">Every method side by side: the same prompts, the same output "
         "length, the same machine, with losslessness checked.</p>\n";
    if (!r.target_label.empty())
        s += "<p class=\"lead\"><b>Target: " + escape(r.target_label) +
             "</b>. Acceptance is the demo pair's; walltimes are those of a model of this cost (docs/widening.md).</p>\n";
    s += setup_section(r);

    s += "<h2>Results</h2>\n" + table_section(r);

    s += "<h2>Walltime speedup over autoregressive</h2>\n<p class=\"lead\">Median over repeats; whiskers span the "
         "fastest and slowest repeat.</p>\n<div class=\"card\">" + speedup_chart(r) + "</div>\n";

    s += "<h2>Acceptance per draft position</h2>\n<p class=\"lead\">Of the steps whose draft reached position d, the "
         "share that accepted at least d drafts.</p>\n<div class=\"charts\">";
    for (float t : r.temperatures) s += "<div class=\"card\">" + acceptance_chart(r, t) + "</div>";
    s += "</div>\n";

    s += "<h2>Tokens per target forward</h2>\n<p class=\"lead\">How often a step yielded k tokens (accepted drafts + "
         "the target's own token); tau is the mean.</p>\n<div class=\"legend\">";
    for (std::size_t ti = 0; ti < r.temperatures.size(); ++ti)
        s += strf("<span class=\"key\"><span class=\"swatch\" style=\"background:%s\"></span>", temperature_color(ti)) +
             escape(temperature_label(r.temperatures[ti])) + "</span>";
    s += "</div>\n<div class=\"charts\">";
    for (const std::string& name : method_names(r))
        if (const MethodResult* m = find_row(r, name, r.temperatures.front()); m && !is_baseline(*m))
            s += "<div class=\"card\">" + tau_histogram(r, name) + "</div>";
    s += "</div>\n";

    s += "<h2>Case studies: who wrote which token</h2>\n<p class=\"lead\">Each generated token coloured by how it was "
         "produced: an accepted draft at depth d, or the target's own token after the last accepted draft (as in "
         "GLIDE's case studies). Hover a token for its origin.</p>\n";
    s += case_studies_section(r);

    s += "<h2>Definitions</h2>\n" + notes_section();
    s += "</main>\n</body>\n</html>\n";
    return s;
}

}  // namespace specdec::bench::html

namespace specdec::bench {
using html::report_html;
}  // namespace specdec::bench
