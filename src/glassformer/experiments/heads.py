"""§2.1: one attention head learns one pattern; several heads learn several at once.

The task needs two relations at the same time: y_t is the *ordered* pair (x_{t−2}, x_{t−5}).
A single head must split its weight between the two positions and then sees only the sum of
their values, which loses the order; with h ≥ 2 heads each relation can get its own head.
One layer, d_model fixed at 64, h = 1, 2, 4, 8, 16 (d_k = 64 / h, down to 4).
"""

from __future__ import annotations

from .base import SWEEP_WORDS, Context, Outcome, best_lr, run_tagging, tiny_config
from dataclasses import replace
from .report import mean_curve, smooth, step_plot
from .runner import TrainSpec
from .synthetic import TaggingTask
from .verdict import Check, Variant

ID = "heads"
SECTION = "seed 000 §2.1"
CLAIM = ("A single attention can learn only one kind of relevance pattern (syntactic, semantic, "
         "coreference, local, global...); multi-head attention gives the model h independent "
         "attention mechanisms at once, each focusing on a different aspect.")

HEADS = (1, 2, 4, 8, 16)
SEEDS = 10  # one run: seconds
# Vaswani et al. 2017 Table 3 rows (A) and base: h -> (dev PPL, BLEU) at d_model 512
TABLE3_A = {1: (5.29, 24.9), 4: (5.00, 25.5), 8: (4.92, 25.8), 16: (4.91, 25.8), 32: (5.01, 25.4)}


def run(ctx: Context) -> Outcome:
    task = TaggingTask("pair", n_symbols=8, min_len=8, max_len=16, a=2, b=5)
    spec = TrainSpec(steps=ctx.pick(40, 300), batch_size=32, lr=3e-3, warmup=ctx.pick(10, 50))
    evals = {"test": task.batches(ctx.pick(1, 4), 64, seed=999)}
    variants, curves, lrs = [], {}, {}
    for h in HEADS:
        cfg = tiny_config(task.vocab_size, n_heads=h, n_layers=1)
        lrs[h] = best_lr(ctx, f"h{h}", cfg, task, spec)
        runs = [run_tagging(cfg, task, replace(spec, lr=lrs[h]), seed, evals) for seed in ctx.seeds]
        accs = [r.metrics["test"]["accuracy"] for r in runs]
        ctx.log(f"h={h}: accuracy {[round(a, 3) for a in accs]}")
        variants.append(Variant(f"h={h} (d_k={64 // h})", "test accuracy (ordered pair, 64 classes)", accs))
        curves[f"h={h}"] = smooth(mean_curve([r.result.losses for r in runs]))
    step_plot(ctx.out_dir / "heads_loss.png", curves,
              "training loss (mean over seeds, smoothed)", "1 layer, d_model 64: number of heads")
    checks = [
        Check("2 heads beat 1 head on a two-relation task", "h=2 (d_k=32)", "h=1 (d_k=64)", True, 0.1,
              published="Table 3 (A): 1 head is 0.9 BLEU worse than 8 (24.9 vs 25.8)"),
        Check("8 heads (the paper's h) beat 1 head", "h=8 (d_k=8)", "h=1 (d_k=64)", True, 0.1),
        Check("4 heads beat 1 head", "h=4 (d_k=16)", "h=1 (d_k=64)", True, 0.1, main=False),
        Check("seed 003 §2: d_k = 16 (h = 4) beats d_k = 4 (h = 16): 'too small a d_k is too thin'",
              "h=4 (d_k=16)", "h=16 (d_k=4)", True, 0.05, main=False,
              published="Table 3 (A), d_model 512: h=1 24.9 BLEU, h=4 25.5, h=8 25.8, h=16 25.8, h=32 25.4"),
    ]
    setup = (f"Decoder-only model, 1 layer, d_model 64, d_ff 256, h in {list(HEADS)} with d_k = 64/h "
             f"(same parameter count), task `pair(2, 5)` (8 symbols, 64 classes, chance "
             f"{task.chance:.3f}), {spec.steps} steps, batch {spec.batch_size}, {SWEEP_WORDS}: {lrs}.")
    return Outcome(variants, checks, setup, plots=[("heads_loss.png", "Training loss per number of heads")])
