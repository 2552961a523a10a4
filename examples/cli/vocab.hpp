// examples/cli/vocab.hpp — a model's tokenizer, whichever file it came from, behind the few calls the command makes.
// SPDX-License-Identifier: MIT
#pragma once

// An HF folder's tokenizer.json (Tokenizer: byte-level BPE or SentencePiece-style BPE) and llama2.c's
// tokenizer.bin or SentencePiece's tokenizer.model (Llama2cTokenizer) are two classes with different
// algorithms; the command needs only to encode a prompt, spell each generated token as bytes for
// streaming, name the kind, and compare two vocabularies. A model may come without a tokenizer (an HF
// folder with none of those files): then generate refuses it and inspect says so.

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "specdec.hpp"

namespace specdec::cli {

class Vocab {
    using fs_path = std::filesystem::path;

public:
    Vocab() = default;  // no tokenizer
    explicit Vocab(Tokenizer t) : hf_(std::move(t)) {}
    /// Where a SentencePiece-style vocabulary with scores came from.
    enum Source { kLlama2c, kSentencePieceModel };
    explicit Vocab(Llama2cTokenizer t, Source from = kLlama2c) : l2c_(std::move(t)), from_model_(from == kSentencePieceModel) {}
    /// A GGUF file's tokenizer is one of the two: "gpt2" a Tokenizer, "llama" a Llama2cTokenizer.
    explicit Vocab(const GgufTokenizer& t) : in_gguf_(true) {
        if (t.bpe()) hf_ = *t.bpe();
        if (t.spm()) l2c_ = *t.spm();
    }
    /// The tokenizer as a GGUF file stores it (save_gguf), or nullopt without one.
    std::optional<GgufTokenizer> to_gguf() const {
        if (hf_) return GgufTokenizer(*hf_);
        if (l2c_) return GgufTokenizer(*l2c_);
        return std::nullopt;
    }

    bool present() const { return hf_ || l2c_; }
    /// Whether it is a SentencePiece vocabulary with scores (llama2.c's tokenizer.bin holds such a one).
    bool has_scores() const { return l2c_.has_value(); }

    /// "byte-level BPE (tokenizer.json)", "SentencePiece BPE (tokenizer.bin, llama2.c)", ...
    std::string kind() const {
        if (in_gguf_ && hf_) return "byte-level BPE (GGUF tokenizer.ggml.model \"gpt2\")";
        if (in_gguf_ && l2c_) return "SentencePiece-style BPE with byte fallback (GGUF tokenizer.ggml.model \"llama\")";
        if (hf_) return hf_->kind() == TokenizerKind::kByteLevel ? "byte-level BPE (tokenizer.json)"
                                                                 : "SentencePiece-style BPE with byte fallback (tokenizer.json)";
        if (l2c_ && from_model_) return "SentencePiece BPE with byte fallback (tokenizer.model)";
        if (l2c_) return "SentencePiece-style BPE with byte fallback (llama2.c tokenizer.bin)";
        return "none";
    }
    /// Whether the tokenizer came from a GGUF file's tokenizer.ggml.* metadata (no file of its own).
    bool in_gguf() const { return in_gguf_; }

    /// Writes the tokenizer into the HF folder `dir` the way load_model reads it back: tokenizer.json
    /// for a tokenizer.json kind (a GGUF's "gpt2" one included), llama2.c's tokenizer.bin for a
    /// SentencePiece vocabulary with scores (a GGUF's "llama" one: tokenizer.json's BPE needs merges,
    /// which scores do not give). Returns the file written; nothing is written without a tokenizer.
    fs_path save_into(const fs_path& dir) const {
        if (hf_) {
            hf_->save(dir / "tokenizer.json");
            return dir / "tokenizer.json";
        }
        if (l2c_) {
            l2c_->save(dir / "tokenizer.bin");
            return dir / "tokenizer.bin";
        }
        return {};
    }

    int size() const { return hf_ ? hf_->vocab_size() : l2c_ ? l2c_->vocab_size() : 0; }

    /// The prompt's ids as the model was trained to see them: the post-processor's template (<s> for
    /// Llama-2) for tokenizer.json, BOS first for llama2.c (run.c's encode(text, 1, 0)).
    std::vector<int> encode_prompt(std::string_view text) const {
        if (hf_) return hf_->encode_with_special(text);
        if (l2c_) return l2c_->encode(text, true, false);
        return {};
    }

    /// The bytes `id` adds to the text after `prev` (SentencePiece's "▁" as a space, <0xNN> as its byte,
    /// control tokens as nothing). Concatenating pieces streams the continuation: decode() would drop the
    /// leading space SentencePiece strips from a whole text, which after a prompt is a real space.
    std::string piece(int prev, int id) const {
        if (id < 0 || id >= size()) return "<token " + std::to_string(id) + ">";  // a model padded past its tokenizer
        if (hf_) return hf_->is_special(id) ? std::string() : hf_->id_to_token(id);
        return l2c_->piece(prev, id);
    }

    /// The token's bytes as stored (special tokens spelt out), for tables and comparisons.
    const std::string& spelling(int id) const {
        static const std::string none;
        if (hf_) return hf_->id_to_token(id);
        if (l2c_) return l2c_->token(id);
        return none;
    }

    /// Control tokens: BOS/EOS for llama2.c, the added special tokens for tokenizer.json.
    std::vector<int> special_ids() const {
        std::vector<int> out;
        if (hf_)
            for (int id = 0; id < hf_->vocab_size(); ++id)
                if (hf_->is_special(id)) out.push_back(id);
        if (l2c_) out = {Llama2cTokenizer::kBos, Llama2cTokenizer::kEos};
        return out;
    }

    std::optional<int> bos() const {
        if (hf_) return hf_->bos_id();
        if (l2c_) return Llama2cTokenizer::kBos;
        return std::nullopt;
    }
    std::optional<int> eos() const {
        if (l2c_) return Llama2cTokenizer::kEos;
        if (hf_) {
            for (int id = 0; id < hf_->vocab_size(); ++id)  // eos_id() throws when there is no special token
                if (hf_->is_special(id)) return hf_->eos_id();
        }
        return std::nullopt;
    }

private:
    std::optional<Tokenizer> hf_;
    std::optional<Llama2cTokenizer> l2c_;
    bool in_gguf_ = false;
    bool from_model_ = false;  // l2c_ read from SentencePiece's tokenizer.model
};

}  // namespace specdec::cli
