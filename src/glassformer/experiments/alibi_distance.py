"""Seed 003 §3: "ALiBi replaces the sinusoid with a bias inversely proportional to distance".

ALiBi (Press et al. 2022, eq. in §3) adds −m·|i − j| to the score: *linear* in the distance, a
penalty growing with it. "Inversely proportional" would be b(d) ∝ 1/d. An exact check on
glassformer's ALiBi and on the paper's formula written here: is b(d)·d constant (inverse) or
b(d)/d constant (linear)?
"""

from __future__ import annotations

import torch

from ..nn.positional import ALiBi
from .base import Context, Outcome
from .verdict import Exact, Variant

ID = "alibi-distance"
SECTION = "seed 003 §3"
CLAIM = ("ALiBi replaces the sinusoidal encoding with a bias term inversely proportional to "
         "distance, works better and supports longer sequences.")
SEEDS = 1
N, H = 64, 8


def _spread(x: torch.Tensor) -> float:
    """Coefficient of variation: 0 when x is constant."""
    return float(x.std() / x.abs().mean())


def run(ctx: Context) -> Outcome:
    pos = torch.arange(N).unsqueeze(0)
    bias = ALiBi(H)(pos, pos)[0, 0, N - 1, :N - 1].double()  # head 1, last query, keys 0…N−2
    d = (N - 1 - torch.arange(N - 1)).double()  # distances 63…1
    m = 2.0 ** (-8.0 / H)  # head 1's slope, Press et al. 2022 §3
    paper = -m * d
    variants = [
        Variant("b(d)·d spread", "coefficient of variation of b(d)·d over d = 1…63", [_spread(bias * d)]),
        Variant("b(d)/d spread", "coefficient of variation of b(d)/d over d = 1…63", [_spread(bias / d)]),
        Variant("glassformer vs −m·d", "max |difference|", [float((bias - paper).abs().max())]),
    ]
    checks = [
        Exact("the bias is inversely proportional to distance (b·d constant)", "b(d)·d spread", "<=", 0.01,
              published="Press et al. 2022: bias −m·(i − j), m = 2^(−8h/n)"),
        Exact("(what holds instead) the bias is linear in distance (b/d constant)", "b(d)/d spread", "<=", 0.01,
              main=False),
        Exact("(control) glassformer's ALiBi is the paper's −m·d", "glassformer vs −m·d", "<=", 1e-6, main=False),
    ]
    setup = f"glassformer's ALiBi, {H} heads, head 1 (m = 2^-1), the last of {N} queries against keys at distance 1…63."
    notes = ("The penalty grows linearly with distance, so attention decays exponentially with it "
             "after the softmax; the extrapolation claim is tested in `pe-extrapolation`.")
    return Outcome(variants, checks, setup, notes=notes)
