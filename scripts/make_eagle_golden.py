#!/usr/bin/env python3
"""Golden logits of the EAGLE layout for tests/methods/eagle_fspad/test_eagle_golden.cpp.

Reads an exported EAGLE-1/2 drafter folder (config.json + model.safetensors, as `specdec convert --to
eagle` writes it) and a token/feature sequence (inputs.json), runs the drafter in PyTorch the way
SGLang's and vLLM's llama_eagle.py run it, and writes logits.json beside inputs.json:

    hidden_t = fc(concat(embed_tokens[token_t], feature_t))          (+ fc.bias where the file has one)
    h_t      = hidden_t + o_proj(attention(hidden_t))                 (layer 0 has no input_layernorm)
    out_t    = h_t + mlp(post_attention_layernorm(h_t))               (no final norm)
    logits_t = out_t @ head^T, head = the target's: embed_tokens here (the folder's config is tied)

Attention is causal over the sequence, grouped-query, with HF's RoPE (rotate_half) at the positions of
inputs.json. Everything runs in float64 over the file's float32 weights. Where transformers is
importable, its LlamaDecoderLayer (input_layernorm replaced by an identity, as vLLM does) is run on the
same input as a second, independent reference, and both must agree.

Needs torch (Debian's python3-torch, or pip's torch; safetensors is used where installed, else a reader
here); CI needs only the JSON it writes. Nothing here needs a GPU: it runs in float64 on the CPU.

    python3 scripts/make_eagle_golden.py tests/data/eagle_golden
"""
import json
import math
import os
import sys

import struct

import torch

try:
    from safetensors.torch import load_file
except ImportError:  # Debian's python3-torch comes without it: the format is a JSON header and raw little-endian data

    def load_file(path):
        dtypes = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16, "F64": torch.float64}
        with open(path, "rb") as f:
            data = f.read()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + n])
        out = {}
        for name, t in header.items():
            if name == "__metadata__":
                continue
            begin, end = t["data_offsets"]
            raw = bytearray(data[8 + n + begin : 8 + n + end])  # writable: frombuffer shares the memory
            out[name] = torch.frombuffer(raw, dtype=dtypes[t["dtype"]]).reshape(t["shape"]).clone()
        return out



def rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def rope(x, positions, theta):
    """x (T, heads, hd) rotated by HF's convention: cos/sin over [freqs, freqs]."""
    hd = x.shape[-1]
    inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
    angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((angles, angles), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    return x * cos + rotate_half(x) * sin


def decoder_layer(x, w, cfg, positions):
    """One LlamaDecoderLayer without input_layernorm; returns the layer's output (residual added)."""
    T, D = x.shape
    H, Hkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or D // H
    p = "layers.0."
    q = (x @ w[p + "self_attn.q_proj.weight"].T).view(T, H, hd)
    k = (x @ w[p + "self_attn.k_proj.weight"].T).view(T, Hkv, hd)
    v = (x @ w[p + "self_attn.v_proj.weight"].T).view(T, Hkv, hd)
    theta = cfg.get("rope_theta", 10000.0)
    q, k = rope(q, positions, theta), rope(k, positions, theta)
    group = H // Hkv
    k = k.repeat_interleave(group, dim=1)  # head h reads kv head h // group
    v = v.repeat_interleave(group, dim=1)
    scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~causal, float("-inf"))
    att = torch.einsum("hts,shd->thd", scores.softmax(dim=-1), v).reshape(T, H * hd)
    h = x + att @ w[p + "self_attn.o_proj.weight"].T
    n = rms_norm(h, w[p + "post_attention_layernorm.weight"], cfg.get("rms_norm_eps", 1e-6))
    gate, up = n @ w[p + "mlp.gate_proj.weight"].T, n @ w[p + "mlp.up_proj.weight"].T
    return h + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T


def transformers_layer(x, w, cfg, positions):
    """The same layer through transformers' own LlamaDecoderLayer, or None where it is not importable."""
    try:
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding
    except ImportError:
        return None
    keys = {k: v for k, v in cfg.items() if k not in ("architectures", "bias", "torch_dtype")}
    config = LlamaConfig(**keys)
    config._attn_implementation = "eager"
    layer = LlamaDecoderLayer(config, layer_idx=0).to(torch.float64)
    layer.input_layernorm = torch.nn.Identity()  # EAGLE's layer 0 (cnets.py; vLLM's llama_eagle.py does the same)
    state = {k[len("layers.0."):]: v for k, v in w.items() if k.startswith("layers.0.")}
    missing, unexpected = layer.load_state_dict(state, strict=False)
    assert not unexpected and all(m.startswith("input_layernorm") for m in missing), (missing, unexpected)
    T = x.shape[0]
    mask = torch.full((T, T), torch.finfo(torch.float64).min, dtype=torch.float64).triu(1)[None, None]
    pos = positions[None]
    cos_sin = LlamaRotaryEmbedding(config=config)(x[None], pos)
    out = layer(x[None], attention_mask=mask, position_ids=pos, position_embeddings=cos_sin)
    return (out[0] if isinstance(out, tuple) else out)[0]


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/eagle_golden"
    folder = os.path.join(root, "drafter")
    with open(os.path.join(folder, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(root, "inputs.json")) as f:
        inputs = json.load(f)
    assert cfg["num_hidden_layers"] == 1, "EAGLE-1/2's drafter is one layer"
    assert cfg.get("tie_word_embeddings"), "this script takes the head from embed_tokens (a tied target)"
    w = {k: v.to(torch.float64) for k, v in load_file(os.path.join(folder, "model.safetensors")).items()}
    tokens = torch.tensor(inputs["tokens"], dtype=torch.long)
    positions = torch.tensor(inputs["positions"], dtype=torch.long)
    features = torch.tensor(inputs["features"], dtype=torch.float64)
    embed = w["embed_tokens.weight"]

    x = torch.cat((embed[tokens], features), dim=-1) @ w["fc.weight"].T  # embeddings first, as both engines
    if "fc.bias" in w:
        x = x + w["fc.bias"]
    out = decoder_layer(x, w, cfg, positions)
    logits = out @ embed.T

    try:
        check = transformers_layer(x, w, cfg, positions)
        note = "transformers not installed: plain PyTorch only"
    except (TypeError, AttributeError) as e:  # a transformers whose layer takes other arguments (before 4.45)
        check = None
        note = f"transformers' LlamaDecoderLayer not run ({type(e).__name__}: {e}): plain PyTorch only"
    if check is not None:
        worst = (check - out).abs().max().item()
        assert worst < 1e-9, f"transformers' LlamaDecoderLayer differs from the plain forward by {worst}"
        import transformers
        note = f"transformers {transformers.__version__} LlamaDecoderLayer agrees within {worst:.1e}"

    result = {
        "about": "scripts/make_eagle_golden.py: float64 logits and layer outputs of drafter/ on inputs.json",
        "torch_version": torch.__version__,
        "cross_check": note,
        "logits": [[float(v) for v in row] for row in logits],
        "hidden": [[float(v) for v in row] for row in out],
    }
    path = os.path.join(root, "logits.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    print(f"wrote {path} ({len(result['logits'])} rows; {note})")


if __name__ == "__main__":
    main()
