"""§1.5: why the scores are divided by sqrt(d_k).

Two measurements. (1) Random q, k with unit-variance components (the seed's own assumption):
the entropy of softmax(q·kᵀ) and the norm of the gradient that reaches the logits, for d_k = 16
… 1024, with and without ÷sqrt(d_k). (2) A small model with d_k = 256 per head trained both ways.
"""

from __future__ import annotations

import math

import torch

from .base import Context, Outcome, run_tagging, tiny_config
from .report import line_plot, step_plot, mean_curve, smooth
from .runner import TrainSpec
from .synthetic import TaggingTask
from .verdict import Check, Variant, mean_std

ID = "scaling"
SECTION = "seed 000 §1.5"
CLAIM = ("When d_k is large the variance of the dot product explodes (Var(q·k) = d_k); large "
         "softmax inputs give a near one-hot output whose gradient is close to zero, so the model "
         "cannot learn. Dividing by sqrt(d_k) brings the variance back to 1 whatever d_k is.")
SEEDS = 10

D_KS = (16, 32, 64, 128, 256, 512, 1024)
N_KEYS = 32


def softmax_stats(d_k: int, scaled: bool, seed: int, n_queries: int = 64) -> tuple[float, float]:
    """(mean row entropy in nats, mean over rows of log10 ‖dL/dlogits‖) for q, k ~ N(0, 1)^d_k.

    L = Σ softmax(logits)·g with a random upstream gradient g ~ N(0, 1): the gradient a softmax
    passes back is p ⊙ (g − p·g), which vanishes when p is one-hot.
    """
    gen = torch.Generator().manual_seed(seed * 7919 + d_k)
    q = torch.randn(n_queries, d_k, generator=gen, dtype=torch.float64)
    k = torch.randn(N_KEYS, d_k, generator=gen, dtype=torch.float64)
    g = torch.randn(n_queries, N_KEYS, generator=gen, dtype=torch.float64)
    logits = (q @ k.T) / (math.sqrt(d_k) if scaled else 1.0)
    logits.requires_grad_(True)
    p = torch.softmax(logits, dim=-1)
    (p * g).sum().backward()
    entropy = -(p * torch.log(p.clamp_min(1e-300))).sum(-1).mean()
    row_norms = logits.grad.norm(dim=-1).clamp_min(1e-300)
    return float(entropy.detach()), float(row_norms.log10().mean())  # geometric mean: the typical row


def run(ctx: Context) -> Outcome:
    variants, series_h, series_g, bands_h = [], {}, {}, {}
    for scaled in (True, False):
        tag = "÷√d_k" if scaled else "no scaling"
        hs, gs, hs_sd = [], [], []
        for d_k in D_KS:
            stats = [softmax_stats(d_k, scaled, s) for s in ctx.seeds]
            ent = Variant(f"{tag}, d_k={d_k}: entropy", "softmax entropy (nats; uniform = ln 32 = 3.47)",
                          [e for e, _ in stats])
            grad = Variant(f"{tag}, d_k={d_k}: gradient", "log10 ‖∂L/∂logits‖ (mean over rows)",
                           [g for _, g in stats])
            if d_k in (16, 64, 256, 1024):
                variants += [ent, grad]
            m, s = mean_std(ent.values)
            hs.append(m)
            hs_sd.append(s)
            gs.append(mean_std(grad.values)[0])
        series_h[tag], bands_h[tag], series_g[tag] = (D_KS, hs), hs_sd, (D_KS, gs)
    line_plot(ctx.out_dir / "scaling_entropy.png", series_h, "d_k", "softmax entropy (nats)",
              "Entropy of softmax(q·k) vs d_k (32 keys)", logx=True, bands=bands_h)
    line_plot(ctx.out_dir / "scaling_grad.png", series_g, "d_k", "log10 gradient norm at the logits",
              "Gradient reaching the attention logits vs d_k", logx=True)

    # (2) training with d_k = 256 per head, both ways
    task = TaggingTask("pair", n_symbols=8, min_len=8, max_len=16, a=2, b=5)
    spec = TrainSpec(steps=ctx.pick(40, 300), batch_size=32, lr=3e-3, warmup=ctx.pick(10, 50))
    evals = {"test": task.batches(ctx.pick(1, 4), 64, seed=999)}
    train_vars, curves = [], {}
    for scaled in (True, False):
        tag = "÷√d_k" if scaled else "no scaling"
        cfg = tiny_config(task.vocab_size, n_heads=2, d_k=256, n_layers=ctx.pick(1, 2),
                          scale_scores=scaled, attn_impl="math")
        runs = [run_tagging(cfg, task, spec, seed, evals) for seed in ctx.seeds]
        ctx.log(f"train d_k=256 {tag}: acc {[round(r.metrics['test']['accuracy'], 3) for r in runs]}")
        train_vars.append(Variant(f"train d_k=256, {tag}: loss", "final training loss (nats)",
                                  [r.result.final_loss() if not r.result.diverged else math.log(task.n_classes)
                                   for r in runs]))
        train_vars.append(Variant(f"train d_k=256, {tag}: accuracy", "test accuracy",
                                  [r.metrics["test"]["accuracy"] for r in runs]))
        curves[tag] = smooth(mean_curve([r.result.losses for r in runs]))
    variants += train_vars
    step_plot(ctx.out_dir / "scaling_train.png", curves,
              "training loss (mean over seeds, smoothed)", "Training with d_k = 256, with and without ÷√d_k")

    checks = [
        Check("÷√d_k keeps the softmax soft at d_k = 1024 (entropy)", "÷√d_k, d_k=1024: entropy",
              "no scaling, d_k=1024: entropy", True, 0.5),
        Check("without ÷√d_k the gradient at the logits vanishes at d_k = 1024 (≥ 10× smaller)",
              "÷√d_k, d_k=1024: gradient", "no scaling, d_k=1024: gradient", True, 1.0),
        Check("with d_k = 256 the scaled model trains to a lower loss", "train d_k=256, ÷√d_k: loss",
              "train d_k=256, no scaling: loss", False, 0.05),
    ]
    setup = (f"(1) q, k ~ N(0, 1)^d_k, {N_KEYS} keys, 64 queries, one random draw per seed, d_k in "
             f"{list(D_KS)}; upstream gradient g ~ N(0, 1). (2) decoder-only model, d_model 64, 2 heads "
             f"of d_k = 256, {cfg.n_layers} layer(s), task `pair(2, 5)` (predict the ordered pair "
             f"x[t−2], x[t−5], 64 classes), {spec.steps} AdamW steps, batch {spec.batch_size}, peak lr "
             f"{spec.lr}, warmup {spec.warmup}.")
    notes = ("Adam rescales every gradient by its running RMS, so a uniformly small gradient at "
             "the logits does not by itself stop an Adam-trained model from learning; the "
             "training comparison measures how much the saturation costs in practice. Within a "
             "fixed step budget a run either finds the two offsets or stays near chance, so with "
             "3 seeds one lucky or unlucky run can make the training check inconclusive.")
    return Outcome(variants, checks, setup,
                   plots=[("scaling_entropy.png", "Softmax entropy against d_k (band: ±1 std over seeds)"),
                          ("scaling_grad.png", "Gradient norm at the attention logits against d_k"),
                          ("scaling_train.png", "Training loss with d_k = 256, with and without ÷√d_k")],
                   notes=notes)
