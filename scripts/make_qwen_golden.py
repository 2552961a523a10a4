#!/usr/bin/env python3
"""Golden logits of Qwen2 and Qwen3 models for tests/io/test_qwen.cpp.

Reads the model folders qwen2/ and qwen3/ (config.json + model.safetensors, written by
tests/data/qwen_golden/make_models.cpp) and the token sequence of inputs.json, runs each model in PyTorch
as transformers' modeling_qwen2.py and modeling_qwen3.py define it, and writes logits.json beside them:

    x      = embed_tokens[tokens]
    per layer:
      n    = input_layernorm(x)
      q, k, v = q_proj(n), k_proj(n), v_proj(n)           Qwen2: each with its bias (o_proj has none)
      q, k = q_norm(q per head), k_norm(k per head)        Qwen3: RMSNorm over head_dim, eps rms_norm_eps
      q, k = RoPE(q), RoPE(k)                              rotate_half, theta rope_theta, over head_dim
      x    = x + o_proj(causal grouped-query attention, scale 1/sqrt(head_dim))
      x    = x + down_proj(silu(gate_proj(m)) * up_proj(m)),  m = post_attention_layernorm(x)
    logits = lm_head(norm(x))                              lm_head = embed_tokens when tied

head_dim is config.json's where given; else hidden_size / num_attention_heads for Qwen2 and 128 for Qwen3
(Qwen3Config's default). use_sliding_window must be false: sliding_window and max_window_layers are then
inert (configuration_qwen2.py / configuration_qwen3.py set sliding_window to None). Everything runs in
float64 over the files' float32 weights, and every tensor of the file must be read.

Needs torch (Debian's python3-torch; safetensors is used where installed, else the reader of
make_eagle_golden.py); CI needs only the JSON it writes. Nothing here needs a GPU.

    /usr/bin/python3 scripts/make_qwen_golden.py tests/data/qwen_golden
"""
import json
import math
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_eagle_golden import load_file, rms_norm, rope  # noqa: E402  (the same safetensors reader and RoPE)


def forward(cfg, w, tokens):
    """float64 logits (T, V) of the model `cfg`, `w` on `tokens` at positions 0..T-1; marks read tensors."""
    kind = cfg["model_type"]
    assert kind in ("qwen2", "qwen3"), kind
    assert not cfg.get("use_sliding_window", False), "sliding-window attention is not modelled here"
    assert cfg.get("hidden_act", "silu") == "silu"
    assert not cfg.get("attention_bias", False), "Qwen3's attention_bias (o_proj too) is not modelled here"
    assert cfg.get("rope_scaling") is None
    read = set()

    def t(name):
        read.add(name)
        return w[name]

    D, H = cfg["hidden_size"], cfg["num_attention_heads"]
    Hkv = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or (128 if kind == "qwen3" else D // H)
    eps, theta = cfg["rms_norm_eps"], cfg["rope_theta"]
    T = len(tokens)
    positions = torch.arange(T)
    x = t("model.embed_tokens.weight")[torch.tensor(tokens)]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        n = rms_norm(x, t(p + "input_layernorm.weight"), eps)

        def project(name):
            y = n @ t(p + f"self_attn.{name}.weight").T
            return y + t(p + f"self_attn.{name}.bias") if kind == "qwen2" else y

        q = project("q_proj").view(T, H, hd)
        k = project("k_proj").view(T, Hkv, hd)
        v = project("v_proj").view(T, Hkv, hd)
        if kind == "qwen3":
            q = rms_norm(q, t(p + "self_attn.q_norm.weight"), eps)
            k = rms_norm(k, t(p + "self_attn.k_norm.weight"), eps)
        q, k = rope(q, positions, theta), rope(k, positions, theta)
        k = k.repeat_interleave(H // Hkv, dim=1)  # query head h reads kv head h // (H / Hkv)
        v = v.repeat_interleave(H // Hkv, dim=1)
        scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
        scores = scores.masked_fill(~causal, float("-inf"))
        att = torch.einsum("hts,shd->thd", scores.softmax(dim=-1), v).reshape(T, H * hd)
        x = x + att @ t(p + "self_attn.o_proj.weight").T
        m = rms_norm(x, t(p + "post_attention_layernorm.weight"), eps)
        gate, up = m @ t(p + "mlp.gate_proj.weight").T, m @ t(p + "mlp.up_proj.weight").T
        x = x + (torch.nn.functional.silu(gate) * up) @ t(p + "mlp.down_proj.weight").T
    x = rms_norm(x, t("model.norm.weight"), eps)
    head = t("model.embed_tokens.weight") if cfg.get("tie_word_embeddings") else t("lm_head.weight")
    unread = sorted(set(w) - read)
    assert not unread, f"tensors the forward did not read: {unread}"
    return x @ head.T


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/qwen_golden"
    with open(os.path.join(root, "inputs.json")) as f:
        tokens = json.load(f)["tokens"]
    result = {
        "about": "scripts/make_qwen_golden.py: float64 logits of qwen2/ and qwen3/ on inputs.json's tokens",
        "torch_version": torch.__version__,
    }
    for name in ("qwen2", "qwen3"):
        folder = os.path.join(root, name)
        with open(os.path.join(folder, "config.json")) as f:
            cfg = json.load(f)
        w = {k: v.to(torch.float64) for k, v in load_file(os.path.join(folder, "model.safetensors")).items()}
        result[name] = [[float(v) for v in row] for row in forward(cfg, w, tokens)]
    path = os.path.join(root, "logits.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {path} ({len(tokens)} rows per model)")


if __name__ == "__main__":
    main()
