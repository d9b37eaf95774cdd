"""Position-wise feed-forward network (seed 000 ch. 6): expand, activate, project back.

FFN(x) = φ(x·W_1 + b_1)·W_2 + b_2 with W_1 (d_model, d_ff), W_2 (d_ff, d_model) — "think" after
attention has let the tokens "talk" (§6.3). Gated variants (SwiGLU, GEGLU, ReGLU) multiply the
activation by a second projection: φ(x·W_G + b_G) ⊙ (x·W_1 + b_1) (b_G only when bias=True,
as in a LLaMA with mlp_bias=True). SwiGLU's product takes one fused pass each way in float32 on
the CPU (nn/fused.py); `force_math` (trace.reference_path) keeps the explicit φ(gate) * pre.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..config import GATED
from ..trace import HookPoint
from . import fused
from .common import affine
from .dropout import Dropout


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """The seed's §6.1 approximation: 0.5·x·(1 + tanh(sqrt(2/π)·(x + 0.044715·x³)))."""
    return F.gelu(x, approximate="tanh")


ACTIVATION_FNS = {
    "relu": F.relu, "gelu": F.gelu, "gelu_tanh": gelu_tanh, "silu": F.silu,
    # gated: the activation applied to the gate branch
    "swiglu": F.silu, "geglu": gelu_tanh, "reglu": F.relu,
}


class FeedForward(nn.Module):
    force_math = False

    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", bias: bool = True,
                 dropout: float = 0.0):
        super().__init__()
        self.activation, self.gated = activation, activation in GATED
        self.phi = ACTIVATION_FNS[activation]
        self.W_1 = nn.Parameter(torch.randn(d_model, d_ff) / math.sqrt(d_model))
        self.b_1 = nn.Parameter(torch.zeros(d_ff)) if bias else None
        self.W_G = nn.Parameter(torch.randn(d_model, d_ff) / math.sqrt(d_model)) if self.gated else None
        self.b_G = nn.Parameter(torch.zeros(d_ff)) if self.gated and bias else None
        self.W_2 = nn.Parameter(torch.randn(d_ff, d_model) / math.sqrt(d_ff))
        self.b_2 = nn.Parameter(torch.zeros(d_model)) if bias else None
        self.dropout = Dropout(dropout)
        self.pre, self.act, self.out = HookPoint(), HookPoint(), HookPoint()
        if self.gated:
            self.gate = HookPoint()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (batch, seq, d_model)
        pre = self.pre(affine(x, self.W_1, self.b_1))  # (batch, seq, d_ff)
        if self.gated:
            gate = self.gate(affine(x, self.W_G, self.b_G))
            if (self.activation == "swiglu" and not self.force_math and gate.dtype == pre.dtype
                    and fused.usable(gate, pre, dtypes=fused.WITH_BF16)):
                act = fused.swiglu(gate, pre)
            else:
                act = self.phi(gate) * pre
        else:
            act = self.phi(pre)
        act = self.act(act)
        if self.training and self.dropout.p > 0:
            act = self.dropout(act)
        return self.out(affine(act, self.W_2, self.b_2))
