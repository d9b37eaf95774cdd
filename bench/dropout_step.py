"""What dropout costs a small model's CPU training step (issue 32 §3; docs/real-data.md, "When a
character LM gets dropout").

The auto recipe's character LM (d_model 128, 4 layers, d_ff 512, 32 windows of 64 characters, fused
AdamW) trained with no dropout, with dropout 0.1 everywhere, and with 0.1 on the residual paths only or
on the attention weights only (`attn_dropout`). PyTorch's fused CPU attention kernel takes no dropout,
so attention dropout falls back to the explicit math; the residual masks cost the rest. The arms'
chunks are interleaved (another process on the machine changes one chunk's speed, not one arm's):

    taskset -c 0 env PYTHONPATH=src .venv/bin/python bench/dropout_step.py --threads 1
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from glassformer.config import ModelConfig
from glassformer.nn import build_model

ARMS = {"no dropout": (0.0, None), "dropout 0.1": (0.1, None), "residual only": (0.1, 0.0),
        "attention only": (0.0, 0.1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=2.0, help="per chunk")
    ap.add_argument("--repeats", type=int, default=3, help="chunks per arm (the median is reported)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    steps = {}
    for name, (dropout, attn) in ARMS.items():
        cfg = ModelConfig(arch="decoder", vocab_size=100, pad_id=0, bos_id=1, eos_id=2, norm_position="pre",
                          max_len=66, d_model=128, n_heads=4, n_layers=4, d_ff=512, dropout=dropout,
                          attn_dropout=attn)
        torch.manual_seed(0)
        model = build_model(cfg).train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        x = torch.randint(3, 100, (32, 64))

        def step(model=model, opt=opt, x=x) -> None:
            opt.zero_grad(set_to_none=True)
            model(x, targets=x, reduction="sum").backward()
            opt.step()
        for _ in range(3):
            step()
        steps[name] = step
    rates: dict[str, list[float]] = {name: [] for name in ARMS}
    for _ in range(args.repeats):
        for name, step in steps.items():
            n, start = 0, time.perf_counter()
            while time.perf_counter() - start < args.seconds:
                step()
                n += 1
            rates[name].append(n / (time.perf_counter() - start))
    base = statistics.median(rates["no dropout"])
    print(f"| arm ({args.threads} thread{'s' if args.threads > 1 else ''}) | steps/s | against no dropout |")
    print("|---|---:|---:|")
    for name, r in rates.items():
        print(f"| {name} | {statistics.median(r):.2f} | {statistics.median(r) / base:.2f}x |")


if __name__ == "__main__":
    main()
