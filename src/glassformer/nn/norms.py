"""Normalisation (seed 000 ch. 5): LayerNorm, RMSNorm, padding-aware BatchNorm, none.

Every norm takes `(x, padding_mask)`; only BatchNorm uses the mask, because it is the only
one whose statistics cross positions and sentences (§5.3: padding would pollute them).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from . import fused


class LayerNorm(nn.Module):
    """y = gamma · (x − μ) / sqrt(σ² + eps) + beta, over the feature dimension of one token (§5.2)."""

    traced = True

    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d))
        self.beta = nn.Parameter(torch.zeros(d))

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], self.gamma, self.beta, self.eps)


class RMSNorm(nn.Module):
    """y = gamma · x / sqrt(mean(x²) + eps): LayerNorm without centring or beta (T5, LLaMA).

    Computed in float32 whatever the input dtype, as T5 and LLaMA do. In float32 on the CPU the fast
    path computes the same formula, forward and backward, in one pass each (nn/fused.py); `math` is
    the explicit composite, taken under `trace.reference_path` (force_math) and everywhere else.
    """

    traced = True
    force_math = False

    def __init__(self, d: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.gamma = nn.Parameter(torch.ones(d))

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        if not self.force_math and fused.usable(x, self.gamma):
            return fused.rms_norm(x, self.gamma, self.eps)
        return self.math(x)

    def math(self, x: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.gamma * y.to(x.dtype)


class BatchNorm(nn.Module):
    """Per-feature statistics over every (sentence, position) of the batch — padding excluded (§5.3).

    Training normalises with the batch's own mean and variance and updates running averages;
    evaluation uses the running averages. That train/eval mismatch, and its instability at
    small batch sizes, are what seed §5.3 warns about; `glassformer ablate norm-type` measures it.
    """

    traced = True

    def __init__(self, d: int, eps: float = 1e-5, momentum: float = 0.1):
        super().__init__()
        self.eps, self.momentum = eps, momentum
        self.gamma = nn.Parameter(torch.ones(d))
        self.beta = nn.Parameter(torch.zeros(d))
        self.register_buffer("running_mean", torch.zeros(d))
        self.register_buffer("running_var", torch.ones(d))

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.training:
            flat = x.reshape(-1, x.shape[-1])
            if padding_mask is not None:
                flat = flat[~padding_mask.reshape(-1)]
            mean = flat.mean(0)
            var = flat.var(0, unbiased=False)
            with torch.no_grad():
                n = flat.shape[0]
                unbiased = var * n / max(n - 1, 1)
                self.running_mean.lerp_(mean.detach(), self.momentum)
                self.running_var.lerp_(unbiased.detach(), self.momentum)
        else:
            mean, var = self.running_mean, self.running_var
        return self.gamma * (x - mean) * torch.rsqrt(var + self.eps) + self.beta


class NoNorm(nn.Module):
    """The ablation of seed 003 §4: no normalisation at all."""

    traced = True

    def forward(self, x: torch.Tensor, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        return x


def make_norm(kind: str, d: int, eps: float) -> nn.Module:
    """The norm named by `ModelConfig.norm`."""
    if kind == "layernorm":
        return LayerNorm(d, eps)
    if kind == "rmsnorm":
        return RMSNorm(d, eps)
    if kind == "batchnorm":
        return BatchNorm(d, eps)
    return NoNorm()
