"""Seed 003 §2 (提示) and seed 000 §2.4: concatenation + W^O versus adding the heads.

Concat(head_1, …, head_h) · W^O = Σ_h head_h · W^O_h, where W^O_h is the h-th block of d_k rows of
W^O: block-matrix multiplication. So "concatenate, then project" *is* a sum of the heads, each
through its own d_k × d_model map; it differs only from adding the *unprojected* heads. Exact
check on torch.nn.MultiheadAttention's weights (the independent reference).
"""

from __future__ import annotations

import torch

from .base import Context, Outcome
from .verdict import Exact, Variant

ID = "concat-wo"
SECTION = "seed 003 §2; seed 000 §2.4"
CLAIM = ("The heads must be concatenated and then passed through W^O: their outputs are "
         "heterogeneous, and adding them directly would destroy each head's meaning.")
SEEDS = 1
D_MODEL, H = 512, 8
D_K = D_MODEL // H


def run(ctx: Context) -> Outcome:
    torch.manual_seed(ctx.seeds[0])
    ref = torch.nn.MultiheadAttention(D_MODEL, H, batch_first=True, bias=False).double()
    x = torch.randn(1, 6, D_MODEL, dtype=torch.float64)
    with torch.no_grad():
        full, _ = ref(x, x, x, need_weights=False)
        q, k, v = (x @ w.T for w in ref.in_proj_weight.chunk(3, 0))
        heads = []
        for h in range(H):
            s = slice(h * D_K, (h + 1) * D_K)
            p = torch.softmax(q[..., s] @ k[..., s].transpose(-1, -2) / D_K ** 0.5, -1)
            heads.append(p @ v[..., s])  # (batch, seq, d_k)
        W_O = ref.out_proj.weight.T  # (H·d_k, d_model)
        concat = torch.cat(heads, -1) @ W_O
        summed = sum(head @ W_O[h * D_K:(h + 1) * D_K] for h, head in enumerate(heads))
    variants = [
        Variant("Concat·W^O vs Σ head_h·W^O_h", "max |difference| (float64)", [float((concat - summed).abs().max())]),
        Variant("hand-made heads vs torch MHA", "max |difference| (float64)", [float((concat - full).abs().max())]),
        Variant("output norm", "mean ‖Concat·W^O‖ per token", [float(concat.norm(dim=-1).mean())]),
    ]
    checks = [
        Exact("Concat·W^O is not a sum of per-head terms", "Concat·W^O vs Σ head_h·W^O_h", ">=", 1e-6),
        Exact("(control) the hand-made heads are torch's heads", "hand-made heads vs torch MHA", "<=", 1e-9,
              main=False),
    ]
    setup = ("torch.nn.MultiheadAttention(512, 8) in float64, one random 6-token input; per-head outputs "
             "recomputed from its in_proj_weight; Concat·W^O against Σ_h head_h·W^O[h·64:(h+1)·64].")
    notes = ("The identity is exact (difference at float64 rounding). What the seed's 'don't add' "
             "rightly excludes is Σ_h head_h *without* W^O (which would need d_k = d_model); with W^O the "
             "per-head maps W^O_h are what lets heads write to different directions.")
    return Outcome(variants, checks, setup, notes=notes)
