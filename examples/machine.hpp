// examples/machine.hpp — the machine's name, printed beside every figure a program reports.
#pragma once

#include <algorithm>
#include <fstream>
#include <string>
#include <thread>

namespace example {

/// "AMD EPYC 9B14, 2 cores": the CPU's model name (/proc/cpuinfo) and its hardware threads, for naming the
/// machine beside every figure a program reports. A name without a model number (some cloud VMs report
/// only "AMD EPYC") gets the family and model, which tell the generations apart (25 / 17: Zen 4).
inline std::string machine_name() {
    std::ifstream in("/proc/cpuinfo");
    std::string cpu, family, model;
    const auto value = [](const std::string& line) { return line.substr(std::min(line.size(), line.find(':') + 2)); };
    for (std::string line; std::getline(in, line) && !line.empty();) {  // the first processor's block
        if (line.rfind("model name", 0) == 0) cpu = value(line);
        else if (line.rfind("cpu family", 0) == 0) family = value(line);
        else if (line.rfind("model\t", 0) == 0) model = value(line);
    }
    if (cpu.empty()) cpu = "unknown CPU";
    else if (cpu.find_first_of("0123456789") == std::string::npos && !family.empty() && !model.empty())
        cpu += " (family " + family + ", model " + model + ")";
    return cpu + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores";
}

}  // namespace example
