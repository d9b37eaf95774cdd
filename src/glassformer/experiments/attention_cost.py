"""Vaswani et al. 2017 Table 1 behind seed 000 §1 and §8: self-attention costs O(n²·d) per layer.

Measured on this CPU, not derived: one multi-head self-attention layer (d_model 64, 4 heads) on
sequences of n tokens, for the explicit reference path (QKᵀ, softmax, ·V: the seed's math) and the
fused kernel (`scaled_dot_product_attention`). Two numbers per n:
- time of one forward pass (the minimum over repeats: the least disturbed by other processes);
- memory the forward keeps for the backward pass (bytes of the tensors autograd saves, counted
  with `torch.autograd.graph.saved_tensors_hooks`; the n×n pattern is the quadratic one).
The exponent is the slope of log(cost) against log(n) over the largest sizes, where the n²·d term
dominates the projections' n·d² (with d = 64 that is n ≫ 64).
"""

from __future__ import annotations

import time

import numpy as np
import torch

from ..nn.attention import MultiHeadAttention
from .base import Context, Outcome
from .report import line_plot
from .verdict import Exact, Variant

ID = "attention-cost"
SECTION = "seed 000 §1, §8 (Vaswani et al. 2017 Table 1)"
CLAIM = ("Every token attends to every token, so the cost of self-attention grows as n² with the "
         "sequence length n (time and memory): long inputs are its weakness.")
SEEDS = 5  # timing repeats per size (the minimum is kept)
D_MODEL, HEADS = 64, 4


def saved_bytes(fn) -> int:
    """Bytes of the distinct tensors autograd saves while `fn()` runs (what training must keep)."""
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor):
        seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return sum(seen.values())


def exponent(ns, costs) -> float:
    """Least-squares slope of log(cost) on log(n)."""
    return float(np.polyfit(np.log(np.asarray(ns, float)), np.log(np.asarray(costs, float)), 1)[0])


def measure(impl: str, n: int, repeats: int) -> tuple[list[float], int]:
    """(forward seconds per repeat, bytes saved for backward) of one attention layer on n tokens."""
    torch.manual_seed(0)
    attn = MultiHeadAttention(D_MODEL, HEADS, D_MODEL // HEADS, impl=impl)
    x = torch.randn(1, n, D_MODEL)
    times = []
    with torch.no_grad():
        attn(x)  # warm-up: first-call allocations and the GEMM route choice
        for _ in range(repeats):
            start = time.perf_counter()
            attn(x)
            times.append(time.perf_counter() - start)
    memory = saved_bytes(lambda: attn(x.requires_grad_(True)))
    return times, memory


def run(ctx: Context) -> Outcome:
    ns = ctx.pick((64, 128, 256), (128, 256, 512, 1024, 2048, 4096))
    fit = ns[-3:]  # the largest sizes: the n² term dominates there
    variants, checks, series, extra = [], [], {}, {}
    for impl, label in (("math", "reference"), ("fast", "fused")):
        runs = {n: measure(impl, n, len(ctx.seeds)) for n in ns}
        best = [min(runs[n][0]) for n in ns]
        mem = [runs[n][1] for n in ns]
        for n, t in zip(ns, best):
            variants.append(Variant(f"{label} n={n}: time", f"forward seconds (min of {len(ctx.seeds)} repeats)", [t]))
        t_exp = exponent(fit, best[-len(fit):])
        m_exp = exponent(fit, mem[-len(fit):])
        variants += [Variant(f"{label}: time exponent", f"slope of log time on log n, n in {list(fit)}", [t_exp]),
                     Variant(f"{label}: memory exponent", f"slope of log saved bytes on log n, n in {list(fit)}",
                             [m_exp])]
        series[f"{label} time (s)"] = (ns, best)
        series[f"{label} memory (GB)"] = (ns, [m / 1e9 for m in mem])
        extra[label] = {"n": list(ns), "seconds": best, "saved_bytes": mem}
        ctx.log(f"{label}: time {[f'{t:.2e}' for t in best]} exp {t_exp:.2f}; memory {mem} exp {m_exp:.2f}")
        main = impl == "math"
        checks += [Exact(f"{label} path: time grows as n² (fitted exponent ≥ 1.8)", f"{label}: time exponent",
                         ">=", 1.8, main=main, published="Vaswani et al. 2017 Table 1: O(n²·d) per layer"),
                   Exact(f"{label} path: memory grows as n² (fitted exponent ≥ 1.8)", f"{label}: memory exponent",
                         ">=", 1.8, main=main)]
    line_plot(ctx.out_dir / "attention_cost.png", series, "sequence length n", "cost",
              "One attention layer on this CPU: time and saved memory against n", logx=True, logy=True)
    setup = (f"One MultiHeadAttention layer (d_model {D_MODEL}, {HEADS} heads), batch 1, n in {list(ns)}, 1 thread; "
             f"time: minimum of {len(ctx.seeds)} forward passes without autograd after a warm-up; memory: bytes of "
             f"the tensors autograd saves in one forward with gradients; exponents fitted over n in {list(fit)}.")
    notes = ("The fused kernel on a CPU is a flash-attention style kernel: it saves the output and one "
             "log-sum-exp per row instead of the n×n pattern, so its memory exponent is near 1, while its "
             "time is still quadratic. The n² claim is about the seed's math (the reference path); fused kernels "
             "change the memory, not the arithmetic.")
    return Outcome(variants, checks, setup, plots=[("attention_cost.png", "Time and memory against n")],
                   notes=notes, extra=extra)
