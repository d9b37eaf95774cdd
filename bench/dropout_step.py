"""What dropout costs a small model's CPU training step (issue 32 §3; docs/real-data.md, "When a
character LM gets dropout").

The auto recipe's character LM (d_model 128, 4 layers, d_ff 512, 32 windows of 64 characters, fused
AdamW) or its translator (`--model translator`: d_model 128, 3 + 3 layers, 64 pairs of ~4 tokens, bf16
autocast), timed by the recipe's own probe (`train.speed_probe.measure_tokens_per_minute`), with no
dropout, with dropout 0.1 everywhere (torch's per-element mask, `nn.dropout.CHEAP_MASK = False`, and
nn/dropout.py's, drawn 16 bits at a time), and with 0.1 on the residual paths only or on the attention
weights only (`attn_dropout`). PyTorch's fused CPU attention kernel takes no dropout: with torch's
mask attention dropout falls back to SDPA's math, with ours to the explicit math (nn/attention.py).
The arms' chunks are interleaved (another process on the machine changes one chunk's speed, not one
arm's):

    taskset -c 0 env PYTHONPATH=src .venv/bin/python bench/dropout_step.py --threads 1 [--model translator]
"""

from __future__ import annotations

import argparse
import statistics

from glassformer.nn import dropout as dropout_mask
from glassformer.train.recipe import LM_BLOCK
from glassformer.train.speed_probe import measure_tokens_per_minute

SIZES = {  # the auto recipe's small models: (fields, batch, (source, target) lengths, bf16)
    "lm": (dict(d_model=128, n_heads=4, n_layers=4, d_ff=512), 32, (0, LM_BLOCK), False),  # 32 windows
    # pinyin's translator, 64 pairs of ~4 tokens, in bf16 autocast as the recipe trains it on this CPU
    "translator": (dict(d_model=128, n_heads=4, n_layers=3, d_ff=512), 64, (4, 4), True),
}
ARMS = {"no dropout": (dict(dropout=0.0), True), "dropout 0.1, torch's mask": (dict(dropout=0.1), False),
        "dropout 0.1": (dict(dropout=0.1), True), "residual only": (dict(dropout=0.1, attn_dropout=0.0), True),
        "attention only": (dict(dropout=0.0, attn_dropout=0.1), True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--model", choices=sorted(SIZES), default="lm")
    ap.add_argument("--seconds", type=float, default=2.0, help="per chunk")
    ap.add_argument("--repeats", type=int, default=3, help="chunks per arm (the median is reported)")
    args = ap.parse_args()
    fields, batch, lengths, bf16 = SIZES[args.model]
    rates: dict[str, list[float]] = {name: [] for name in ARMS}
    for _ in range(args.repeats):
        for name, (arm, cheap) in ARMS.items():
            dropout_mask.CHEAP_MASK = cheap
            per_minute = measure_tokens_per_minute({**fields, **arm}, args.model == "lm", lengths, batch,
                                                   args.threads, seconds=args.seconds, bf16=bf16)
            rates[name].append(per_minute / 60 / (batch * sum(lengths)))  # steps a second
    dropout_mask.CHEAP_MASK = True
    base = statistics.median(rates["no dropout"])
    threads = f"{args.threads} thread{'s' if args.threads > 1 else ''}"
    print(f"| {args.model} arm ({threads}) | steps/s | against no dropout |")
    print("|---|---:|---:|")
    for name, r in rates.items():
        print(f"| {name} | {statistics.median(r):.2f} | {statistics.median(r) / base:.2f}x |")


if __name__ == "__main__":
    main()
