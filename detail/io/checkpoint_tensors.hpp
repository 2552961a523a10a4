// specdec/detail/io/checkpoint_tensors.hpp — the tensors of a model folder: one model.safetensors, or the shards its index names.
// SPDX-License-Identifier: MIT
#pragma once

#include <algorithm>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "../core/compiled.hpp"
#include "../core/error.hpp"
#include "file_bytes.hpp"
#include "json.hpp"
#include "safetensors.hpp"

// HF's sharded layout (transformers' save_pretrained with max_shard_size): model.safetensors.index.json
// is {"metadata": {...}, "weight_map": {tensor name: shard file name}} beside the shards
// (model-00001-of-00002.safetensors, ...). The index is the folder's table of contents and must agree
// with the shards exactly: every tensor it names is in the shard it names, no tensor is in two
// shards, and a shard holds no tensor the index does not list (an index and shards from two different
// saves would otherwise mix silently). Shard names are plain file names in the folder: a path
// ("../x", "/etc/x", "sub/x") is refused, so an index cannot make the loader open files elsewhere.

namespace specdec {

/// The file names HF uses in a model folder.
inline constexpr std::string_view kSafetensorsName = "model.safetensors";
inline constexpr std::string_view kSafetensorsIndexName = "model.safetensors.index.json";

/// Every tensor of a checkpoint, whichever files hold them: a SafetensorsFile per shard (each
/// memory-mapped), looked up by name as one set. tensors() is sorted by name, like a single file's.
class CheckpointTensors {
public:
    /// One safetensors file.
    static CheckpointTensors open_file(const std::filesystem::path& path);
    /// model.safetensors.index.json and the shards it names, validated against each other.
    static CheckpointTensors open_index(const std::filesystem::path& index_path);
    /// The folder's model.safetensors if it has one (as transformers prefers), else its index.
    static CheckpointTensors open_folder(const std::filesystem::path& dir);

    /// The file errors name: the single file, or the index.
    const std::filesystem::path& path() const { return path_; }
    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    std::size_t shard_count() const { return shards_.size(); }
    const SafetensorsFile& shard(std::size_t i) const { return shards_[i]; }

    const TensorInfo* find(std::string_view name) const;
    /// Throws "missing tensor 'x'" naming the closest names, as SafetensorsFile::get does.
    const TensorInfo& get(std::string_view name) const;
    /// The shard file holding `tensor` (one of tensors()).
    const SafetensorsFile& file_of(const TensorInfo& tensor) const { return shards_[shard_of_[index_of(tensor)]]; }
    /// As SafetensorsFile::read_floats, from whichever shard holds `tensor`.
    void read_floats(const TensorInfo& tensor, std::span<float> out) const { file_of(tensor).read_floats(tensor, out); }

private:
    std::size_t index_of(const TensorInfo& tensor) const;

