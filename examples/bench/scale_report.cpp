// scale_report — one picture and one table from specdec_bench runs of the same methods on targets of
// different cost (scripts/scale_experiment.sh; docs/widening.md, docs/performance.md):
//
//   scale_report OUT_DIR RUN_DIR...      each RUN_DIR holds a table.json written by specdec_bench
//
// writes OUT_DIR/scale.svg (walltime speedup against the target's matrix parameters per token, one line per
// method, a panel per temperature), OUT_DIR/scale.md (the same numbers as a table) and OUT_DIR/scale.html.
// A run on a widened target carries its label ("cost-scaled (widened demo target: same outputs, 1B cost)");
// the picture and the table repeat it, since acceptance there is the 14M demo pair's, only the cost is
// the bigger model's.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "specdec.hpp"

using namespace specdec;
namespace fs = std::filesystem;

namespace {

struct Cell {
    double tau = NAN, nodes = NAN, speedup = NAN;
    std::string lossless;
};

struct Run {
    std::string dir, label, machine;  // label: the cost-scaled label, or "as trained" (no --target-scale)
    bool scaled = false;
    double params = 0;                // the target's matrix parameters per token
    int threads = 0;
    std::map<std::pair<std::string, double>, Cell> cells;  // (method, temperature)
};

double number_or_nan(const json::Value* v) { return v != nullptr && v->is_number() ? v->as_double() : NAN; }

Run read_run(const fs::path& dir) {
    const fs::path file = dir / "table.json";
    const json::Value root = json::parse(detail::read_text_file(file, "scale_report"), file.string());
    Run r;
    r.dir = dir.string();
    r.machine = root.at("machine").as_string();
    r.threads = static_cast<int>(root.at("threads").as_int());
    const json::Value* label = root.find("target_label");
    r.scaled = label != nullptr && label->is_string();
    r.label = r.scaled ? label->as_string() : "as trained";
    for (const json::Value& m : root.at("models").as_array())
        if (m.at("name").as_string() == "target") r.params = m.at("matrix_params").as_double();
    detail::require(r.params > 0, "scale_report", [&] { return file.string() + ": no model named 'target' in \"models\""; });
    for (const json::Value& row : root.at("rows").as_array()) {
        Cell c;
        c.tau = number_or_nan(row.find("tau"));
        c.nodes = number_or_nan(row.find("nodes_per_step"));
        c.speedup = number_or_nan(row.at("speedup").find("median"));
        c.lossless = row.at("lossless").as_string();
        r.cells[{row.at("method").as_string(), row.at("temperature").as_double()}] = c;
    }
    return r;
}

std::string fmt(const char* f, double v) {
    if (!std::isfinite(v)) return "-";
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

std::string params_text(double p) { return p >= 1e9 ? fmt("%.2fB", p / 1e9) : fmt("%.0fM", p / 1e6); }

// Eleven methods need more than the usual eight colours; the lossy method is drawn dashed as well.
const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                               "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#000000", "#aec7e8"};

/// One panel per temperature; x is log10 of the target's parameters, so 14M → 110M → 1B are even steps.
std::string chart(const std::vector<Run>& runs, const std::vector<std::string>& methods, const std::vector<double>& temps) {
    const int panel_w = 420, panel_h = 330, left = 60, top = 56, legend_h = 22 * static_cast<int>((methods.size() + 1) / 2) + 20;
    const int width = left + static_cast<int>(temps.size()) * (panel_w + 40), height = top + panel_h + 60 + legend_h;
    double y_hi = 1.0;
    for (const Run& r : runs)
        for (const auto& [key, c] : r.cells)
            if (std::isfinite(c.speedup)) y_hi = std::max(y_hi, c.speedup);
    const detail::Ticks yt = detail::nice_ticks(0.0, y_hi, 6);
    const double x_lo = std::log10(runs.front().params) - 0.15, x_hi = std::log10(runs.back().params) + 0.15;
    std::string s;
    char buf[512];
    std::snprintf(buf, sizeof buf,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
                  "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                  width, height, width, height);
    s += buf;
    s += "<text x=\"" + std::to_string(left) + "\" y=\"20\" font-size=\"15\" font-weight=\"bold\">Walltime speedup over plain "
         "decoding of the same target, by the target's cost</text>\n";
    s += "<text x=\"" + std::to_string(left) + "\" y=\"38\" fill=\"#555\">" +
         detail::xml_escape("a simulation device: the larger targets are the 14M demo target widened (same outputs, a bigger model's cost); " +
                            runs.front().machine + ", " + std::to_string(runs.front().threads) + " threads") +
         "</text>\n";
    for (std::size_t p = 0; p < temps.size(); ++p) {
        const double x0 = left + static_cast<double>(p) * (panel_w + 40), x1 = x0 + panel_w, y0 = top + 10.0, y1 = top + 10.0 + panel_h;
        auto px = [&](double params) { return x0 + (std::log10(params) - x_lo) / (x_hi - x_lo) * (x1 - x0); };
        auto py = [&](double v) { return y1 - (v - yt.lo) / (yt.hi - yt.lo) * (y1 - y0); };
        std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" font-weight=\"bold\">T = %g</text>\n", x0, y0 - 4, temps[p]);
        s += buf;
        std::snprintf(buf, sizeof buf, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" stroke=\"#999\"/>\n",
                      x0, y0, x1 - x0, y1 - y0);
        s += buf;
        for (double v = yt.lo; v <= yt.hi + 1e-9; v += yt.step) {
            std::snprintf(buf, sizeof buf,
                          "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#eee\"/><text x=\"%.1f\" y=\"%.1f\" "
                          "text-anchor=\"end\">%s</text>\n",
                          x0, py(v), x1, py(v), x0 - 5, py(v) + 4, detail::number(v, yt.step).c_str());
            s += buf;
        }
        std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#333\" stroke-dasharray=\"4 3\"/>\n",
                      x0, py(1.0), x1, py(1.0));
        s += buf;
        for (const Run& r : runs) {
            std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", px(r.params), y1 + 16,
                          (params_text(r.params) + (r.scaled ? " (cost)" : "")).c_str());
            s += buf;
        }
        if (p == 0) {
            std::snprintf(buf, sizeof buf,
                          "<text transform=\"translate(%.1f,%.1f) rotate(-90)\" text-anchor=\"middle\">speedup (×)</text>\n",
                          x0 - 42, (y0 + y1) / 2);
            s += buf;
        }
        std::snprintf(buf, sizeof buf, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">target matrix parameters per token</text>\n",
                      (x0 + x1) / 2, y1 + 34);
        s += buf;
        for (std::size_t m = 0; m < methods.size(); ++m) {
            std::string points, dots;
            bool lossy = false;
            for (const Run& r : runs) {
                const auto it = r.cells.find({methods[m], temps[p]});
                if (it == r.cells.end() || !std::isfinite(it->second.speedup)) continue;
                lossy = lossy || it->second.lossless.rfind("LOSSY", 0) == 0;
                std::snprintf(buf, sizeof buf, "%.1f,%.1f ", px(r.params), py(it->second.speedup));
                points += buf;
                std::snprintf(buf, sizeof buf, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n", px(r.params),
                              py(it->second.speedup), kColors[m % std::size(kColors)]);
                dots += buf;
            }
            const char* color = kColors[m % std::size(kColors)];
            s += "<polyline fill=\"none\" stroke-width=\"2\" stroke=\"" + std::string(color) + "\"" +
                 (lossy ? " stroke-dasharray=\"6 3\"" : "") + " points=\"" + points + "\"/>\n" + dots;
        }
    }
    const double ly = top + panel_h + 70;
    for (std::size_t m = 0; m < methods.size(); ++m) {
        const double lx = left + static_cast<double>(m % 2) * 430, y = ly + 22.0 * static_cast<double>(m / 2);
        std::snprintf(buf, sizeof buf, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke-width=\"2\" stroke=\"%s\"/>",
                      lx, y - 4, lx + 26, y - 4, kColors[m % std::size(kColors)]);
        s += buf;
        const bool lossy = std::any_of(runs.begin(), runs.end(), [&](const Run& r) {
            return std::any_of(r.cells.begin(), r.cells.end(),
                               [&](const auto& kv) { return kv.first.first == methods[m] && kv.second.lossless.rfind("LOSSY", 0) == 0; });
        });
        s += "<text x=\"" + fmt("%.1f", lx + 32) + "\" y=\"" + fmt("%.1f", y) + "\">" +
             detail::xml_escape(methods[m] + (lossy ? " (lossy at T > 0, dashed)" : "")) + "</text>\n";
    }
    return s + "</svg>\n";
}

