"""The fused head + cross-entropy (nn/loss.py) against torch's F.cross_entropy over materialised logits."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from glassformer.config import ModelConfig
from glassformer.errors import InputError
from glassformer.nn import build_model
from glassformer.nn.loss import chunk_rows, linear_cross_entropy
from glassformer.train.evaluate import batch_loss, mean_loss


def _torch_side(h, W, b, t, **kw):
    h = h.detach().clone().requires_grad_()
    W = W.detach().clone().requires_grad_()
    loss = F.cross_entropy(F.linear(h, W, b), t, **kw)
    loss.backward()
    return loss.detach(), h.grad, W.grad


def _fused_side(h, W, b, t, chunk=None, **kw):
    h = h.detach().clone().requires_grad_()
    W = W.detach().clone().requires_grad_()
    loss = linear_cross_entropy(h, W, b, t, chunk=chunk, **kw)
    loss.backward()
    return loss.detach(), h.grad, W.grad


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), vocab=st.integers(2, 50), chunk=st.integers(1, 45), bias=st.booleans(),
       eps=st.sampled_from([0.0, 0.1, 1.0]), reduction=st.sampled_from(["sum", "mean"]),
       n_ignored=st.integers(0, 5), seed=st.integers(0, 10_000))
def test_loss_and_gradients_equal_torch(n, vocab, chunk, bias, eps, reduction, n_ignored, seed):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(n, 8, generator=g, dtype=torch.float64)
    W = torch.randn(vocab, 8, generator=g, dtype=torch.float64)
    b = torch.randn(vocab, generator=g, dtype=torch.float64) if bias else None
    t = torch.randint(0, vocab, (n,), generator=g)
    t[:min(n_ignored, n - 1)] = -100  # some rows without a target, never all of them here
    kw = dict(ignore_index=-100, label_smoothing=eps, reduction=reduction)
    ref, fused = _torch_side(h, W, b, t, **kw), _fused_side(h, W, b, t, chunk=chunk, **kw)
    for a, f in zip(ref, fused):
        torch.testing.assert_close(f, a, rtol=1e-10, atol=1e-12)


def test_float32_on_the_benchmark_shape():
    # the shape of the training benchmark's head (2,048 tokens, d_model 256, 8,000 words) in float32
    g = torch.Generator().manual_seed(0)
    h, W = torch.randn(2048, 256, generator=g), torch.randn(8000, 256, generator=g) * 0.05
    t = torch.randint(0, 8000, (2048,), generator=g)
    assert chunk_rows(8000, 2048) < 2048  # several slices, so the slicing is what is tested
    ref, fused = _torch_side(h, W, None, t), _fused_side(h, W, None, t)
    torch.testing.assert_close(fused[0], ref[0], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(fused[1], ref[1], rtol=1e-4, atol=1e-7)
    torch.testing.assert_close(fused[2], ref[2], rtol=1e-4, atol=1e-6)


def test_chunk_rows():
    assert chunk_rows(8000, 2048) == 512  # 16 MB of float32 logits per slice
    assert chunk_rows(50_257, 4096) == 64  # at least 64 rows, whatever the vocabulary
    assert chunk_rows(100, 300) == 300  # a small vocabulary: one slice
    assert chunk_rows(100, 0) == 1


def test_every_target_ignored_matches_torch():
    h, W = torch.randn(4, 8, dtype=torch.float64), torch.randn(10, 8, dtype=torch.float64)
    t = torch.full((4,), -100)
    ours, ref = _fused_side(h, W, None, t, reduction="sum"), _torch_side(h, W, None, t, reduction="sum")
    assert float(ours[0]) == float(ref[0]) == 0.0
    for a, b in zip(ours[1:], ref[1:]):
        torch.testing.assert_close(a, b)  # zero gradients on both sides
    assert math.isnan(float(linear_cross_entropy(h, W, None, t, reduction="mean")))
    assert math.isnan(float(F.cross_entropy(F.linear(h, W), t, reduction="mean")))


def _model(arch, **kw):
    torch.manual_seed(0)
    cfg = ModelConfig(arch=arch, vocab_size=97, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0,
                      pad_id=0, bos_id=1, eos_id=2, **kw)
    return build_model(cfg).double()


@pytest.mark.parametrize("arch", ["decoder", "encoder-decoder"])
@pytest.mark.parametrize("kw", [{}, {"tie_embeddings": False}, {"tied_head_rescale": True},
                                {"head_bias": True, "tie_embeddings": False}])
def test_model_targets_equal_logits_then_cross_entropy(arch, kw):
    model = _model(arch, **kw)
    g = torch.Generator().manual_seed(1)
    ids, tgt = torch.randint(1, 97, (3, 7), generator=g), torch.randint(1, 97, (3, 7), generator=g)
    tgt[1, 4:] = 0  # padding targets
    inputs = (ids,) if arch == "decoder" else (ids, ids)
    kwargs = dict(ignore_index=0, label_smoothing=0.1, reduction="sum")
    ref = F.cross_entropy(model(*inputs).reshape(-1, 97), tgt.reshape(-1), **kwargs)
    ref.backward()
    ref_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    fused = model(*inputs, targets=tgt, **kwargs)
    fused.backward()
    torch.testing.assert_close(fused, ref, rtol=1e-12, atol=1e-12)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, ref_grads[name], rtol=1e-9, atol=1e-12, msg=name)


def test_a_trained_head_bias_takes_the_logits_path():
    # the head's bias is a buffer; if a user makes it trainable, the loss must still train it
    model = _model("decoder", head_bias=True, tie_embeddings=False)
    model.head.b_U.requires_grad_(True)
    ids = torch.randint(1, 97, (2, 6), generator=torch.Generator().manual_seed(3))
    model(ids, targets=ids).backward()
    b = model.head.b_U.detach().clone().requires_grad_()
    logits = model(ids).detach() - model.head.b_U.detach() + b  # the same logits as a function of b
    F.cross_entropy(logits.reshape(-1, 97), ids.reshape(-1)).backward()
    torch.testing.assert_close(model.head.b_U.grad, b.grad)


def test_trace_sees_the_logits_and_the_same_loss():
    model = _model("decoder")
    ids = torch.randint(1, 97, (2, 6), generator=torch.Generator().manual_seed(2))
    loss, trace = model.run_with_trace(ids, targets=ids, names=["logits", "probs"])
    logits = model(ids)  # the fast path; a trace runs the explicit math path (equal to float32 rounding)
    torch.testing.assert_close(trace["logits"], logits, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(trace["probs"], torch.softmax(logits, -1), rtol=1e-5, atol=1e-6, check_dtype=False)
    torch.testing.assert_close(loss, F.cross_entropy(trace["logits"].reshape(-1, 97), ids.reshape(-1)))


def test_evaluation_loss_without_gradients_matches_torch():
    model = _model("encoder-decoder")
    src = [torch.randint(3, 97, (n,)).tolist() for n in (3, 5, 8)]
    examples = [(s, s[::-1]) for s in src]
    cfg = model.config
    with torch.no_grad():
        total, count = 0.0, 0
        for s, t in examples:
            tgt = torch.tensor([[cfg.start_id] + t + [cfg.eos_id]])
            logits = model(torch.tensor([s]), tgt[:, :-1])
            total += float(F.cross_entropy(logits.reshape(-1, 97), tgt[:, 1:].reshape(-1), reduction="sum"))
            count += tgt.shape[1] - 1
    assert mean_loss(model, examples, batch_size=2) == pytest.approx(total / count, rel=1e-10)


def test_batch_loss_counts_only_real_targets():
    model = _model("decoder")
    inp = torch.tensor([[5, 6, 7, 0], [5, 6, 7, 8]])
    out = torch.tensor([[6, 7, 0, 0], [6, 7, 8, 9]])
    loss, n = batch_loss(model, {"inp": inp, "out": out}, pad_id=0)
    ref = F.cross_entropy(model(inp).reshape(-1, 97), out.reshape(-1), ignore_index=0, reduction="sum")
    assert n == 6
    torch.testing.assert_close(loss, ref, rtol=1e-12, atol=1e-12)


def test_bad_targets_stop_with_one_line():
    model = _model("decoder")
    ids = torch.randint(1, 97, (2, 5))
    with pytest.raises(InputError, match=r"target id 97 is outside the vocabulary \[0, 97\)"):
        model(ids, targets=torch.full((2, 5), 97))
    with pytest.raises(InputError, match=r"targets must be a tensor of ids shaped like .*\(2, 5\), got \(2, 4\)"):
        model(ids, targets=ids[:, :4])
    with pytest.raises(InputError, match="targets must be integer token ids"):
        model(ids, targets=ids.float())
    with pytest.raises(InputError, match="does not train the head's bias"):
        linear_cross_entropy(torch.randn(2, 4), torch.randn(5, 4), torch.zeros(5, requires_grad=True),
                             torch.tensor([1, 2]))
    with pytest.raises(InputError, match="reduction='none' is not supported"):
        linear_cross_entropy(torch.randn(2, 4), torch.randn(5, 4), None, torch.tensor([1, 2]), reduction="none")
