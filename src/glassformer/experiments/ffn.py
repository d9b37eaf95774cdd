"""§6.1: the feed-forward network — no FFN, d_ff = 1×…8× d_model, ReLU vs GELU.

The task gathers two tokens and maps them non-linearly: y_t = (x_{t−1} + x_{t−2}) mod 5. Attention
can gather, but a sum modulo 5 of the gathered embeddings is not linear in them: something must
"think" about the pair (§6.3). "No FFN" replaces each FFN sublayer by zero, so the residual
passes the attention output straight on.
"""

from __future__ import annotations

import torch
from torch import nn

from dataclasses import replace

from .base import SWEEP_WORDS, Context, Outcome, best_lr, run_tagging, tiny_config
from .report import mean_curve, smooth, step_plot
from .runner import TrainSpec, set_seed
from .synthetic import TaggingTask
from .verdict import Check, Variant

ID = "ffn"
SECTION = "seed 000 §6.1"
CLAIM = ("The FFN (two linear layers around an activation) brings the non-linearity: expanding to "
         "d_ff = 4 × d_model makes features separable; GELU, smoother than ReLU, is friendlier to "
         "gradient flow, and modern implementations moved from ReLU to GELU.")

D_MODEL = 64
SEEDS = 10


class NoFFN(nn.Module):
    """An FFN sublayer that contributes nothing: the ablation "no FFN"."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)


def _model(cfg, with_ffn: bool):
    from ..nn import build_model
    model = build_model(cfg)
    if not with_ffn:
        for layer in model.dec:
            layer.ffn = NoFFN()
    return model


def run(ctx: Context) -> Outcome:
    task = TaggingTask("modsum", n_symbols=5, min_len=8, max_len=16, a=1, b=2)
    spec = TrainSpec(steps=ctx.pick(40, 800), batch_size=32, lr=3e-3, warmup=ctx.pick(10, 50))
    evals = {"test": task.batches(ctx.pick(1, 4), 64, seed=999)}
    plan = [("no FFN", 1, "relu", False)] + [(f"d_ff={m}× relu", m, "relu", True) for m in (1, 2, 4, 8)] \
        + [("d_ff=4× gelu", 4, "gelu", True)]
    variants, curves, lrs = [], {}, {}
    for name, mult, act, with_ffn in plan:
        cfg = tiny_config(task.vocab_size, n_layers=1, d_ff=mult * D_MODEL, activation=act)
        lrs[name] = best_lr(ctx, name.replace(" ", "_"), cfg, task, spec, lambda: _model(cfg, with_ffn))
        accs, losses = [], []
        for seed in ctx.seeds:
            set_seed(seed)
            r = run_tagging(cfg, task, replace(spec, lr=lrs[name]), seed, evals, model=_model(cfg, with_ffn))
            accs.append(r.metrics["test"]["accuracy"])
            losses.append(r.result.losses)
        ctx.log(f"{name}: accuracy {[round(a, 3) for a in accs]} ({r.params} parameters)")
        variants.append(Variant(name, "test accuracy", accs))
        curves[name] = smooth(mean_curve(losses))
    step_plot(ctx.out_dir / "ffn_loss.png", curves,
              "training loss (mean over seeds, smoothed)", "FFN width and activation (1 layer)")
    checks = [
        # ceiling 1 − δ: when "no FFN" is already within δ of perfect, a gain of δ is impossible
        Check("an FFN (4×, ReLU) beats no FFN", "d_ff=4× relu", "no FFN", True, 0.1, ceiling=0.9),
        Check("d_ff = 4× beats d_ff = 1×", "d_ff=4× relu", "d_ff=1× relu", True, 0.02, main=False, ceiling=0.98,
              published="Table 3 (C), d_model 512: d_ff 1024 25.4 BLEU, 2048 25.8, 4096 26.2"),
        Check("GELU beats ReLU at d_ff = 4×", "d_ff=4× gelu", "d_ff=4× relu", True, 0.02, main=False, ceiling=0.98),
    ]
    setup = (f"Decoder-only model, 1 layer, d_model {D_MODEL}, 4 heads, task `modsum(1, 2)` "
             f"(y_t = (x[t−1] + x[t−2]) mod 5, chance {task.chance:.2f}), {spec.steps} steps, batch "
             f"{spec.batch_size}, {SWEEP_WORDS}: {lrs}. One layer, so nothing after the attention "
             "but the FFN and the output projection can combine the two gathered tokens.")
    notes = ("Attention, LayerNorm and the softmax are themselves non-linear, so 'no FFN' is not a "
             "linear model; the first check measures how much the FFN adds on top of them. "
             "GELU vs ReLU is a claim about deep networks; one layer tests only the task fit. "
             "The task has only 25 input pairs: if 'no FFN' fits it too, the FFN's capacity is "
             "not what this task needs, which says nothing about language-sized problems.")
    return Outcome(variants, checks, setup, plots=[("ffn_loss.png", "Training loss per FFN variant")],
                   notes=notes)
