// specdec/detail/util/svg.hpp — a tiny dependency-free SVG line chart (loss curves, benchmark series).
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../core/error.hpp"

namespace specdec {

/// One named line: points (xs[i], ys[i]); non-finite points are skipped.
struct Series {
    std::string name;
    std::vector<double> xs;
    std::vector<double> ys;
};

struct ChartOptions {
    std::string x_label = "step";
    std::string y_label = "loss";
    int width = 720;   // pixels
    int height = 420;
};

namespace detail {

/// Escapes the five XML special characters of user text (titles, series names); also valid for HTML
/// element content and attribute values (the benchmark report uses it).
inline std::string xml_escape(std::string_view s) {
    std::string out;
    for (char c : s) {
        switch (c) {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&#39;"; break;  // not &apos;, which HTML 4 lacks
            default: out += c;
        }
    }
    return out;
}

/// Tick positions covering [lo, hi] at a "nice" spacing of 1, 2 or 5 · 10^k (Heckbert's
/// "Nice numbers for graph labels", Graphics Gems 1990), about `target` of them.
struct Ticks {
    double lo = 0, hi = 1, step = 0.2;
};
inline Ticks nice_ticks(double lo, double hi, int target = 6) {
    if (!(hi > lo)) {  // a flat or empty series: open a unit window around it
        const double mid = std::isfinite(lo) ? lo : 0.0;
        lo = mid - 0.5;
        hi = mid + 0.5;
    }
    const double raw = (hi - lo) / target;
    const double mag = std::pow(10.0, std::floor(std::log10(raw)));
    const double f = raw / mag;
    const double step = (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
    return {std::floor(lo / step) * step, std::ceil(hi / step) * step, step};
}

inline std::string number(double v, double step) {
    char buf[32];
    const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, std::abs(v) < step * 1e-9 ? 0.0 : v);
    return buf;
}

}  // namespace detail

/// The chart as an SVG document: title, axes with ticks and labels, one polyline per series, legend.
inline std::string svg_chart(const std::string& title, std::span<const Series> series, const ChartOptions& opt = {}) {
    double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
    for (const Series& s : series) {
        detail::require(s.xs.size() == s.ys.size(), "svg", [&] {
            return "series '" + s.name + "' has " + std::to_string(s.xs.size()) + " xs and " +
                   std::to_string(s.ys.size()) + " ys";
        });
        for (std::size_t i = 0; i < s.xs.size(); ++i) {
            if (!std::isfinite(s.xs[i]) || !std::isfinite(s.ys[i])) continue;
            x_lo = std::min(x_lo, s.xs[i]), x_hi = std::max(x_hi, s.xs[i]);
            y_lo = std::min(y_lo, s.ys[i]), y_hi = std::max(y_hi, s.ys[i]);
        }
    }
    const detail::Ticks xt = detail::nice_ticks(x_lo, x_hi), yt = detail::nice_ticks(y_lo, y_hi);
    const double left = 70, right = opt.width - 20.0, top = 40, bottom = opt.height - 50.0;
    auto px = [&](double x) { return left + (x - xt.lo) / (xt.hi - xt.lo) * (right - left); };
    auto py = [&](double y) { return bottom - (y - yt.lo) / (yt.hi - yt.lo) * (bottom - top); };
    static const char* const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e",
                                          "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"};

    std::string svg;
    char buf[256];
    auto add = [&](const char* fmt, auto... args) {
        if constexpr (sizeof...(args) == 0) {
            svg += fmt;  // nothing to format (and -Wformat-security forbids a non-literal format alone)
        } else {
            std::snprintf(buf, sizeof buf, fmt, args...);
            svg += buf;
        }
    };
    add("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
        "font-family=\"sans-serif\" "
        "font-size=\"12\">\n",
        opt.width, opt.height, opt.width, opt.height);
    add("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n");
    svg += "<text x=\"" + std::to_string(opt.width / 2) + "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" +
           detail::xml_escape(title) + "</text>\n";
    // Grid, ticks and tick labels.
    for (double x = xt.lo; x <= xt.hi + xt.step * 1e-9; x += xt.step) {
        add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", px(x), top, px(x), bottom);
        add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n", px(x), bottom + 16,
            detail::number(x, xt.step).c_str());
    }
    for (double y = yt.lo; y <= yt.hi + yt.step * 1e-9; y += yt.step) {
        add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#e0e0e0\"/>\n", left, py(y), right, py(y));
        add("<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n", left - 6, py(y) + 4,
            detail::number(y, yt.step).c_str());
    }
    // Axes and their labels.
    add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", left, bottom, right, bottom);
    add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"black\"/>\n", left, top, left, bottom);
    svg += "<text x=\"" + std::to_string((left + right) / 2) + "\" y=\"" + std::to_string(opt.height - 10) +
           "\" text-anchor=\"middle\">" + detail::xml_escape(opt.x_label) + "</text>\n";
    svg += "<text transform=\"translate(16," + std::to_string((top + bottom) / 2) +
           ") rotate(-90)\" text-anchor=\"middle\">" + detail::xml_escape(opt.y_label) + "</text>\n";
    // Lines and legend.
    for (std::size_t k = 0; k < series.size(); ++k) {
        const char* color = kColors[k % std::size(kColors)];
        svg += std::string("<polyline fill=\"none\" stroke-width=\"1.5\" stroke=\"") + color + "\" points=\"";
        for (std::size_t i = 0; i < series[k].xs.size(); ++i) {
            if (!std::isfinite(series[k].xs[i]) || !std::isfinite(series[k].ys[i])) continue;
            add("%.1f,%.1f ", px(series[k].xs[i]), py(series[k].ys[i]));
        }
        svg += "\"/>\n";
        const double ly = top + 10 + 18.0 * k;
        add("<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"3\"/>\n", right - 150,
            ly, right - 130, ly, color);
        add("<text x=\"%.1f\" y=\"%.1f\">", right - 124, ly + 4);
        svg += detail::xml_escape(series[k].name) + "</text>\n";
    }
    svg += "</svg>\n";
    return svg;
}

/// Writes svg_chart(...) to `path`; throws naming the path when it cannot.
inline void write_svg_chart(const std::string& path, const std::string& title, std::span<const Series> series,
                            const ChartOptions& opt = {}) {
    const std::string svg = svg_chart(title, series, opt);
    std::ofstream out(path);
    detail::require(out.good(), "svg", [&] { return "cannot create '" + path + "'"; });
    out << svg;
    detail::require(out.good(), "svg", [&] { return "writing '" + path + "' failed"; });
}

}  // namespace specdec
