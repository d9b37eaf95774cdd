"""The training step's fused kernels (nn/fused.cpp via nn/fused.py) against the explicit math they
replace, differentiated by torch's autograd: RMSNorm, SwiGLU's product and the rotary rotation give
the same values and the same gradients to float32 rounding — on odd widths (the kernels' scalar
tails), strided views, one and two threads, extreme gate values — and an LLaMA-form model takes them
in training and evaluation with the same loss and gradients as under `trace.reference_path`."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings, strategies as st

from glassformer.config import ModelConfig
from glassformer.nn import build_model, fused, gemv
from glassformer.nn.feedforward import FeedForward
from glassformer.nn.norms import RMSNorm
from glassformer.nn.positional import RotaryEmbedding, apply_rotary
from glassformer.trace import reference_path


@pytest.fixture(autouse=True)
def built():
    if not gemv.available():
        pytest.fail("the kernels are not built here (tests/test_gemv.py says why)")


@pytest.fixture(params=[1, 2], ids=["1-thread", "2-threads"])
def threads(request):
    before = torch.get_num_threads()
    torch.set_num_threads(request.param)
    yield request.param
    torch.set_num_threads(before)


def _grads(out: torch.Tensor | tuple, upstream, leaves):
    outs = out if isinstance(out, tuple) else (out,)
    ups = upstream if isinstance(upstream, tuple) else (upstream,)
    return torch.autograd.grad(sum((o * u).sum() for o, u in zip(outs, ups)), leaves)


def _close(got, want, tol=2e-6):
    torch.testing.assert_close(got, want, rtol=tol, atol=tol * max(1.0, want.abs().max().item()))


@pytest.mark.parametrize("shape", [(2, 5, 128), (3, 130), (1, 1, 7), (4, 33, 64)])
def test_rms_norm_equals_the_composite_with_its_gradients(shape, threads):
    g = torch.Generator().manual_seed(sum(shape))
    x = (torch.randn(*shape, generator=g) * 3).requires_grad_()
    norm = RMSNorm(shape[-1])
    with torch.no_grad():
        norm.gamma.uniform_(0.5, 1.5, generator=g)
    up = torch.randn(shape, generator=g)
    assert fused.usable(x, norm.gamma)
    y = norm(x)
    want = norm.math(x)
    _close(y, want)
    for a, b in zip(_grads(y, up, [x, norm.gamma]), _grads(want, up, [x, norm.gamma])):
        _close(a, b)
    # and against the formula in float64, by hand
    x64 = x.detach().double()
    by_hand = norm.gamma.detach().double() * x64 / (x64.pow(2).mean(-1, keepdim=True) + norm.eps).sqrt()
    _close(y.detach().double(), by_hand, tol=1e-6)


@pytest.mark.parametrize("shape", [(2, 64, 512), (3, 17), (1, 1, 5), (7, 1000)])
def test_swiglu_equals_silu_times_pre_with_its_gradients(shape, threads):
    g = torch.Generator().manual_seed(sum(shape))
    gate = (torch.randn(*shape, generator=g) * 4).requires_grad_()
    pre = torch.randn(*shape, generator=g).requires_grad_()
    up = torch.randn(shape, generator=g)
    got = fused.swiglu(gate, pre)
    want = F.silu(gate) * pre
    _close(got, want, tol=5e-6)  # σ through exp_u20 (≤ 20 ulp)
    for a, b in zip(_grads(got, up, [gate, pre]), _grads(want, up, [gate, pre])):
        _close(a, b, tol=5e-6)


def test_swiglu_is_finite_and_exact_at_extreme_gates():
    gate = torch.tensor([-1e4, -200.0, -88.0, -20.0, 0.0, 20.0, 88.0, 200.0, 1e4]).requires_grad_()
    pre = torch.linspace(-2, 2, gate.numel()).requires_grad_()
    got = fused.swiglu(gate, pre)
    want = F.silu(gate) * pre
    assert torch.isfinite(got).all()
    _close(got, want, tol=5e-6)
    for a, b in zip(_grads(got, torch.ones(9), [gate, pre]), _grads(want, torch.ones(9), [gate, pre])):
        assert torch.isfinite(a).all()
        _close(a, b, tol=5e-6)


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 40), width=st.integers(1, 70), scale=st.floats(0.01, 30.0))
def test_swiglu_property(rows, width, scale):
    g = torch.Generator().manual_seed(rows * 100 + width)
    gate = torch.randn(rows, width, generator=g) * scale
    pre = torch.randn(rows, width, generator=g)
    _close(fused.swiglu(gate, pre), F.silu(gate) * pre, tol=5e-6)


@pytest.mark.parametrize("d_k", [32, 34, 8, 2])
@pytest.mark.parametrize("per_row", [False, True], ids=["shared-positions", "positions-per-row"])
def test_rotary_on_fused_qkv_views_equals_apply_rotary(d_k, per_row, threads):
    """Q and K as the attention's fast path makes them: strided views of one (batch, seq, 3, heads, d_k)
    product; cos/sin (1 or batch, 1, seq, d_k); gradients flow back into the one product."""
    g = torch.Generator().manual_seed(d_k)
    batch, seq, heads = 3, 9, 4
    qkv = torch.randn(batch, seq, 3, heads, d_k, generator=g, requires_grad=True)
    q, k = qkv[:, :, 0].transpose(1, 2), qkv[:, :, 1].transpose(1, 2)
    positions = (torch.arange(seq) + torch.arange(batch)[:, None] * 5) if per_row else torch.arange(seq)[None]
    cos, sin = RotaryEmbedding(d_k)(positions)
    assert fused.rotary_ok(q, cos) and fused.rotary_ok(k, cos) and not q.is_contiguous()
    ups = (torch.randn(batch, heads, seq, d_k, generator=g), torch.randn(batch, heads, seq, d_k, generator=g))
    got = fused.rotate_qk(q, k, cos, sin)
    want = (apply_rotary(q, cos, sin), apply_rotary(k, cos, sin))
    for a, b in zip(got, want):
        _close(a, b)
    _close(_grads(got, ups, [qkv])[0], _grads(want, ups, [qkv])[0])


def test_rotary_refuses_shapes_it_does_not_take():
    cos = torch.zeros(1, 1, 5, 8)
    assert not fused.rotary_ok(torch.zeros(2, 3, 5, 8).transpose(-1, -2), cos.transpose(-1, -2))
    assert not fused.rotary_ok(torch.zeros(2, 3, 4, 8), cos)  # another length
    assert not fused.rotary_ok(torch.zeros(2, 3, 5, 8), torch.zeros(3, 1, 5, 8))  # another batch


def test_the_fused_path_is_left_where_torch_must_see_its_own_operators():
    x = torch.randn(2, 8)
    assert fused.usable(x)
    assert not fused.usable(x.double()) and not fused.usable(x.bfloat16())
    norm = RMSNorm(8)
    # torch.func differentiates the composite (a custom Function without vmap rules would refuse)
    per_sample = torch.func.vmap(torch.func.grad(lambda row: norm(row).sum()))(x)
    xg = x.clone().requires_grad_()
    want = torch.autograd.grad(norm.math(xg).sum(), xg)[0]
    _close(per_sample, want)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ff = FeedForward(8, 16, activation="swiglu")
        assert ff(x).dtype == torch.bfloat16  # W_2's product under autocast (SwiGLU's kernel took bf16 operands)


def _llama_lm():
    torch.manual_seed(0)
    cfg = ModelConfig(arch="decoder", vocab_size=50, d_model=64, n_heads=4, n_layers=2, d_ff=160,
                      norm="rmsnorm", norm_position="pre", activation="swiglu", pe="rope", max_len=64)
    return build_model(cfg)


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
def test_an_llama_form_model_gives_the_reference_paths_loss_and_gradients(train):
    model = _llama_lm().train(train)
    ids = torch.randint(0, 50, (3, 21), generator=torch.Generator().manual_seed(1))

    def loss_and_grads():
        logits = model(ids[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        return loss, torch.autograd.grad(loss, list(model.parameters()))

    loss, grads = loss_and_grads()
    with reference_path(model):
        ref_loss, ref_grads = loss_and_grads()
    torch.testing.assert_close(loss, ref_loss, rtol=1e-6, atol=1e-6)
    for (name, _), a, b in zip(model.named_parameters(), grads, ref_grads):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")


def test_second_order_gradients_take_the_reference_path():
    """The fused backward is not differentiable again (refused, not silently wrong); inside reference_path
    a second-order gradient goes through the explicit math."""
    model = _llama_lm()
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(2))
    params = list(model.parameters())

    def grad_norm():
        loss = model(ids).logsumexp(-1).mean()
        grads = torch.autograd.grad(loss, params, create_graph=True)
        return sum(g.pow(2).sum() for g in grads)

    with pytest.raises(RuntimeError):
        torch.autograd.grad(grad_norm(), params[0])
    with reference_path(model):
        second = torch.autograd.grad(grad_norm(), params[0])[0]
    assert torch.isfinite(second).all() and second.abs().sum() > 0


def _one_bf16_rounding(got, want):
    """Within a rounding or two of bf16 (8 significant bits) of the largest value: the kernel rounds once
    from float, the reference's composite rounds where its operators do (the rotation's two bf16 terms are
    each rounded before they are summed, so a sum near 0 differs by an ulp of its terms)."""
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.float(), want.float(), rtol=2 ** -7, atol=2 ** -7 * want.abs().max().item())


@pytest.mark.parametrize("shape", [(7, 131), (2, 64, 96)])
def test_swiglu_on_bf16_operands_equals_the_float_composite_rounded(shape, threads):
    """Under bf16 autocast SwiGLU's operands are bf16 (the products' outputs): the kernel reads them as
    float and rounds each result once; the reference is the composite in float32 from the same bf16 values,
    rounded to bf16 — values and both gradients. (131: the vector loop's tail.)"""
    g = torch.Generator().manual_seed(shape[-1])
    gate = (torch.randn(*shape, generator=g) * 3).bfloat16().requires_grad_()
    pre = torch.randn(*shape, generator=g).bfloat16().requires_grad_()
    up = torch.randn(*shape, generator=g).bfloat16()
    assert fused.usable(gate, pre, dtypes=fused.WITH_BF16) and not fused.usable(gate, pre)
    act = fused.swiglu(gate, pre)
    d_gate, d_pre = torch.autograd.grad(act, (gate, pre), up)
    gf, pf = gate.detach().float().requires_grad_(), pre.detach().float().requires_grad_()
    ref = F.silu(gf) * pf
    r_gate, r_pre = torch.autograd.grad(ref, (gf, pf), up.float())
    _one_bf16_rounding(act, ref.bfloat16())
    _one_bf16_rounding(d_gate, r_gate.bfloat16())
    _one_bf16_rounding(d_pre, r_pre.bfloat16())


def test_rotary_of_bf16_q_and_k_equals_apply_rotarys_promotion(threads):
    """Autocast's QKV product is bf16; the composite's q · cos (float32 angles) promotes it to float32,
    and so does the kernel, reading the bf16 views in place. The gradients go back to the bf16 product."""
    g = torch.Generator().manual_seed(5)
    batch, seq, heads, d_k = 3, 9, 4, 32
    qkv = torch.randn(batch, seq, 3, heads, d_k, generator=g).bfloat16().requires_grad_()
    q, k = qkv[:, :, 0].transpose(1, 2), qkv[:, :, 1].transpose(1, 2)
    cos, sin = RotaryEmbedding(d_k)(torch.arange(seq)[None])
    assert fused.usable(q, k, dtypes=fused.WITH_BF16) and fused.usable(cos, sin) and fused.rotary_ok(q, cos)
    ups = (torch.randn(batch, heads, seq, d_k, generator=g), torch.randn(batch, heads, seq, d_k, generator=g))
    got = fused.rotate_qk(q, k, cos, sin)
    want = (apply_rotary(q, cos, sin), apply_rotary(k, cos, sin))
    for a, b in zip(got, want):
        assert a.dtype == b.dtype == torch.float32
        _close(a, b)
    _one_bf16_rounding(_grads(got, ups, [qkv])[0], _grads(want, ups, [qkv])[0])
