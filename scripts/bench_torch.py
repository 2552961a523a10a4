#!/usr/bin/env python3
"""The PyTorch baseline for examples/bench/bench_cuda.cu: HF transformers' LlamaForCausalLM in bf16 with
random weights, single-token decode latency with its KV cache, for the same three shapes and the same
128 committed tokens.

Optional and GPU-side only (scripts/gpu_check.sh runs it when torch and transformers import); the
library never needs Python to build or run. Like CudaModel::forward, each timed step ends with the
logits on the host; the cache is cropped back to 128 tokens after each step, so every step sees the
same context. This is HF's eager path (sdpa attention), not a compiled one.

Run:    python3 scripts/bench_torch.py [--models 110m,1b,7b] [--reps 30] [--csv FILE]
Prints: one line per model: the weights it reads per step and the median decode latency.
"""
import argparse
import statistics
import sys
import time

SHAPES = {
    "110m": dict(hidden_size=768, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=12,
                 num_key_value_heads=12, max_position_embeddings=1024),
    "1b": dict(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
               num_key_value_heads=4, max_position_embeddings=2048),
    "7b": dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
               num_key_value_heads=32, max_position_embeddings=2048),
}
CONTEXT = 128
VOCAB = 32000


def decode_ms(torch, model, reps):
    """Median wall time of one decode step after three warm-ups."""
    prompt = (torch.arange(CONTEXT, device="cuda") * 7919 % VOCAB)[None]
    times = []
    with torch.inference_mode():
        out = model(input_ids=prompt, use_cache=True)
        cache = out.past_key_values
        token = out.logits[:, -1:].argmax(-1)
        for step in range(reps + 3):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            out = model(input_ids=token, past_key_values=cache, use_cache=True)
            out.logits[:, -1].float().cpu()
            elapsed = time.perf_counter() - t0
            cache = out.past_key_values
            if hasattr(cache, "crop"):
                cache.crop(CONTEXT)
            if step >= 3:
                times.append(elapsed)
    return statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="110m,1b,7b")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--csv", default="")
    args = ap.parse_args()
    try:
        import torch
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(f"bench_torch: {e}", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        print("bench_torch: no CUDA device", file=sys.stderr)
        return 1
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, transformers {transformers.__version__}")
    print(f"{'model':<6} {'read MB':>8} {'decode ms':>10}")
    rows = []
    for name in args.models.split(","):
        print(f"[bench_torch] {name}: random bf16 weights", file=sys.stderr)
        torch.manual_seed(0)
        torch.set_default_dtype(torch.bfloat16)
        with torch.device("cuda"):
            model = LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, **SHAPES[name])).eval()
        torch.set_default_dtype(torch.float32)
        embed = model.get_input_embeddings().weight
        read_mb = sum(p.numel() * p.element_size() for p in model.parameters() if p is not embed) / 1e6
        ms = decode_ms(torch, model, args.reps)
        print(f"{name:<6} {read_mb:8.0f} {ms:10.3f}", flush=True)
        rows.append((name, read_mb, ms))
        del model
        torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("model,weights_read_MB,decode_ms\n")
            for name, read_mb, ms in rows:
                f.write(f"{name},{read_mb:.1f},{ms:.4f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
