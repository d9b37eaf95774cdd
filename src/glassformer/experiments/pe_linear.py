"""Seed 000 §3.3 (reason 1) and seed 003 §3: the sinusoid's relative-position property.

Two different statements, checked exactly in float64 on glassformer's SinusoidalPE:
- seed 000 §3.3, seed 003 §3 reason 1: PE(pos + k) = M_k · PE(pos) with one matrix M_k per
  offset (a rotation of each (sin, cos) pair by k·ω_i) — true by the angle-addition formulas;
- seed 003 §3 reason 3: "PE(p) − PE(q) can be written as a linear function of PE(p − q)" — one
  matrix A with PE(p) − PE(q) = A · PE(p − q) for all p, q. Fitted by least squares over all
  pairs; it would hold if the residual were ≈ 0. (It cannot: for p = q + k the left side
  depends on q, the right side does not.)
"""

from __future__ import annotations

import torch

from ..nn.positional import SinusoidalPE, sinusoid_angles
from .base import Context, Outcome
from .verdict import Exact, Variant

ID = "pe-linear"
SECTION = "seed 000 §3.3; seed 003 §3"
CLAIM = ("sin(α+β) and cos(α+β) are combinations of sin α, cos α, sin β, cos β, so PE(pos+k) is a "
         "linear function of PE(pos) (seed 000 §3.3); moreover PE(p) − PE(q) can be expressed as a "
         "linear function of PE(p − q), which is why the Transformer models relative distance (seed 003 §3).")
SEEDS = 1
D, N, K = 64, 200, 7


def rotation(k: int, width: int, base: float = 10000.0) -> torch.Tensor:
    """M_k: block-diagonal 2×2 rotations by k·ω_i acting on (sin, cos) pairs (interleaved layout)."""
    omega = sinusoid_angles(torch.tensor([float(k)]), width, base)[0]  # k·ω_i, float64
    M = torch.zeros(width, width, dtype=torch.float64)
    c, s = omega.cos(), omega.sin()
    for i in range(width // 2):  # [sin(a+b), cos(a+b)] = [[cos b, sin b], [−sin b, cos b]]·[sin a, cos a]
        M[2 * i, 2 * i], M[2 * i, 2 * i + 1] = c[i], s[i]
        M[2 * i + 1, 2 * i], M[2 * i + 1, 2 * i + 1] = -s[i], c[i]
    return M


def run(ctx: Context) -> Outcome:
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        pe = SinusoidalPE(D)(torch.arange(N + K).double())  # (N+K, D)
    finally:
        torch.set_default_dtype(old)
    shifted = pe[:N] @ rotation(K, D).T
    shift_err = float((shifted - pe[K:]).abs().max())
    p, q = torch.meshgrid(torch.arange(N), torch.arange(N), indexing="ij")
    keep = p >= q  # PE of a negative offset is PE(−k); keep p ≥ q so that PE(p − q) is defined
    lhs = (pe[p[keep]] - pe[q[keep]])  # (pairs, D)
    rhs = pe[(p - q)[keep]]
    A = torch.linalg.lstsq(rhs, lhs).solution  # lhs ≈ rhs @ A
    rel_resid = float((rhs @ A - lhs).norm() / lhs.norm())
    variants = [
        Variant(f"PE(pos+{K}) vs M_{K}·PE(pos)", "max |difference| (float64)", [shift_err]),
        Variant("PE(p)−PE(q) vs A·PE(p−q)", "relative residual of the best linear fit", [rel_resid]),
    ]
    checks = [
        Exact(f"PE(pos+k) = M_k·PE(pos) for one fixed M_k (k = {K})", f"PE(pos+{K}) vs M_{K}·PE(pos)", "<=", 1e-9),
        Exact("PE(p) − PE(q) is a linear function of PE(p − q)", "PE(p)−PE(q) vs A·PE(p−q)", "<=", 0.01),
    ]
    setup = (f"glassformer's SinusoidalPE (interleaved sin/cos, base 10000), d_model {D}, positions "
             f"0…{N + K - 1} in float64; M_k built from the angle-addition formulas; A fitted by least "
             f"squares over all {int(keep.sum())} pairs p ≥ q < {N}.")
    notes = ("The first statement is an identity and holds to rounding error; the second does not: the "
             "best single linear map leaves most of PE(p) − PE(q) unexplained. Whether trained models "
             "*use* the first is not tested here.")
    return Outcome(variants, checks, setup, notes=notes)
