// specdec/detail/model/memory_budget.hpp — how much memory a model may still take, asked before it packs its matrices.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "../core/error.hpp"

// Why: a model's packed matrices are its one large allocation (13 GB for the 7B-cost widened target in
// bf16). Where memory is short, Linux does not fail the allocation: it overcommits, and the OOM killer
// ends the process (or another one) while the pages are written. Asking first turns that into an error
// that names the sizes. Unknown (no /proc): no check, as before.

namespace specdec::detail {

/// The headroom under a cgroup v2 limit, from the cgroup's folder: memory.max less the working set, which
/// is memory.current less the page cache the kernel reclaims first (memory.stat's inactive_file, as
/// Kubernetes counts it: a model file just read would otherwise count as used). nullopt without a limit
/// (memory.max "max", or no such files).
inline std::optional<std::int64_t> cgroup_headroom(const std::string& dir) {
    const auto read_number = [](const std::string& path) -> std::optional<std::int64_t> {
        std::ifstream in(path);
        std::int64_t v = 0;
        if (in >> v) return v;
        return std::nullopt;  // absent, or "max"
    };
    const std::optional<std::int64_t> max = read_number(dir + "/memory.max"), current = read_number(dir + "/memory.current");
    if (!max || !current) return std::nullopt;
    std::int64_t inactive_file = 0;
    std::ifstream stat(dir + "/memory.stat");
    for (std::string key; stat >> key;) {
        std::int64_t v = 0;
        if (!(stat >> v)) break;
        if (key == "inactive_file") inactive_file = v;
    }
    const std::int64_t used = std::max<std::int64_t>(0, *current - inactive_file);
    return *max > used ? *max - used : 0;
}

/// Bytes a new allocation may take: MemAvailable of /proc/meminfo, lowered to this process's cgroup v2
/// headroom (a container's limit, which /proc/meminfo does not show). nullopt where neither is known.
inline std::optional<std::int64_t> available_memory_bytes() {
    std::optional<std::int64_t> available;
    {
        std::ifstream meminfo("/proc/meminfo");
        for (std::string key; meminfo >> key;) {
            std::int64_t kib = 0;
            if (!(meminfo >> kib)) break;
            if (key == "MemAvailable:") {
                available = kib * 1024;
                break;
            }
            meminfo.ignore(1 << 10, '\n');
        }
    }
    std::ifstream self("/proc/self/cgroup");  // cgroup v2: the line "0::<path>", under /sys/fs/cgroup
    for (std::string line; std::getline(self, line);)
        if (line.rfind("0::", 0) == 0) {
            if (const std::optional<std::int64_t> headroom = cgroup_headroom("/sys/fs/cgroup" + line.substr(3)))
                available = available ? std::min(*available, *headroom) : *headroom;
            break;
        }
    return available;
}

/// "13.4 GB": bytes in decimal gigabytes, one decimal.
inline std::string gigabytes(std::int64_t bytes) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f GB", static_cast<double>(bytes) / 1e9);
    return text;
}

/// Throws `[specdec.<where>]` when `need` bytes (for `what`) exceed `available` (when it is known),
/// ending with `hint`.
inline void require_memory(std::int64_t need, std::optional<std::int64_t> available, const char* where, const std::string& what,
                           const std::string& hint) {
    require(!available || need <= *available, where, [&] {
        return what + " need " + gigabytes(need) + ", and " + gigabytes(*available) +
               " of memory is available (MemAvailable in /proc/meminfo, or this cgroup's memory.max headroom): "
               "refused before allocating; hint: " + hint;
    });
}

}  // namespace specdec::detail
