"""Seed 003 §2: "each head receives only its 64-dimensional slice of the 512-dimensional input".

In the paper (§3.2.2) every head projects the *whole* input, head_i = Attention(Q W_i^Q, K W_i^K,
V W_i^V) with W_i^Q ∈ R^{d_model × d_k}; only the *outputs* are 64-wide. An exact check on
torch.nn.MultiheadAttention (the independent reference) and on glassformer's attention: change
the input only outside head 1's would-be slice (dims 64…511) and see whether head 1 notices.
"""

from __future__ import annotations

import torch

from ..nn.attention import MultiHeadAttention
from .base import Context, Outcome
from .verdict import Exact, Variant

ID = "head-slices"
SECTION = "seed 003 §2 (vs seed 000 §2.2)"
CLAIM = ("Multi-head attention cuts each 512-dimensional word vector into 8 slices of 64; head 1 "
         "receives only the first 64 dimensions and projects that slice with its own W^Q_1, W^K_1, W^V_1.")
SEEDS = 1
D_MODEL, H = 512, 8
D_K = D_MODEL // H


def run(ctx: Context) -> Outcome:
    torch.manual_seed(ctx.seeds[0])
    x = torch.randn(1, 6, D_MODEL)
    outside = x.clone()
    outside[..., D_K:] += torch.randn(1, 6, D_MODEL - D_K)  # head 1's slice (dims 0…63) untouched
    ref = torch.nn.MultiheadAttention(D_MODEL, H, batch_first=True)
    W_q1 = ref.in_proj_weight[:D_K]  # torch: head 1's query rows, (d_k, d_model)
    with torch.no_grad():
        q1, q1_out = x @ W_q1.T, outside @ W_q1.T
    torch_change = float((q1 - q1_out).norm() / q1.norm())
    ours = MultiHeadAttention(D_MODEL, H, D_K)
    with torch.no_grad():
        g1, g1_out = x @ ours.W_Q[0], outside @ ours.W_Q[0]
    ours_change = float((g1 - g1_out).norm() / g1.norm())
    variants = [Variant("torch MHA: head 1", "relative change of head 1's queries", [torch_change]),
                Variant("glassformer: head 1", "relative change of head 1's queries", [ours_change]),
                Variant("W^Q_1 input width", "rows of head 1's W^Q (its input width)", [float(ours.W_Q.shape[1])])]
    checks = [
        Exact("head 1 ignores dims 64…511 (torch.nn.MultiheadAttention)", "torch MHA: head 1", "<=", 1e-6,
              published="Vaswani et al. 2017 §3.2.2: W_i^Q ∈ R^{d_model × d_k}"),
        Exact("head 1 ignores dims 64…511 (glassformer)", "glassformer: head 1", "<=", 1e-6, main=False),
        Exact("W^Q_1 reads 64 input dimensions", "W^Q_1 input width", "<=", 64, main=False),
    ]
    setup = ("d_model 512, 8 heads; a random input of 6 tokens, then the same input with dims 64…511 "
             "redrawn (head 1's supposed slice kept); the relative change of head 1's queries.")
    notes = ("Each head reads all 512 dimensions and projects them to 64; seed 000 §2.2 describes "
             "this correctly. The cut into 8×64 happens in the *projected* space (one (512, 512) "
             "matrix read as 8 blocks of 64 columns), which is where seed 003's picture comes from.")
    return Outcome(variants, checks, setup, notes=notes)
