"""§5.3 and seed 003 §4: LayerNorm vs BatchNorm vs RMSNorm vs no norm.

Batches are padded (rows of 6–16 tokens), at batch sizes 2 and 32. BatchNorm's statistics are
taken over the real tokens of the batch (padding excluded, as §5.3 demands) during training and
from its running averages at evaluation: the train/eval mismatch is measured as the difference
between the test loss in eval mode and in train mode (batch statistics) on the same batches.
"""

from __future__ import annotations

import math

from dataclasses import replace

from .base import SWEEP_WORDS, Context, Outcome, best_lr, run_tagging, tiny_config
from .report import line_plot, mean_curve, smooth
from .runner import TrainSpec, evaluate_tagging
from .synthetic import TaggingTask
from .verdict import Check, Variant

ID = "norm-type"
SHEN_2020 = ("Shen et al. 2020 (PowerNorm): naive BatchNorm in a Transformer translates worse than LayerNorm, "
             "traced to large fluctuations of the batch statistics")
SECTION = "seed 000 §5.3; seed 003 §4"
CLAIM = ("BatchNorm is unstable at small batch sizes (batch 2: statistics from a handful of "
         "values), padding disturbs its statistics, and it behaves differently in training and "
         "inference; LayerNorm is independent of the batch, suits variable-length sequences and "
         "is identical in training and inference. (Seed 003: remove LayerNorm and the training "
         "loss oscillates violently, validation accuracy stuck at chance.)")
SEEDS = 5

NORMS = ("layernorm", "batchnorm", "rmsnorm", "none")


def oscillation(losses: list[float]) -> float:
    """Mean |loss_t − loss_{t−1}| over the second half of training."""
    tail = [x for x in losses[len(losses) // 2:] if math.isfinite(x)]
    if len(tail) < 2:
        return math.inf
    return sum(abs(b - a) for a, b in zip(tail, tail[1:])) / (len(tail) - 1)


def run(ctx: Context) -> Outcome:
    # Zipfian symbols (p ∝ 1/rank): a few frequent tokens dominate a batch, as in text, so a
    # batch's statistics are those of its frequent tokens (the case §5.3 worries about)
    task = TaggingTask("pair", n_symbols=8, min_len=6, max_len=16, a=2, b=5, zipf=1.0)
    steps = ctx.pick(30, 200)
    init_loss = math.log(task.n_classes)
    variants, curves, lrs = [], {}, {}
    for bs in (2, 32):
        # batch 2 gets 3× the steps (still 5× fewer rows than batch 32): enough to leave chance level
        spec = TrainSpec(steps=steps * (3 if bs == 2 else 1), batch_size=bs, lr=3e-3, warmup=ctx.pick(10, 50))
        tests = task.batches(ctx.pick(4, 64 // bs * 4), bs, seed=999)
        for norm in NORMS:
            name = f"{norm}, batch {bs}"
            cfg = tiny_config(task.vocab_size, norm=norm, norm_position="pre")
            lrs[name] = best_lr(ctx, f"{norm}.b{bs}", cfg, task, spec)  # per arm: the batch changes the best rate
            losses, accs, gaps, osc = [], [], [], []
            for seed in ctx.seeds:
                r = run_tagging(cfg, task, replace(spec, lr=lrs[name]), seed)
                if r.result.diverged:
                    losses.append(init_loss)
                    accs.append(task.chance)
                    gaps.append(math.inf)
                else:
                    ev = evaluate_tagging(r.model, tests)
                    tr = evaluate_tagging(r.model, tests, train_mode=True)  # batch statistics
                    losses.append(ev["loss"])
                    accs.append(ev["accuracy"])
                    gaps.append(abs(ev["loss"] - tr["loss"]))
                osc.append(oscillation(r.result.losses))
                curves.setdefault(name, []).append(r.result.losses)
            ctx.log(f"{name}: test loss {[round(x, 3) for x in losses]}, eval/train gap "
                    f"{[round(x, 3) for x in gaps]}")
            variants += [Variant(f"{name}: loss", "test loss, eval mode (nats)", losses),
                         Variant(f"{name}: accuracy", "test accuracy", accs),
                         Variant(f"{name}: eval/train gap", "|eval-mode − train-mode test loss| (nats)", gaps),
                         Variant(f"{name}: oscillation", "training-loss oscillation (mean |Δloss|, 2nd half)", osc)]
    line_plot(ctx.out_dir / "norm_type_loss.png",
              {k: (list(range(1, len(mean_curve(v)) + 1)), smooth(mean_curve(v), 20)) for k, v in curves.items()},
              "step", "training loss (mean over seeds, smoothed over 20 steps)", "Norm type × batch size (padded)")
    checks = [
        Check("batch 2: LayerNorm beats BatchNorm (test loss)", "layernorm, batch 2: loss", "batchnorm, batch 2: loss",
              False, 0.1, published=SHEN_2020),
        Check("batch 2: BatchNorm's train/eval mismatch exceeds LayerNorm's", "layernorm, batch 2: eval/train gap",
              "batchnorm, batch 2: eval/train gap", False, 0.05),
        Check("batch 32: LayerNorm beats BatchNorm (test loss)", "layernorm, batch 32: loss", "batchnorm, batch 32: loss",
              False, 0.1, main=False, published=SHEN_2020),
        Check("seed 003: without a norm the loss oscillates more (batch 32)", "layernorm, batch 32: oscillation",
              "none, batch 32: oscillation", False, 0.02, main=False),
        Check("seed 003: without a norm accuracy stays lower (batch 32)", "layernorm, batch 32: accuracy",
              "none, batch 32: accuracy", True, 0.1, main=False),
    ]
    setup = (f"Decoder-only models, Pre-LN placement (so that the comparison is of the norm, not of Post-LN's sensitivity to the learning rate measured by `norm-placement`), 2 layers, d_model 64, 4 heads, task `pair(2, 5)` on "
             f"padded rows of 6–16 Zipfian tokens (p ∝ 1/rank), {3 * steps} steps at batch 2 and {steps} at batch 32, "
             f"{SWEEP_WORDS}: {lrs}. "
             "Test batches have the training batch size (so train-mode BatchNorm sees the same "
             "number of tokens it was trained with).")
    notes = ("Batch 2 sees about 5× fewer examples than batch 32, so compare norms "
             "within a batch size. Without any norm the model here is shallow (2 layers), which "
             "is where seed 003's oscillation is least likely to show. BatchNorm here is the "
             "padding-aware one of `glassformer.nn.norms` (statistics over real tokens only), "
             "which removes one of the three problems §5.3 lists. Token embeddings are scaled by "
             "√d_model (the paper), so the token signal is not swamped by the sinusoid.")
    return Outcome(variants, checks, setup,
                   plots=[("norm_type_loss.png", "Loss curves per norm type and batch size")], notes=notes)
