// specdec/detail/core/text_codec.hpp — one model's ids and text, as a drafter of another tokenizer needs them.
// SPDX-License-Identifier: MIT
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace specdec {

/// What TextBridgeProposer (policies/text_bridge.hpp) needs of a tokenizer: any tokenizer plugs in.
/// text_codec(const Tokenizer&) (io/tokenizer.hpp) makes one from a tokenizer.json.
struct TextCodec {
    std::function<std::string(std::span<const int>)> decode;  // the text of ids, special tokens left out
    std::function<std::vector<int>(std::string_view)> encode;  // the ids of a text as the model reads it
    std::function<bool(int)> special;                          // BOS, EOS and the like: no text
};

}  // namespace specdec
