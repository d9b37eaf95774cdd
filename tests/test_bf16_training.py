"""A training step under CPU bf16 autocast (`train --bf16`): the products run in bf16, attention's fused
kernel in float32 forward and backward (nn/attention.py `_sdpa`: its bf16 backward is 3.6× slower on CPU
at the LM's shapes), and the loss and gradients stay those of the float32 step to bf16's rounding —
for the paper's block (bf16 Q, K, V from autocast's GEMM) and LLaMA's (rotary positions promote them)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch.utils._python_dispatch import TorchDispatchMode

from glassformer.config import ModelConfig
from glassformer.nn import build_model

PAPER = dict(norm="layernorm", norm_position="post", activation="relu", pe="sinusoidal")
LLAMA = dict(norm="rmsnorm", norm_position="pre", activation="swiglu", pe="rope")


class _AttentionDtypes(TorchDispatchMode):
    """The dtypes of the tensors each scaled-dot-product kernel (forward or backward) is called with,
    as the dispatcher sees them: after autocast has cast what it casts."""

    def __init__(self):
        super().__init__()
        self.seen: list[tuple[str, set]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if "scaled_dot_product" in func.__name__:
            self.seen.append((func.__name__, {a.dtype for a in args if isinstance(a, torch.Tensor)}))
        return func(*args, **(kwargs or {}))


def _lm(block: dict):
    torch.manual_seed(0)
    cfg = ModelConfig(arch="decoder", vocab_size=40, d_model=32, n_heads=4, n_layers=2, d_ff=64, max_len=32,
                      **block)
    return build_model(cfg).train()


def _loss_and_grads(model, ids):
    logits = model(ids[:, :-1])
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
    return loss, torch.autograd.grad(loss, list(model.parameters()))


@pytest.mark.parametrize("block", [PAPER, LLAMA], ids=["paper", "llama"])
def test_attention_trains_in_float32_under_bf16_autocast_with_float32s_loss(block):
    model = _lm(block)
    ids = torch.randint(0, 40, (4, 17), generator=torch.Generator().manual_seed(1))
    ref_loss, ref_grads = _loss_and_grads(model, ids)
    spy = _AttentionDtypes()
    with torch.autocast("cpu", dtype=torch.bfloat16), spy:
        loss, grads = _loss_and_grads(model, ids)
    kernels = [name for name, _ in spy.seen]
    assert any("backward" in k for k in kernels) and len(kernels) >= 4, kernels  # two layers, each way
    assert all(dtypes == {torch.float32} for _, dtypes in spy.seen), spy.seen
    # the products in bf16 (8 significant bits): the loss within 1%, each gradient within a few % of its size
    torch.testing.assert_close(loss, ref_loss, rtol=1e-2, atol=0)
    for (name, _), g, r in zip(model.named_parameters(), grads, ref_grads):
        assert g.dtype == torch.float32, name
        if name.endswith("b_K"):  # its gradient is 0 (softmax ignores the q·b_K every score of a row shares)
            continue
        err = (g - r).norm() / r.norm().clamp_min(1e-12)
        assert err < 0.05, f"{name}: relative error {err:.3f}"


def test_evaluation_under_autocast_keeps_torchs_bf16_kernel():
    """Without gradients (evaluation under autocast) torch's kernel keeps autocast's bf16: only the
    backward was slow (the forward alone: 2.0 ms a call in bf16, 1.7 in float32, at the LM's shapes)."""
    model = _lm(PAPER).eval()
    spy = _AttentionDtypes()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16), spy:
        model(torch.randint(0, 40, (2, 9)))
    assert spy.seen and all(torch.bfloat16 in dtypes for _, dtypes in spy.seen), spy.seen