std::string table(const std::vector<Run>& runs, const std::vector<std::string>& methods, const std::vector<double>& temps) {
    std::string s = "| method | T | tau | nodes per step |";  // then speedup (tau) per run: tau is the same law's at every cost
    for (const Run& r : runs) {
        s += " speedup (tau), ";
        s += params_text(r.params) + ": " + r.label;
        s += " |";
    }
    s += "\n| --- | --- | --- | --- |";
    for (std::size_t i = 0; i < runs.size(); ++i) s += " --- |";
    s += "\n";
    for (double t : temps)
        for (const std::string& m : methods) {
            const auto first = runs.front().cells.find({m, t});
            if (first == runs.front().cells.end()) continue;
            s += "| " + m + " | " + fmt("%g", t) + " | " + fmt("%.2f", first->second.tau) + " | " + fmt("%.1f", first->second.nodes) + " |";
            for (const Run& r : runs) {
                const auto it = r.cells.find({m, t});
                s += ' ';
                s += it == r.cells.end() ? std::string("-") : fmt("%.2f×", it->second.speedup) + fmt(" (%.2f)", it->second.tau);
                s += " |";
            }
            s += "\n";
        }
    return s;
}

}  // namespace

int main(int argc, char** argv) try {
    if (argc < 3) {
        std::fprintf(stderr, "usage: scale_report OUT_DIR RUN_DIR...   (each RUN_DIR holds specdec_bench's table.json)\n");
        return 2;
    }
    std::vector<Run> runs;
    for (int i = 2; i < argc; ++i) runs.push_back(read_run(argv[i]));
    std::sort(runs.begin(), runs.end(), [](const Run& a, const Run& b) { return a.params < b.params; });
    std::vector<std::string> methods;
    std::vector<double> temps;
    for (const Run& r : runs)
        for (const auto& [key, c] : r.cells) {
            if (key.first != "autoregressive" && std::find(methods.begin(), methods.end(), key.first) == methods.end())
                methods.push_back(key.first);
            if (std::find(temps.begin(), temps.end(), key.second) == temps.end()) temps.push_back(key.second);
        }
    std::sort(temps.begin(), temps.end());
    // Methods in the order of the first run's table.json rows, as specdec_bench printed them.
    std::vector<std::string> ordered;
    const json::Value root = json::parse(detail::read_text_file(fs::path(runs.front().dir) / "table.json", "scale_report"), "table.json");
    for (const json::Value& row : root.at("rows").as_array()) {
        const std::string& m = row.at("method").as_string();
        if (std::find(methods.begin(), methods.end(), m) != methods.end() && std::find(ordered.begin(), ordered.end(), m) == ordered.end())
            ordered.push_back(m);
    }
    for (const std::string& m : methods)
        if (std::find(ordered.begin(), ordered.end(), m) == ordered.end()) ordered.push_back(m);

    const fs::path out = argv[1];
    fs::create_directories(out);
    std::string md;  // each run's machine first: a speedup is this machine's
    for (const Run& r : runs) md += "- " + r.dir + ": " + r.machine + ", " + std::to_string(r.threads) + " threads\n";
    md += "\n" + table(runs, ordered, temps);
    const std::string svg = chart(runs, ordered, temps);
    std::ofstream(out / "scale.svg") << svg;
    std::ofstream(out / "scale.md") << md;
    std::ofstream(out / "scale.html") << "<!doctype html><meta charset=\"utf-8\"><title>specdec: speedup by target cost</title>\n"
                                      << "<body style=\"font-family:sans-serif;max-width:1000px\">\n"
                                      << svg << "<pre>" << detail::xml_escape(md) << "</pre>\n</body>\n";
    std::printf("%s\nwrote %s, %s, %s\n", md.c_str(), (out / "scale.svg").c_str(), (out / "scale.md").c_str(),
                (out / "scale.html").c_str());
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
}
