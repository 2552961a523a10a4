#!/usr/bin/env python3
"""Writes tests/data/mistral_golden/: a small random MistralForCausalLM saved by HF transformers, with a
sliding window, and its logits.

Mistral 7B v0.1 attends to the last `sliding_window` positions (4096) only: transformers masks key k from
query q unless k > q - sliding_window (masking_utils.py, sliding_window_overlay). specdec reads the window
and caps the model's context at it, where that is full attention exactly (docs/formats.md).
tests/io/test_mistral_golden.cpp loads this folder with specdec::load_checkpoint and checks both halves of
that claim against transformers itself:

- prompts no longer than the window: specdec's logits equal transformers' (the cap loses nothing);
- one prompt longer than the window: its first `sliding_window` rows equal full attention's, and the
  rows after differ from it (past the window the mask binds, so running there unwindowed would be wrong:
  the cap is needed).

The logits are those of the saved bfloat16 weights widened to float32 and run in float32 with eager
attention, as specdec's CpuModel runs them. Run where PyTorch and transformers are installed (the GPU
machine has both), from the repository root:

    python3 scripts/make_mistral_golden.py       # writes tests/data/mistral_golden/ (about 100 kB)

Everything is seeded: rerunning gives the same files for the same transformers and torch versions.
"""
import json
import os
import shutil
import sys

import torch
import transformers
from transformers import MistralConfig, MistralForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_hf_golden import float32_logits, randomize_norms  # noqa: E402  (the same random norms and float32 run)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "mistral_golden")
WINDOW = 12

# Token ids (no tokenizer: the test feeds ids): two prompts within the window, one of 20 past it.
PROMPTS = [
    [1, 17, 200, 3, 99],
    [1, 5, 9, 14, 20, 27, 35, 44, 54, 65, 77, 90],
    [1, 5, 9, 14, 20, 27, 35, 44, 54, 65, 77, 90, 104, 119, 135, 152, 170, 189, 209, 230],
]


def main() -> int:
    torch.manual_seed(2026)
    config = MistralConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,        # GQA
        max_position_embeddings=64,
        sliding_window=WINDOW,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        initializer_range=0.15,       # peaky enough that the logits differ by more than rounding
        hidden_act="silu",
    )
    model = MistralForCausalLM(config)
    randomize_norms(model)
    model = model.to(torch.bfloat16)

    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    model.save_pretrained(OUT, safe_serialization=True)
    with open(os.path.join(OUT, "config.json")) as f:
        saved = json.load(f)
    if saved.get("sliding_window") != WINDOW:
        sys.exit("config.json says sliding_window %r, expected %d" % (saved.get("sliding_window"), WINDOW))

    logits = float32_logits(MistralForCausalLM, OUT, PROMPTS)
    # The window binds past it, or the data tests nothing: the same weights without the window differ there.
    config_full = MistralConfig.from_pretrained(OUT)
    config_full.sliding_window = None
    full = torch.tensor(float32_logits(MistralForCausalLM, OUT, PROMPTS[-1:], config=config_full)[0])
    windowed = torch.tensor(logits[-1])
    if not torch.allclose(full[:WINDOW], windowed[:WINDOW], atol=1e-4):
        sys.exit("the rows within the window differ from full attention's: this transformers masks otherwise")
    if torch.allclose(full[WINDOW:], windowed[WINDOW:], atol=1e-3):
        sys.exit("the rows past the window equal full attention's: the window did not bind")
    with open(os.path.join(OUT, "logits.json"), "w") as f:
        json.dump({
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "dtype": "float32 compute over bfloat16 weights, eager attention",
            "sliding_window": WINDOW,
            "prompts": PROMPTS,
            "logits": logits,  # per prompt: (T, V) rows, float32 values, with the window
        }, f)
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print("wrote %s: %d files, %d bytes" % (OUT, len(os.listdir(OUT)), total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
