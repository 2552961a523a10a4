// specdec/detail/util/progress.hpp — a progress line for long work, written to a stream the caller passes.
// SPDX-License-Identifier: MIT
#pragma once

// `step 120/2000 | loss 3.214 | 1.2k tok/s | 00:42 elapsed | ETA 11:03`
// On a terminal the line is redrawn in place with '\r' (at most ~10 times a second); into a file or a
// pipe (CI logs) it is written as a plain line every `plain_every_s` seconds, so logs stay short.
// Library code never prints on its own: the caller passes the stream (normally std::cerr) and says
// whether it is a terminal (stderr_is_terminal()).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <ostream>
#include <string>
#include <utility>

namespace specdec {

/// True when stderr is a terminal: pass it as ProgressOptions::terminal for a line on std::cerr.
inline bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

/// "00:42", "11:03", "1:02:07".
inline std::string format_duration(double seconds) {
    const long s = std::lround(std::max(0.0, seconds));
    char buf[32];
    if (s >= 3600)
        std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
    else
        std::snprintf(buf, sizeof buf, "%02ld:%02ld", s / 60, s % 60);
    return buf;
}

/// "950", "1.2k", "3.4M".
inline std::string format_rate(double per_second) {
    char buf[32];
    if (per_second >= 1e6)
        std::snprintf(buf, sizeof buf, "%.1fM", per_second / 1e6);
    else if (per_second >= 1e3)
        std::snprintf(buf, sizeof buf, "%.1fk", per_second / 1e3);
    else
        std::snprintf(buf, sizeof buf, "%.0f", per_second);
    return buf;
}

/// One snapshot of a run: what the line shows.
struct ProgressState {
    int step = 0;           // steps done
    int total_steps = 0;
    double loss = NAN;      // NaN: no loss column
    double units = 0;       // work done so far (tokens), for the rate
    double elapsed_s = 0;
    int first_step = 0;     // steps done before this run started (a resumed run): rate and ETA count from it
};

/// The line for a snapshot, without '\r' or newline.
inline std::string format_progress(const ProgressState& s, const std::string& unit = "tok") {
    std::string line = "step " + std::to_string(s.step) + "/" + std::to_string(s.total_steps);
    if (!std::isnan(s.loss)) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.3f", s.loss);
        line += std::string(" | loss ") + buf;
    }
    if (s.elapsed_s > 0) line += " | " + format_rate(s.units / s.elapsed_s) + " " + unit + "/s";
    line += " | " + format_duration(s.elapsed_s) + " elapsed";
    if (s.step > s.first_step && s.step < s.total_steps)
        line += " | ETA " + format_duration(s.elapsed_s / (s.step - s.first_step) * (s.total_steps - s.step));
    return line;
}

struct ProgressOptions {
    bool terminal = false;       // redraw one line with '\r' (else: plain lines)
    double plain_every_s = 10;   // seconds between plain lines
    std::string unit = "tok";    // what `units` counts
    int first_step = 0;          // steps done before this run (a resumed run); pass units done in this run
};

/// Writes the progress of a run of `total_steps` steps to `out`. Times come from a steady clock
/// started at construction; update_at takes the elapsed time explicitly (tests, replays).
class ProgressLine {
public:
    ProgressLine(std::ostream& out, int total_steps, ProgressOptions options = {})
        : out_(out), total_(total_steps), opt_(std::move(options)), start_(std::chrono::steady_clock::now()) {}

    /// After `step` steps, `units` units of work done in all, the latest loss (NaN for none).
    void update(int step, double loss, double units) { update_at(step, loss, units, seconds_since_start()); }

    void update_at(int step, double loss, double units, double elapsed_s) {
        last_ = {step, total_, loss, units, elapsed_s, opt_.first_step};
        const double interval = opt_.terminal ? 0.1 : opt_.plain_every_s;
        const bool first = written_at_ < 0;
        if (!first && elapsed_s - written_at_ < interval && step < total_) return;
        write();
    }

    /// The final state: on a terminal, ends the redrawn line; otherwise writes it if not yet written.
    void finish() {
        if (!opt_.terminal && last_written_step_ == last_.step && written_at_ >= 0) return;
        write();
        if (opt_.terminal) out_ << '\n' << std::flush;
    }

    /// Seconds since the line was created.
    double seconds_since_start() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    }

private:

    void write() {
        const std::string line = format_progress(last_, opt_.unit);
        if (opt_.terminal) {
            // Pad over the tail of a longer previous line.
            const std::size_t pad = width_ > line.size() ? width_ - line.size() : 0;
            out_ << '\r' << line << std::string(pad, ' ') << std::flush;
            width_ = line.size();
        } else {
            out_ << line << '\n' << std::flush;
        }
        written_at_ = last_.elapsed_s;
        last_written_step_ = last_.step;
    }

    std::ostream& out_;
    int total_;
    ProgressOptions opt_;
    std::chrono::steady_clock::time_point start_;
    ProgressState last_;
    double written_at_ = -1;  // elapsed time of the last write; < 0 before the first
    int last_written_step_ = -1;
    std::size_t width_ = 0;
};

}  // namespace specdec
