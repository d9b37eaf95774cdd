"""Small tensor helpers shared by the components.

`affine` is every x·W + b of the fast path. On CPU in float32 it runs on oneDNN rather than the
BLAS behind `torch.addmm`: measured on this project's AMD EPYC machines, MKL's sgemm takes a
non-AVX-512 code path and reaches ~45 % of what oneDNN does on the same shapes (docs/benchmarks.md).
Same math, summed in a different order: results agree to float32 rounding (~1e-6 relative).
"""

from __future__ import annotations

import torch

# oneDNN's linear (y = x·Wᵀ + b, Wᵀ given as a strided view, no copy); absent in builds without it
_LINEAR = getattr(torch.ops.mkldnn, "_linear_pointwise", None) if torch.backends.mkldnn.is_available() else None


def _linear(x2: torch.Tensor, W_out_in: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return _LINEAR(x2, W_out_in, b, "none", [], "")


class _OneDNNAffine(torch.autograd.Function):
    """x·W + b with its three backward GEMMs on oneDNN as well (training):
    dx = g·Wᵀ, dW = xᵀ·g, db = Σ g."""

    @staticmethod
    def forward(ctx, x2: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x2, W)
        ctx.has_bias = b is not None
        return _linear(x2, W.t(), b)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        x2, W = ctx.saved_tensors
        g = g.contiguous()
        dx = _linear(g, W, None) if ctx.needs_input_grad[0] else None
        dW = _linear(x2.t(), g.t(), None) if ctx.needs_input_grad[1] else None
        db = g.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return dx, dW, db


def _onednn_ok(x2: torch.Tensor, W: torch.Tensor) -> bool:
    # autocast (bf16) keeps torch's own ops: they already dispatch bf16 GEMMs to oneDNN. Tiny
    # products stay on addmm, whose call costs less than oneDNN's (~15 µs) where that dominates.
    # under torch.compile, Inductor picks its own GEMMs (it cannot lower this op from a view)
    return (_LINEAR is not None and x2.shape[0] * W.numel() >= 1 << 17 and not torch.compiler.is_compiling()
            and x2.device.type == "cpu" and x2.dtype == torch.float32
            and W.dtype == torch.float32 and not W.is_mkldnn and not torch.is_autocast_enabled("cpu"))


def affine(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """x·W + b with W stored (in, out) as in the seed's math; one fused GEMM."""
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    if _onednn_ok(x2, W):
        if torch.is_grad_enabled() and (x.requires_grad or W.requires_grad or (b is not None and b.requires_grad)):
            y = _OneDNNAffine.apply(x2, W, b)
        else:
            y = _linear(x2, W.t(), b)
    elif b is None:
        y = x2 @ W
    else:
        y = torch.addmm(b, x2, W)
    return y if x.dim() == 2 else y.view(*x.shape[:-1], W.shape[-1])


def masked_value(dtype: torch.dtype) -> float:
    """The additive score of a masked key: the most negative finite number (no NaN rows)."""
    return torch.finfo(dtype).min
