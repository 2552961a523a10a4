// specdec/detail/io/train_state.hpp — a training run between two steps, in one file: the parameters,
// AdamW's moments and a JSON record of the run, so that an interrupted run continues bit for bit.
// SPDX-License-Identifier: MIT
#pragma once

// Everything else a step depends on is a function of the step number (the batch: random_windows'
// counter-based draw; the learning rate: the schedule), so parameters, moments, AdamW's step count
// and the caller's record (curves, timings) are the whole state. Tensors are float32 whatever the
// model ships in: a bfloat16 round trip would change the next step's numbers.
//
// The file is written to "<path>.tmp" and renamed over the previous one (write_safetensors), so an
// interrupted write (Ctrl-C, a crash) leaves the last complete state in place.
//
// Works on any tensor set with a for_each_tensor(tensors, config, f) (a Llama's Weights, a GLIDE
// drafter's GlideWeights), as clipping and AdamW do.

#include <filesystem>
#include <string>
#include <vector>

#include "../core/error.hpp"
#include "json.hpp"
#include "safetensors.hpp"

namespace specdec {

/// Which tensors of a state file hold what: "<role>/<HF name>".
constexpr const char* kStateParams = "params";
constexpr const char* kStateFirstMoment = "adamw.m";
constexpr const char* kStateSecondMoment = "adamw.v";

/// Writes params, AdamW's moments m and v (all shaped by `cfg`) and `record` (the caller's: step,
/// curves, ...) to `path`, replacing the previous state only once the new one is complete.
template <class Tensors, class Cfg>
void save_train_state(const std::filesystem::path& path, const Cfg& cfg, const Tensors& params, const Tensors& m,
                      const Tensors& v, const json::Value& record) {
    std::vector<TensorToWrite> tensors;
    const auto add = [&](const char* role, const Tensors& set) {
        for_each_tensor(set, cfg, [&](const std::string& name, const std::vector<float>& t, const auto&) {
            tensors.push_back({std::string(role) + "/" + name, DType::kF32, {static_cast<std::int64_t>(t.size())},
                               std::as_bytes(std::span<const float>(t))});
        });
    };
    add(kStateParams, params);
    add(kStateFirstMoment, m);
    add(kStateSecondMoment, v);
    if (!path.parent_path().empty()) std::filesystem::create_directories(path.parent_path());
    write_safetensors(path, tensors, {{"format", "specdec-train-state"}, {"record", json::dump(record)}});
}

/// Reads a state written by save_train_state into params, m and v, which must already be shaped by
/// `cfg` (a freshly built model and optimizer); returns the record. Every tensor must be there with
/// the size the config implies.
template <class Tensors, class Cfg>
json::Value load_train_state(const std::filesystem::path& path, const Cfg& cfg, Tensors& params, Tensors& m,
                             Tensors& v) {
    const SafetensorsFile file = SafetensorsFile::open(path);
    const auto format = file.metadata().find("format");
    detail::require(format != file.metadata().end() && format->second == "specdec-train-state", "train_state", [&] {
        return path.string() + ": not a training state (no format \"specdec-train-state\" in its metadata)";
    });
    const auto read = [&](const char* role, Tensors& set) {
        for_each_tensor(set, cfg, [&](const std::string& name, std::vector<float>& t, const auto&) {
            const TensorInfo& info = file.get(std::string(role) + "/" + name);
            detail::require(info.numel == static_cast<std::int64_t>(t.size()), "train_state", [&] {
                return path.string() + ": tensor '" + info.name + "' has " + std::to_string(info.numel) +
                       " values, the config implies " + std::to_string(t.size()) + " (a state of another model?)";
            });
            file.read_floats(info, t);
        });
    };
    read(kStateParams, params);
    read(kStateFirstMoment, m);
    read(kStateSecondMoment, v);
    const auto record = file.metadata().find("record");
    detail::require(record != file.metadata().end(), "train_state",
                    [&] { return path.string() + ": no record in its metadata"; });
    return json::parse(record->second, path.string() + " (record)");
}

}  // namespace specdec
