"""Tracing (issue 3 §1): hook names are a contract, tracing changes nothing, hooks patch and always go away."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from glassformer.config import ModelConfig
from glassformer.nn import build_model
from glassformer.trace import hook_points, hooks, run_with_trace
from numpy_encoder import encoder_forward

GOLDEN = Path(__file__).parent / "golden" / "hook_names_encdec_1layer.txt"


def _encdec(**kw):
    cfg = ModelConfig(arch="encoder-decoder", vocab_size=11, d_model=8, n_heads=2, n_layers=1, d_ff=16, **kw)
    return build_model(cfg).eval()


def _encoder(**kw):
    """A float64 encoder; its sinusoids and softmax still run in float32, hence 1e-6 tolerances below."""
    settings = dict(arch="encoder", vocab_size=7, d_model=8, n_heads=2, n_layers=2, d_ff=16,
                    activation="gelu_tanh")
    settings.update(kw)
    model = build_model(ModelConfig(**settings)).to(torch.float64).eval()
    with torch.no_grad():  # move every bias and norm gain off its init, so none can hide a bug
        for name, p in model.named_parameters():
            if name.endswith(("gamma", "beta")) or ".b_" in name:
                p.add_(0.2 * torch.randn_like(p))
    return model


def test_golden_hook_names_of_a_one_layer_encoder_decoder():
    model = _encdec()
    with torch.no_grad():
        _, trace = model.run_with_trace(torch.tensor([[3, 4, 5]]), torch.tensor([[1, 6]]))
    assert list(trace) == GOLDEN.read_text(encoding="utf-8").split()
    # the names, spot-checked independently of the golden file
    for name in ("embed", "pos", "x0", "enc.0.attn.scores", "enc.0.attn.scaled", "enc.0.attn.pattern",
                 "enc.0.resid_mid", "enc.0.norm1", "enc.0.ffn.act", "dec.0.self_attn.z",
                 "dec.0.cross_attn.pattern", "logits", "probs"):
        assert name in trace
    assert tuple(trace["enc.0.attn.q"].shape) == (1, 2, 3, 4)  # (batch, heads, seq, d_k)
    assert tuple(trace["dec.0.cross_attn.scores"].shape) == (1, 2, 2, 3)  # (batch, heads, tgt, src)


@pytest.mark.parametrize("impl", ["fast", "math"])
def test_output_with_tracing_equals_output_without(impl):
    model = _encdec(attn_impl=impl, norm_position="pre")
    src, tgt = torch.tensor([[3, 4, 5, 6]]), torch.tensor([[1, 6, 2]])
    with torch.no_grad():
        plain = model(src, tgt)
        traced, trace = model.run_with_trace(src, tgt)
    if impl == "math":  # same code path: bit for bit
        assert torch.equal(plain, traced)
    else:  # tracing takes the explicit math path; the fused kernel agrees to float32 rounding
        torch.testing.assert_close(traced, plain, rtol=0, atol=1e-5)
    torch.testing.assert_close(trace["logits"], plain)
    torch.testing.assert_close(trace["probs"], torch.softmax(plain, -1))


def test_names_filter_keeps_order_and_only_matches():
    model = _encoder()
    with torch.no_grad():
        _, trace = run_with_trace(model, torch.tensor([[1, 2, 3]]), names=["enc.*.attn.pattern", "x0"])
    assert list(trace) == ["x0", "enc.0.attn.pattern", "enc.1.attn.pattern"]
    assert list(trace.filter("**.pattern")) == ["enc.0.attn.pattern", "enc.1.attn.pattern"]


@pytest.mark.parametrize("position", ["post", "pre"])
def test_zeroing_one_head_matches_numpy_with_that_head_zeroed(position):
    model = _encoder(norm_position=position)
    ids = [1, 4, 2, 6]
    params = {k: v.numpy() for k, v in model.state_dict().items()}
    cfg = model.config.to_dict()

    def zero_head_1(z, name):
        z = z.clone()
        z[:, 1] = 0.0  # (batch, head, seq, d_k): head index 1
        return z

    with torch.no_grad():
        plain = model(torch.tensor([ids]))
        with hooks(model, {"enc.0.attn.z": zero_head_1}):
            patched = model(torch.tensor([ids]))
    want = encoder_forward(params, ids, cfg, zero_head=(0, 1))["output"]
    np.testing.assert_allclose(patched[0].numpy(), want, atol=1e-6)
    assert not torch.allclose(plain, patched, atol=1e-3)  # the intervention did something
    np.testing.assert_allclose(plain[0].numpy(), encoder_forward(params, ids, cfg)["output"], atol=1e-6)


def _no_hooks_left(model) -> bool:
    return all(not m._forward_hooks for m in hook_points(model).values())


def test_hooks_are_removed_after_an_exception_inside_the_context():
    model = _encoder(attn_impl="fast")
    ids = torch.tensor([[1, 2, 3]])
    with pytest.raises(RuntimeError, match="boom"):
        with hooks(model, {"enc.*.attn.z": lambda z, n: z * 0}):
            assert not _no_hooks_left(model)
            raise RuntimeError("boom")
    assert _no_hooks_left(model)
    assert all(not m.force_math for m in model.modules() if hasattr(m, "force_math"))  # fast path restored

    def bad_hook(t, name):
        raise ValueError("hook failed")

    with pytest.raises(ValueError, match="hook failed"):
        with hooks(model, {"enc.0.ffn.act": bad_hook}):
            model(ids)
    assert _no_hooks_left(model)
    with torch.no_grad():  # and the model is unpatched afterwards
        np.testing.assert_allclose(model(ids)[0].numpy(),
                                   encoder_forward({k: v.numpy() for k, v in model.state_dict().items()},
                                                   [1, 2, 3], model.config.to_dict())["output"], atol=1e-6)


def test_unknown_hook_pattern_is_a_one_line_error():
    from glassformer.errors import InputError

    model = _encoder()
    with pytest.raises(InputError, match="no hook point matches enc.0.atn.z") as err:
        with hooks(model, {"enc.0.atn.z": lambda z, n: z}):
            pass
    assert "\n" not in str(err.value)
    assert _no_hooks_left(model)