    std::filesystem::path path_;
    std::vector<SafetensorsFile> shards_;
    std::vector<TensorInfo> tensors_;     // sorted by name; bytes point into the shards' mappings
    std::vector<std::size_t> shard_of_;   // per tensor: its shard
};

#if SPECDEC_BODIES

namespace detail {

/// A shard name from an index: a plain file name in the model's folder, nothing that climbs out of it.
inline bool is_plain_file_name(std::string_view name) {
    return !name.empty() && name != "." && name != ".." && name.find('/') == std::string_view::npos &&
           name.find('\\') == std::string_view::npos && name.find('\0') == std::string_view::npos;
}

}  // namespace detail

SPECDEC_INLINE std::size_t CheckpointTensors::index_of(const TensorInfo& tensor) const {
    const bool ours = !tensors_.empty() && &tensor >= tensors_.data() && &tensor < tensors_.data() + tensors_.size();
    detail::require(ours, "checkpoint",
                    [&] { return path_.string() + ": tensor '" + tensor.name + "' does not belong to this checkpoint"; });
    return static_cast<std::size_t>(&tensor - tensors_.data());
}

SPECDEC_INLINE CheckpointTensors CheckpointTensors::open_file(const std::filesystem::path& path) {
    CheckpointTensors ck;
    ck.path_ = path;
    ck.shards_.push_back(SafetensorsFile::open(path));
    ck.tensors_ = ck.shards_[0].tensors();
    ck.shard_of_.assign(ck.tensors_.size(), 0);
    return ck;
}

SPECDEC_INLINE CheckpointTensors CheckpointTensors::open_folder(const std::filesystem::path& dir) {
    const std::filesystem::path single = dir / kSafetensorsName, index = dir / kSafetensorsIndexName;
    std::error_code ec;
    if (!std::filesystem::exists(single, ec) && !std::filesystem::exists(index, ec))
        // Older HF Llama folders hold only PyTorch's pickles: say so, rather than "model.safetensors: cannot open".
        for (const char* pickle : {"pytorch_model.bin", "pytorch_model.bin.index.json", "consolidated.00.pth"})
            if (std::filesystem::exists(dir / pickle, ec))
                detail::fail("checkpoint",
                             (dir / pickle).string() + ": PyTorch weights (a pickle), which specdec does not read "
                             "(unpickling can run code), and the folder has no model.safetensors; hint: convert them "
                             "where PyTorch is installed: AutoModelForCausalLM.from_pretrained(dir).save_pretrained(dir) "
                             "writes safetensors");
    if (std::filesystem::exists(single, ec) || !std::filesystem::exists(index, ec)) return open_file(single);
    return open_index(index);
}

SPECDEC_INLINE CheckpointTensors CheckpointTensors::open_index(const std::filesystem::path& index_path) {
    const std::string file = index_path.string();
    const auto fail = [&](const std::string& what) { detail::fail("checkpoint", file + ": " + what); };
    const std::string text = detail::read_text_file(index_path, "checkpoint");
    const json::Value root = json::parse(text, file);  // duplicate keys (a tensor listed twice) fail here
    if (!root.is_object()) fail("expected a JSON object, found " + detail::json_preview(root));
    const json::Value* map = root.find("weight_map");
    if (map == nullptr) fail("field 'weight_map' is missing");
    if (!map->is_object()) fail("field 'weight_map' is " + detail::json_preview(*map) + ", expected an object");

    // tensor name -> shard name, both as the index spells them; shard names deduplicated in order.
    std::vector<std::pair<std::string, std::size_t>> listed;
    std::vector<std::string> shard_names;
    for (const json::Member& m : map->as_object()) {
        if (!m.value.is_string())
            fail("weight_map['" + m.key + "'] is " + detail::json_preview(m.value) + ", expected a shard file name");
        const std::string& shard = m.value.as_string();
        if (!detail::is_plain_file_name(shard))
            fail("weight_map['" + m.key + "'] = '" + shard +
                 "' is not a file name in the model's folder (shards are plain names; no paths, no '..')");
        auto at = std::find(shard_names.begin(), shard_names.end(), shard);
        if (at == shard_names.end()) at = shard_names.insert(shard_names.end(), shard);
        listed.emplace_back(m.key, static_cast<std::size_t>(at - shard_names.begin()));
    }
    if (listed.empty()) fail("field 'weight_map' is empty: no tensors");

    CheckpointTensors ck;
    ck.path_ = index_path;
    const std::filesystem::path dir = index_path.parent_path();
    for (const std::string& shard : shard_names) {
        const std::filesystem::path p = dir / shard;
        std::error_code ec;
        if (!std::filesystem::is_regular_file(p, ec)) {
            const auto first = std::find_if(listed.begin(), listed.end(),
                                            [&](const auto& l) { return shard_names[l.second] == shard; });
            fail("weight_map names shard '" + shard + "' (for tensor '" + first->first + "'), but " + p.string() +
                 (std::filesystem::exists(p, ec) ? " is not a regular file" : " does not exist"));
        }
        ck.shards_.push_back(SafetensorsFile::open(p));
    }

    // Every shard's tensors, each checked against the index: listed, listed for this shard, once.
    std::sort(listed.begin(), listed.end());
    for (std::size_t s = 0; s < ck.shards_.size(); ++s)
        for (const TensorInfo& t : ck.shards_[s].tensors()) {
            const auto it = std::lower_bound(listed.begin(), listed.end(), t.name,
                                             [](const auto& l, const std::string& n) { return l.first < n; });
            if (it == listed.end() || it->first != t.name)
                fail("shard '" + shard_names[s] + "' holds tensor '" + t.name +
                     "', which weight_map does not list (index and shards from different saves?)");
            if (it->second != s && ck.shards_[it->second].find(t.name) != nullptr)
                fail("tensor '" + t.name + "' is in two shards, '" + shard_names[it->second] + "' and '" +
                     shard_names[s] + "' (weight_map names the first)");
            if (it->second != s)
                fail("tensor '" + t.name + "' is in shard '" + shard_names[s] + "', but weight_map puts it in '" +
                     shard_names[it->second] + "'");
            ck.tensors_.push_back(t);
            ck.shard_of_.push_back(s);
        }
    // Each listed tensor is in its shard: with the checks above, exactly when the counts agree, and a
    // tensor in two shards was refused above (it is listed for only one of them).
    if (ck.tensors_.size() != listed.size())
        for (const auto& [name, s] : listed)
            if (ck.shards_[s].find(name) == nullptr)
                fail("weight_map puts tensor '" + name + "' in shard '" + shard_names[s] + "', which has no such tensor (" +
                     std::to_string(ck.shards_[s].tensors().size()) + " tensors there)");

    std::vector<std::size_t> order(ck.tensors_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ck.tensors_[a].name < ck.tensors_[b].name; });
    std::vector<TensorInfo> sorted;
    std::vector<std::size_t> shard_of;
    for (std::size_t i : order) {
        sorted.push_back(std::move(ck.tensors_[i]));
        shard_of.push_back(ck.shard_of_[i]);
    }
    ck.tensors_ = std::move(sorted);
    ck.shard_of_ = std::move(shard_of);
    return ck;
}

SPECDEC_INLINE const TensorInfo* CheckpointTensors::find(std::string_view name) const {
    auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                               [](const TensorInfo& t, std::string_view n) { return t.name < n; });
    return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

SPECDEC_INLINE const TensorInfo& CheckpointTensors::get(std::string_view name) const {
    if (const TensorInfo* t = find(name)) return *t;
    const std::string hint = detail::closest_names(name, tensors_);
    detail::fail("checkpoint", path_.string() + ": missing tensor '" + std::string(name) + "' (" +
                                   std::to_string(tensors_.size()) + " tensors" + hint + ")");
}

#endif  // SPECDEC_BODIES

}  // namespace specdec
