"""Small tensor helpers shared by the components.

`affine` is every x·W + b of the fast path. On CPU in float32 it runs on whichever library this
machine computes that shape class fastest with — oneDNN's linear or the BLAS behind `torch.addmm` —
measured once per process (`nn/routes.py`). Same math, summed in a different order: results agree
to float32 rounding (~1e-6 relative).
"""

from __future__ import annotations

import torch

from . import routes
from .routes import TABLE, blas_affine, onednn_linear, onednn_weight_grad


class _OneDNNAffine(torch.autograd.Function):
    """x·W + b with its three backward GEMMs on oneDNN as well (training):
    dx = g·Wᵀ, dW = xᵀ·g, db = Σ g."""

    @staticmethod
    def forward(ctx, x2: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        ctx.save_for_backward(x2, W)
        ctx.has_bias = b is not None
        return onednn_linear(x2, W.t(), b)

    @staticmethod
    def backward(ctx, g: torch.Tensor):
        x2, W = ctx.saved_tensors
        g = g.contiguous()
        dx = onednn_linear(g, W, None) if ctx.needs_input_grad[0] else None
        dW = onednn_weight_grad(x2, g) if ctx.needs_input_grad[1] else None
        db = g.sum(0) if ctx.has_bias and ctx.needs_input_grad[2] else None
        return dx, dW, db


def _onednn_ok(x2: torch.Tensor, W: torch.Tensor) -> bool:
    """Whether the oneDNN route may be considered for this product at all."""
    # autocast (bf16) keeps torch's own ops: they already dispatch bf16 GEMMs to oneDNN. Tiny
    # products stay on addmm, whose call costs less than oneDNN's (~15 µs) where that dominates.
    # under torch.compile, Inductor picks its own GEMMs (it cannot lower this op from a view);
    # under torch.func transforms (grad, vmap) plain addmm, which they know how to differentiate
    return (routes.onednn_available() and x2.shape[0] * W.numel() >= 1 << 17
            and not torch.compiler.is_compiling() and not torch._C._are_functorch_transforms_active()
            and x2.device.type == "cpu" and x2.dtype == torch.float32
            and W.dtype == torch.float32 and not W.is_mkldnn and not torch.is_autocast_enabled("cpu"))


def _route(x2: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None, grad: bool) -> tuple[str, torch.Tensor | None]:
    """(route, result if measuring already computed it). Measured on the first product of a class."""
    forced = routes.forced_route()
    if forced is not None:
        return forced, None
    key = routes.shape_class(x2.shape[0], W) + (("training",) if grad else ())
    chosen = TABLE.route(key)
    if chosen is not None:
        return chosen, None
    if grad:  # forward and backward GEMMs timed without autograd; this call then takes the winner
        TABLE.measure_training(key, x2.detach(), W.detach(), None if b is None else b.detach())
        return TABLE.route(key), None
    return TABLE.route(key) or "blas", TABLE.measure(key, x2, W, b)


def affine(x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """x·W + b with W stored (in, out) as in the seed's math; one fused GEMM."""
    x2 = x if x.dim() == 2 else x.reshape(-1, x.shape[-1])
    y = None
    route = "blas"
    if _onednn_ok(x2, W):
        grad = torch.is_grad_enabled() and (x.requires_grad or W.requires_grad or (b is not None and b.requires_grad))
        route, y = _route(x2, W, b, grad)
        if y is None and route == "onednn":
            y = _OneDNNAffine.apply(x2, W, b) if grad else onednn_linear(x2, W.t(), b)
    if y is None:
        y = blas_affine(x2, W, b)
    return y if x.dim() == 2 else y.view(*x.shape[:-1], W.shape[-1])


def masked_value(dtype: torch.dtype) -> float:
    """The additive score of a masked key: the most negative finite number (no NaN rows)."""
    return torch.finfo(dtype).min
