"""What dropout costs a small model's CPU training step (issue 32 §3; docs/real-data.md, "When a
character LM gets dropout").

The auto recipe's character LM (d_model 128, 4 layers, d_ff 512, 32 windows of 64 characters, fused
AdamW), timed by the recipe's own probe (`train.recipe.measure_tokens_per_minute`), with no dropout,
with dropout 0.1 everywhere, and with 0.1 on the residual paths only or on the attention weights only
(`attn_dropout`). PyTorch's fused CPU attention kernel takes no dropout, so attention dropout falls
back to the explicit math; the residual masks cost the rest. The arms' chunks are interleaved
(another process on the machine changes one chunk's speed, not one arm's):

    taskset -c 0 env PYTHONPATH=src .venv/bin/python bench/dropout_step.py --threads 1
"""

from __future__ import annotations

import argparse
import statistics

from glassformer.train.recipe import LM_BLOCK, measure_tokens_per_minute

MODEL = dict(d_model=128, n_heads=4, n_layers=4, d_ff=512)
BATCH = 32  # windows of LM_BLOCK characters: the auto recipe's small character LM
ARMS = {"no dropout": dict(dropout=0.0), "dropout 0.1": dict(dropout=0.1),
        "residual only": dict(dropout=0.1, attn_dropout=0.0), "attention only": dict(dropout=0.0, attn_dropout=0.1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=2.0, help="per chunk")
    ap.add_argument("--repeats", type=int, default=3, help="chunks per arm (the median is reported)")
    args = ap.parse_args()
    rates: dict[str, list[float]] = {name: [] for name in ARMS}
    for _ in range(args.repeats):
        for name, arm in ARMS.items():
            per_minute = measure_tokens_per_minute({**MODEL, **arm}, True, (0, LM_BLOCK), BATCH, args.threads,
                                                   seconds=args.seconds)
            rates[name].append(per_minute / 60 / (BATCH * LM_BLOCK))  # steps a second
    base = statistics.median(rates["no dropout"])
    print(f"| arm ({args.threads} thread{'s' if args.threads > 1 else ''}) | steps/s | against no dropout |")
    print("|---|---:|---:|")
    for name, r in rates.items():
        print(f"| {name} | {statistics.median(r):.2f} | {statistics.median(r) / base:.2f}x |")


if __name__ == "__main__":
    main()
