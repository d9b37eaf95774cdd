"""Seed 003 §4: remove LayerNorm from a 12-layer model (keep the residual) and it stays at chance.

The seed reports it from a BERT-base reproduction: "after removing LayerNorm, even with the
residual, the loss oscillates from epoch 3 and validation accuracy stays at chance". Here 12-layer
decoder-only models on `pair(2, 5)` (64 classes), with LayerNorm (Pre-LN, which trains at 12
layers; see `norm-placement`) and with no normalisation at all; each arm at its own best rate.
"""

from __future__ import annotations

from dataclasses import replace

from .base import Context, Outcome, best_lr, run_tagging, tiny_config
from .runner import TrainSpec
from .synthetic import TaggingTask
from .verdict import Check, Variant

ID = "no-layernorm"
SECTION = "seed 003 §4"
CLAIM = ("Removing LayerNorm from a 12-layer model, even with the residual connections kept, makes the "
         "loss oscillate and leaves validation accuracy at chance level.")
SEEDS = 5
DEPTH = 12
MARGIN = 0.05  # "at chance": within 5 accuracy points of 1/64


def run(ctx: Context) -> Outcome:
    task = TaggingTask("pair", n_symbols=8, min_len=8, max_len=12, a=2, b=5)
    spec = TrainSpec(steps=ctx.pick(3, 600), batch_size=ctx.pick(8, 32), lr=1e-3, warmup=ctx.pick(2, 50))
    evals = {"test": task.batches(ctx.pick(1, 4), ctx.pick(16, 64), seed=999)}
    variants, lrs = [], {}
    for name, norm in (("LayerNorm (Pre-LN)", "layernorm"), ("no LayerNorm", "none")):
        cfg = tiny_config(task.vocab_size, n_layers=DEPTH, norm=norm, norm_position="pre")
        lrs[name] = best_lr(ctx, norm, cfg, task, spec)
        accs = [ctx.memo(f"{norm}.s{seed}", lambda s=seed: {"acc": run_tagging(
            cfg, task, replace(spec, lr=lrs[name]), s, evals).metrics["test"]["accuracy"]})["acc"] for seed in ctx.seeds]
        ctx.log(f"{name}: accuracy {[round(a, 3) for a in accs]}")
        variants.append(Variant(name, "held-out accuracy (64 classes)", accs))
    variants.append(Variant(f"chance + {MARGIN}", "accuracy", [task.chance + MARGIN] * len(ctx.seeds)))
    checks = [
        Check(f"without LayerNorm the 12-layer model stays at chance (accuracy below chance + {MARGIN})",
              f"chance + {MARGIN}", "no LayerNorm", True, 0.0),
        Check("(control) with LayerNorm the same model learns (beats no LayerNorm by 0.1)", "LayerNorm (Pre-LN)",
              "no LayerNorm", True, 0.1, main=False),
    ]
    setup = (f"Decoder-only, {DEPTH} layers, d_model 64, 4 heads, d_ff 256, residual kept, embed_scale on; Pre-LN "
             f"with a final norm, or norm='none' everywhere. Task `pair(2, 5)` (chance {task.chance:.4f}); "
             f"{spec.steps} steps, batch {spec.batch_size}, warmup {spec.warmup}, peak rate per arm: {lrs}. "
             "A diverged run is scored at chance.")
    return Outcome(variants, checks, setup)
