"""Small tensor helpers shared by the components."""

from __future__ import annotations

import torch


def affine(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """x·W + b with W stored (in, out) as in the seed's math; one fused GEMM when possible."""
    if b is None:
        return x @ W
    if x.dim() == 2:
        return torch.addmm(b, x, W)
    return torch.addmm(b, x.reshape(-1, x.shape[-1]), W).view(*x.shape[:-1], W.shape[-1])


def masked_value(dtype: torch.dtype) -> float:
    """The additive score of a masked key: the most negative finite number (no NaN rows)."""
    return torch.finfo(dtype).min
