"""The GEMM routes of the fast path (nn/common.py, nn/routes.py) against torch's own addmm and
autograd, and against a float64 product: every route gives the same numbers to float32 rounding."""

from __future__ import annotations

import time
import warnings

import pytest
import torch

from glassformer.errors import InputError
from glassformer.nn import common, routes

ONEDNN = routes.onednn_available()


@pytest.fixture
def fresh_table():
    """An empty route table: the measurement runs again, and nothing leaks into other tests."""
    saved = (dict(routes.TABLE.chosen), dict(routes.TABLE.timings))
    routes.TABLE.clear()
    yield routes.TABLE
    routes.TABLE.clear()
    routes.TABLE.chosen.update(saved[0])
    routes.TABLE.timings.update(saved[1])


def _operands(shape, bias, g):
    d_out = 512
    x = torch.randn(*shape, generator=g, requires_grad=True)
    W = torch.randn(shape[-1], d_out, generator=g, requires_grad=True)
    b = torch.randn(d_out, generator=g, requires_grad=True) if bias else None
    return x, W, b


@pytest.mark.parametrize("route", ["auto", "onednn", "blas"])
# (32, 700): K > N, where oneDNN's weight gradient is computed as (gᵀ·x)ᵀ (routes.onednn_weight_grad)
@pytest.mark.parametrize("shape", [(64, 96), (4, 16, 96), (1, 1, 384), (32, 700)])
@pytest.mark.parametrize("bias", [True, False])
def test_affine_forward_and_backward_match_addmm_on_every_route(route, shape, bias, monkeypatch, fresh_table):
    # where oneDNN is absent or switched off (the portability leg), "onednn" falls back to blas
    monkeypatch.setenv("GLASSFORMER_GEMM", route)
    x, W, b = _operands(shape, bias, torch.Generator().manual_seed(0))
    rows = x.numel() // shape[-1]
    assert common._onednn_ok(x.reshape(rows, -1), W) == ONEDNN  # big enough for a route choice
    y = common.affine(x, W, b)
    upstream = torch.randn(y.shape)
    leaves = [t for t in (x, W, b) if t is not None]
    grads = torch.autograd.grad((y * upstream).sum(), leaves)
    ref = x @ W + (b if b is not None else 0)
    ref_grads = torch.autograd.grad((ref * upstream).sum(), leaves)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-4)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    with torch.inference_mode():  # the measuring call (auto) returns a real product too
        exact = (x.double() @ W.double() + (b.double() if b is not None else 0)).float()
        torch.testing.assert_close(common.affine(x, W, b), exact, rtol=1e-5, atol=1e-4)
        torch.testing.assert_close(common.affine(x, W, b), exact, rtol=1e-5, atol=1e-4)


def test_measurement_keeps_the_faster_route_per_shape_class(fresh_table, monkeypatch):
    monkeypatch.delenv("GLASSFORMER_GEMM", raising=False)
    x, W = torch.randn(1, 384), torch.randn(384, 1152)
    with torch.inference_mode():
        common.affine(x, W, None)
        common.affine(torch.randn(6, 384), W, None)  # 6 rows: the 8-row class
    rows = {r["rows"]: r for r in fresh_table.rows()}
    assert set(rows) == ({1, 8} if ONEDNN else set())
    for r in rows.values():
        assert (r["K"], r["N"]) == (384, 1152)
        faster = min(routes.ROUTES, key=lambda name: r[f"{name}_us"])
        assert r["winner"] == faster and r[f"{faster}_us"] > 0


def test_onednn_switched_off_takes_blas(monkeypatch, fresh_table):
    monkeypatch.setattr(routes, "_LINEAR", None)  # what GLASSFORMER_ONEDNN=0 sets at import
    x, W = torch.randn(64, 384), torch.randn(384, 512)
    assert not common._onednn_ok(x, W)
    torch.testing.assert_close(common.affine(x, W, None), (x.double() @ W.double()).float(), rtol=1e-5, atol=1e-4)
    assert fresh_table.rows() == []  # nothing measured: one route only
    monkeypatch.undo()
    with warnings.catch_warnings():  # flags() also re-sets TF32, which warns on CPU builds
        warnings.simplefilter("ignore")
        with torch.backends.mkldnn.flags(enabled=False):  # torch's own switch is honoured too
            assert not common._onednn_ok(x, W)


def test_unknown_route_name_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("GLASSFORMER_GEMM", "cublas")
    with pytest.raises(InputError, match="GLASSFORMER_GEMM='cublas' is not a route; use auto, onednn or blas"):
        routes.forced_route()


def test_affine_under_bf16_autocast_uses_torch_ops():
    x, W, b = torch.randn(64, 96), torch.randn(96, 512), torch.randn(512)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = common.affine(x, W, b)
        assert y.dtype == torch.bfloat16  # autocast's addmm, not oneDNN's fp32 linear
    torch.testing.assert_close(y.float(), x @ W + b, rtol=2e-2, atol=0.5)



def test_the_measuring_call_returns_the_kept_routes_bits(fresh_table, monkeypatch):
    # the first product of a class is timed on every route; its answer must be the route kept for
    # the later calls, or a model gives other bits on its first forward than on the next ones
    monkeypatch.delenv("GLASSFORMER_GEMM", raising=False)
    real = dict(routes._CALL)
    x, W, b = torch.randn(5, 384), torch.randn(384, 1152), torch.randn(1152)
    for winner in routes.ROUTES if ONEDNN else ("blas",):  # without oneDNN nothing is measured

        def slow_unless(name, winner=winner):
            def call(x2, W, b):
                if name != winner:
                    time.sleep(0.02)  # far above a contended thread's delay
                return real[name](x2, W, b)
            return call
        monkeypatch.setattr(routes, "_CALL", {n: slow_unless(n) for n in routes.ROUTES})
        fresh_table.clear()
        with torch.inference_mode():
            first = common.affine(x, W, b)
            again = common.affine(x, W, b)
        assert [r["winner"] for r in fresh_table.rows()] == ([winner] if ONEDNN else [])
        assert torch.equal(first, again) and torch.equal(first, real[winner](x, W, b))


def test_training_classes_are_timed_with_their_backward_and_leave_the_rng_alone(fresh_table, monkeypatch):
    # a product that will be differentiated is measured as forward + both backward GEMMs, in a class
    # of its own; the measurement must not draw from torch's global generator (dropout uses it)
    monkeypatch.delenv("GLASSFORMER_GEMM", raising=False)
    x = torch.randn(512, 256, requires_grad=True)
    W, b = torch.randn(256, 384, requires_grad=True), torch.randn(384, requires_grad=True)
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    y = common.affine(x, W, b)
    assert torch.equal(torch.rand(3), expected)
    y.square().sum().backward()
    x64, W64, b64 = (t.detach().double().requires_grad_() for t in (x, W, b))
    (x64 @ W64 + b64).square().sum().backward()
    for got, ref in ((x.grad, x64.grad), (W.grad, W64.grad), (b.grad, b64.grad)):
        torch.testing.assert_close(got, ref.float(), rtol=1e-4, atol=1e-3)
    rows = fresh_table.rows()
    if ONEDNN:
        assert [(r["rows"], r["K"], r["N"], r["training"]) for r in rows] == [(512, 256, 384, True)]
        assert rows[0]["winner"] == min(routes.ROUTES, key=lambda name: rows[0][f"{name}_us"])
    else:
        assert rows == []
