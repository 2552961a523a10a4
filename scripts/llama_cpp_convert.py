#!/usr/bin/env python3
# scripts/llama_cpp_convert.py — runs llama.cpp's own convert_hf_to_gguf.py on an HF folder whose tokenizer
# is a GPT-2-style byte-level BPE (models/target), where Hugging Face `transformers` is not installed.
# Part of scripts/llama_cpp_interop.sh (outside CI):
#
#     python3 scripts/llama_cpp_convert.py LLAMA_CPP_SRC HF_DIR OUT.gguf [f32|bf16|f16|q8_0]   (default f32)
#
# Needs numpy and torch (Debian: python3-numpy python3-torch). Everything that decides the file's layout is
# llama.cpp's code, unchanged: LlamaModel (config -> llama.* keys, HF names -> GGUF names, q/k rows permuted
# by LlamaModel.permute for its RoPE), gguf-py's safetensors reader and GGUF writer, gguf.SpecialVocab
# (merges, bos/eos). Two things are substituted, because they need the `transformers` package:
#   - transformers.AutoTokenizer: the converter only reads the vocab, the added tokens and their flags from
#     it (get_vocab_base); the stand-in below reads them from tokenizer.json, as the fast tokenizer would.
#     encode/decode answer only for an added token spelled exactly (HF's answer for one: itself).
#   - get_vocab_base_pre: the converter names the pre-tokenizer by the sha256 of HF's ids for a test
#     string, looked up in a table of known models. A tokenizer trained here is in no table (the real
#     converter stops with "BPE pre-tokenizer was not recognized"), so the name is given: "gpt-2" when
#     tokenizer.json's pre-tokenizer is ByteLevel with GPT-2's regex, the name llama.cpp's table gives
#     GPT-2's tokenizer. Anything else is refused.
# transformers.AutoConfig raises, and the converter falls back to reading config.json itself.
# SPDX-License-Identifier: MIT
import json
import sys
import types
from pathlib import Path

if len(sys.argv) not in (4, 5):
    sys.exit("usage: llama_cpp_convert.py LLAMA_CPP_SRC HF_DIR OUT.gguf [f32|bf16|f16|q8_0]")
src, hf_dir, out = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
outtype = sys.argv[4] if len(sys.argv) == 5 else "f32"


class _AddedToken:
    def __init__(self, entry):
        self.content = entry["content"]
        self.special = bool(entry.get("special", False))
        self.normalized = bool(entry.get("normalized", not self.special))


class _TokenizerJson:
    """What get_vocab_base reads from a fast tokenizer, from tokenizer.json."""

    is_fast = True

    def __init__(self, path):
        with open(Path(path) / "tokenizer.json", encoding="utf-8") as f:
            self.json = json.load(f)
        added = self.json.get("added_tokens", [])
        self.vocab = dict(self.json["model"]["vocab"])
        self.vocab.update({a["content"]: a["id"] for a in added})
        self.added_tokens_decoder = {a["id"]: _AddedToken(a) for a in added}

    def get_vocab(self):
        return dict(self.vocab)

    def get_added_vocab(self):
        return {t.content: i for i, t in self.added_tokens_decoder.items()}

    def encode(self, text, add_special_tokens=True):
        for i, t in self.added_tokens_decoder.items():
            if t.content == text:
                return [i]
        raise NotImplementedError("this stand-in encodes added tokens only")

    def decode(self, ids):
        return "".join(self.added_tokens_decoder[i].content for i in ids)


class _AutoTokenizer:
    @staticmethod
    def from_pretrained(path, **_):
        return _TokenizerJson(path)


class _AutoConfig:
    @staticmethod
    def from_pretrained(*_, **__):
        raise OSError("transformers is not installed; reading config.json")


transformers = types.ModuleType("transformers")
transformers.AutoTokenizer = _AutoTokenizer
transformers.AutoConfig = _AutoConfig
sys.modules["transformers"] = transformers

# Debian bookworm's torch (1.13) predates the float8 dtypes (torch 2.1) that the converter names in its dtype
# tables; placeholders that no tensor of a bf16/f16/f32 checkpoint has stand in for them.
import torch  # noqa: E402

for _name in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"):
    if not hasattr(torch, _name):
        setattr(torch, _name, type(_name, (), {})())

sys.path.insert(0, str(src))
import convert_hf_to_gguf  # noqa: E402  (llama.cpp's converter; adds its gguf-py to sys.path)
from conversion.base import TextModel  # noqa: E402


def _pre_name(self, tokenizer):
    pre = tokenizer.json.get("pre_tokenizer") or {}
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True) and tokenizer.json["model"]["type"] == "BPE":
        return "gpt-2"
    raise NotImplementedError(f"pre-tokenizer {pre!r}: only ByteLevel with GPT-2's regex is named here")


TextModel.get_vocab_base_pre = _pre_name

sys.argv = ["convert_hf_to_gguf.py", str(hf_dir), "--outtype", outtype, "--outfile", out]
convert_hf_to_gguf.main()
