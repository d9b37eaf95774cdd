"""The oneDNN GEMMs of the fast path (nn/common.py) against torch's own addmm and autograd."""

from __future__ import annotations

import pytest
import torch

from glassformer.nn import common


@pytest.mark.parametrize("shape", [(64, 96), (4, 16, 96), (1, 1, 384)])
@pytest.mark.parametrize("bias", [True, False])
def test_affine_forward_and_backward_match_addmm(shape, bias):
    g = torch.Generator().manual_seed(0)
    d_out = 512
    x = torch.randn(*shape, generator=g, requires_grad=True)
    W = torch.randn(shape[-1], d_out, generator=g, requires_grad=True)
    b = torch.randn(d_out, generator=g, requires_grad=True) if bias else None
    rows = x.numel() // shape[-1]
    assert common._onednn_ok(x.reshape(rows, -1), W)  # this size takes the oneDNN path
    y = common.affine(x, W, b)
    upstream = torch.randn(y.shape, generator=g)
    grads = torch.autograd.grad((y * upstream).sum(), [t for t in (x, W, b) if t is not None])
    ref = x @ W + (b if b is not None else 0)
    ref_grads = torch.autograd.grad((ref * upstream).sum(), [t for t in (x, W, b) if t is not None])
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-4)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    with torch.inference_mode():
        torch.testing.assert_close(common.affine(x, W, b), ref.detach(), rtol=1e-5, atol=1e-4)


def test_affine_under_bf16_autocast_uses_torch_ops():
    x, W, b = torch.randn(64, 96), torch.randn(96, 512), torch.randn(512)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = common.affine(x, W, b)
        assert y.dtype == torch.bfloat16  # autocast's addmm, not oneDNN's fp32 linear
    torch.testing.assert_close(y.float(), x @ W + b, rtol=2e-2, atol=0.5)
