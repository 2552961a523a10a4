#!/usr/bin/env python3
"""Planted controls for the EAGLE-layout golden test: each writes logits.json from a reference that reads
the layout wrongly in one way, runs the golden test against it, and expects it to fail. The committed
logits.json is put back afterwards.

    python3 scripts/eagle_golden_controls.py build/release/tests_methods_eagle_fspad

Prints one line per control; exits 1 if the test passed any of them (it would not tell that layout apart).
"""
import importlib.util
import os
import shutil
import subprocess
import sys

import torch

TEST = "specdec and a PyTorch reference forward give the same EAGLE-layout logits"
ROOT = "tests/data/eagle_golden"


def load_golden_script():
    spec = importlib.util.spec_from_file_location("golden", os.path.join(os.path.dirname(__file__), "make_eagle_golden.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "build/release/tests_methods_eagle_fspad"
    sys.argv = [sys.argv[0], ROOT]  # make_eagle_golden.main reads its folder from argv
    g = load_golden_script()
    layer, rope, load_file, cat = g.decoder_layer, g.rope, g.load_file, torch.cat

    def features_first(tensors, dim=0):  # fc reads concat(feature, embedding): the order reversed
        if dim == -1 and len(tensors) == 2 and all(t.dim() == 2 for t in tensors):
            return cat((tensors[1], tensors[0]), dim=dim)
        return cat(tensors, dim=dim)

    def with_input_norm(x, w, cfg, positions):  # layer 0 keeps its input_layernorm (gain 1)
        return layer(g.rms_norm(x, torch.ones_like(x[0]), cfg.get("rms_norm_eps", 1e-6)), w, cfg, positions)

    def adjacent_pairs(x, positions, theta):  # RoPE over pairs (2i, 2i+1), llama.cpp's order, not rotate_half
        hd = x.shape[-1]
        inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd))
        angles = positions.to(torch.float64)[:, None] * inv_freq[None, :]
        cos, sin = angles.cos()[:, None, :], angles.sin()[:, None, :]
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1).flatten(-2)

    controls = [
        ("fc over concat(feature, embedding)", lambda: setattr(g.torch, "cat", features_first)),
        ("layer 0 with its input_layernorm", lambda: setattr(g, "decoder_layer", with_input_norm)),
        ("RoPE over adjacent pairs", lambda: setattr(g, "rope", adjacent_pairs)),
        ("fc.bias dropped", lambda: setattr(g, "load_file", lambda p: {k: v for k, v in load_file(p).items() if k != "fc.bias"})),
    ]
    kept = os.path.join(ROOT, "logits.json")
    backup = kept + ".kept"
    shutil.copyfile(kept, backup)
    passed = []
    try:
        for name, plant in controls:
            plant()
            g.main()
            g.torch.cat, g.decoder_layer, g.rope, g.load_file = cat, layer, rope, load_file
            run = subprocess.run([binary, TEST], capture_output=True, text=True)
            print(f"{name:40s} golden test {'FAILED, as it must' if run.returncode != 0 else 'PASSED: not told apart'}")
            if run.returncode == 0:
                passed.append(name)
    finally:
        shutil.move(backup, kept)
    sys.exit(1 if passed else 0)


if __name__ == "__main__":
    main()
