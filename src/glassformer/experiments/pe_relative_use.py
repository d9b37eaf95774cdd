"""Seed 000 §3.3 and seed 003 §3: do trained models *use* the fact that PE(pos + k) is linear in PE(pos)?

`pe-linear` checks the identity PE(pos + k) = M_k·PE(pos). The claim that goes with it is that
the model can therefore attend by relative distance. If a head does, the position-only part of
its scores, S[p, q] = (PE(p)·W_Q + b_Q)·(PE(q)·W_K + b_K)ᵀ / sqrt(d_k), depends on p − q alone:
S is a Toeplitz matrix. Measured: the share of S's variance (q ≤ p, the causal window) that a
function of p − q explains (R² of the per-offset means), for the most Toeplitz head of layer 0,
after training on `lag(3)` (y_t = x_{t−3}: a relative-position task) and at initialisation.
"""

from __future__ import annotations

import math

import torch

from ..trace import run_with_trace
from .base import Context, Outcome, run_tagging, tiny_config
from .runner import TrainSpec, set_seed
from .synthetic import TaggingTask
from .verdict import Check, Variant

ID = "pe-relative-use"
SECTION = "seed 000 §3.3; seed 003 §3"
CLAIM = ("Because PE(pos + k) is a linear function of PE(pos), the model can learn to attend by relative "
         "distance ('the 5th and the 10th word are 5 apart'): trained models use the sinusoid's relative property.")
SEEDS = 10  # one run: seconds
N_POS = 16


def toeplitz_share(S: torch.Tensor) -> float:
    """R² of S[p, q] (q ≤ p) explained by its mean along each diagonal p − q."""
    p, q = torch.meshgrid(torch.arange(S.shape[0]), torch.arange(S.shape[1]), indexing="ij")
    keep = q <= p
    values, offsets = S[keep].double(), (p - q)[keep]
    means = torch.zeros(int(offsets.max()) + 1, dtype=torch.float64).index_add_(0, offsets, values)
    means /= torch.bincount(offsets).double()
    total = float(((values - values.mean()) ** 2).sum())
    within = float(((values - means[offsets]) ** 2).sum())
    return 1.0 - within / total if total > 0 else math.nan


def position_scores(model: torch.nn.Module, n: int) -> torch.Tensor:
    """(head, q_pos, k_pos): layer 0's scores from the positional encoding alone."""
    _, tr = run_with_trace(model, torch.full((1, n), 3), names=["pos"])
    pe = tr["pos"][0]  # (seq, d_model)
    attn = model.dec[0].self_attn
    q = torch.einsum("sd,hdk->hsk", pe, attn.W_Q) + attn.b_Q[:, None, :]
    k = torch.einsum("sd,hdk->hsk", pe, attn.W_K) + attn.b_K[:, None, :]
    return (q @ k.transpose(1, 2)).detach() / math.sqrt(attn.d_k)


def best_head_share(model: torch.nn.Module) -> float:
    return max(toeplitz_share(S) for S in position_scores(model, N_POS))


def run(ctx: Context) -> Outcome:
    task = TaggingTask("lag", n_symbols=8, min_len=8, max_len=N_POS, a=3)
    spec = TrainSpec(steps=ctx.pick(3, 400), batch_size=ctx.pick(8, 32), lr=3e-3, warmup=ctx.pick(2, 50))
    cfg = tiny_config(task.vocab_size, n_layers=1)
    evals = {"test": task.batches(ctx.pick(1, 2), 64, seed=999)}
    init, trained, accs = [], [], []
    for seed in ctx.seeds:
        def one(s=seed) -> dict:
            from ..nn import build_model
            set_seed(s)
            before = best_head_share(build_model(cfg))
            r = run_tagging(cfg, task, spec, s, evals)  # same seed: the same initial weights
            return {"init": before, "trained": best_head_share(r.model), "acc": r.metrics["test"]["accuracy"]}
        m = ctx.memo(f"s{seed}", one)
        init.append(m["init"]), trained.append(m["trained"]), accs.append(m["acc"])
    ctx.log(f"Toeplitz share init {[round(x, 3) for x in init]}, trained {[round(x, 3) for x in trained]}")
    variants = [
        Variant("initialisation", "Toeplitz share of layer 0's positional scores (best head)", init),
        Variant("trained", "Toeplitz share of layer 0's positional scores (best head)", trained),
        Variant("trained − initialisation", "change of the Toeplitz share, per seed",
                [t - i for t, i in zip(trained, init)]),
        Variant("no change", "0", [0.0] * len(init)),
        Variant("task accuracy", "lag(3) held-out accuracy (the model did learn the task)", accs),
    ]
    checks = [Check("training makes the positional scores depend on p − q (Toeplitz share +0.1)",
                    "trained − initialisation", "no change", True, 0.1)]
    setup = (f"Decoder-only, 1 layer, d_model 64, 4 heads, Post-LN, sinusoidal PE, embed_scale on; `lag(3)` on rows "
             f"of 8–{N_POS} tokens, {spec.steps} steps, batch {spec.batch_size}, peak lr {spec.lr}. Scores from "
             f"PE alone over positions 0…{N_POS - 1}; the best of the 4 heads, before and after training (same seed).")
    notes = ("The sinusoid's dot product PE(p)·PE(q) is itself a function of p − q, so even a random W_Q·W_Kᵀ keeps "
             "part of that structure: the claim is about the change that training makes.")
    return Outcome(variants, checks, setup, notes=notes)
