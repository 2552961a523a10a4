#!/usr/bin/env python3
"""Writes tests/data/hf_golden/: a small random LlamaForCausalLM saved by HF transformers, and its logits.

tests/io/test_hf_golden.cpp loads the folder with specdec::load_checkpoint and compares its logits
with the ones recorded here; it is reported as skipped while the folder does not exist.

Both spellings of RoPE in config.json stay covered: transformers 5 writes
"rope_parameters": {"rope_theta", "rope_type", "factor", ...}, transformers 4.x wrote "rope_theta" and
"rope_scaling": {"rope_type", "factor", ...}. This script writes the folder exactly as the installed
transformers saves it (the committed one is from transformers 5.17.0), and the test's second case
copies it to a temporary folder with config.json rewritten into the other spelling (the same numbers)
and checks the same logits. So rerunning with either major version keeps both spellings tested.

The model exercises what real checkpoints carry: sharded safetensors (max_shard_size), bfloat16
weights, rope_scaling of rope_type llama3, grouped-query attention, an untied lm_head, and a head_dim
that is not hidden_size / num_attention_heads. The logits are those of the saved bfloat16 weights
widened to float32 and run in float32 with eager attention, as specdec's CpuModel runs them.

Run where PyTorch and transformers (>= 4.45, for head_dim and rope_type; 5.x included) are installed,
from the repository root:

    python3 scripts/make_hf_golden.py            # writes tests/data/hf_golden/ (about 0.5 MB)

Everything is seeded: rerunning gives the same files for the same transformers and torch versions.
"""
import json
import os
import shutil
import sys

import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "hf_golden")

# A few prompts of token ids (no tokenizer: the test feeds ids), lengths 1, 7 and 19.
PROMPTS = [
    [1],
    [1, 17, 200, 3, 99, 45, 250],
    [1, 5, 9, 14, 20, 27, 35, 44, 54, 65, 77, 90, 104, 119, 135, 152, 170, 189, 209],
]


def randomize_norms(model) -> None:
    """Norm gains 1 + N(0, 0.2), so that a loader reading them wrong shows (HF initialises them to 1)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.2 * torch.randn_like(p))


def float32_logits(model_class, folder, prompts, config=None):
    """The folder's bf16 weights widened to float32 (exactly), run in float32 with eager attention, as
    specdec's CpuModel runs them: per prompt, (T, V) rows of logits as lists of floats."""
    extra = {} if config is None else {"config": config}
    reference = model_class.from_pretrained(folder, torch_dtype=torch.float32, attn_implementation="eager", **extra)
    reference.eval()
    logits = []
    with torch.no_grad():
        for ids in prompts:
            out = reference(torch.tensor([ids])).logits[0].to(torch.float32)  # (T, V)
            logits.append([[float(x) for x in row] for row in out.tolist()])
    return logits


def main() -> int:
    torch.manual_seed(2026)
    config = LlamaConfig(
        vocab_size=256,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,        # GQA
        head_dim=32,                  # != 64 / 4
        max_position_embeddings=128,
        rope_theta=500000.0,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 32},
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,    # an lm_head of its own
        initializer_range=0.15,       # peaky enough that the logits differ by more than rounding
        attention_bias=False,
        mlp_bias=False,
        hidden_act="silu",
    )
    model = LlamaForCausalLM(config)
    if model.model.layers[0].self_attn.q_proj.weight.shape != (4 * 32, 64):
        sys.exit("this transformers (%s) ignores head_dim; use >= 4.45" % transformers.__version__)
    randomize_norms(model)
    model = model.to(torch.bfloat16)

    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    model.save_pretrained(OUT, safe_serialization=True, max_shard_size="100KB")
    with open(os.path.join(OUT, "config.json")) as f:
        saved = json.load(f)
    if "rope_parameters" not in saved and "rope_scaling" not in saved:
        sys.exit("config.json holds neither rope_parameters nor rope_scaling: the test cannot respell it")
    spelling = "rope_parameters (5.x)" if "rope_parameters" in saved else "rope_theta + rope_scaling (4.x)"
    index = os.path.join(OUT, "model.safetensors.index.json")
    if not os.path.exists(index):
        sys.exit("save_pretrained wrote no index: the checkpoint was not sharded")

    logits = float32_logits(LlamaForCausalLM, OUT, PROMPTS)
    with open(os.path.join(OUT, "logits.json"), "w") as f:
        json.dump({
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "dtype": "float32 compute over bfloat16 weights, eager attention",
            "prompts": PROMPTS,
            "logits": logits,  # per prompt: (T, V) rows, float32 values
        }, f)
    total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
    print("wrote %s: %d files, %d bytes; config.json spells RoPE as %s (the test derives the other)"
          % (OUT, len(os.listdir(OUT)), total, spelling))
    return 0


if __name__ == "__main__":
    sys.exit(main())
