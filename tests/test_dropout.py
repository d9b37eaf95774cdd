"""nn/dropout.py: the CPU mask drawn 16 bits at a time, against the definition of inverted dropout
(zero with probability p, scale the rest by 1/(1 − p)) checked with binomial bounds, by hand, and
against torch's autograd."""

from __future__ import annotations

import math

import pytest
import torch

from glassformer.config import ModelConfig
from glassformer.nn.dropout import Dropout, dropout, keep_mask, quantised_rate
from glassformer.nn.model import build_model


def _within_binomial(count: int, n: int, p: float, sigmas: float = 5.0) -> bool:
    return abs(count - n * p) <= sigmas * math.sqrt(n * p * (1 - p))


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.9])
def test_the_mask_drops_each_element_with_probability_p_in_every_16_bit_lane(p):
    torch.manual_seed(0)
    n = 400_003  # not a multiple of 4: the last 64-bit draw is cut
    keep = keep_mask(torch.Size([n]), p)
    assert keep.shape == (n,) and keep.dtype == torch.bool
    assert _within_binomial(int((~keep).sum()), n, p)
    # each of the four 16-bit lanes of a 64-bit draw on its own, and neighbours independent
    for lane in range(4):
        part = keep[lane::4]
        assert _within_binomial(int((~part).sum()), part.numel(), p), lane
    both = int((~keep[:-1] & ~keep[1:]).sum())
    assert _within_binomial(both, n - 1, p * p, sigmas=6.0)


def test_the_rate_is_p_rounded_to_a_sixteenth_of_a_sixteen_bit_step():
    assert quantised_rate(0.1) == 6554 / 65536
    assert abs(quantised_rate(0.1) - 0.1) < 1 / 65536
    assert quantised_rate(0.25) == 0.25


def test_kept_values_are_scaled_so_the_expectation_is_the_input():
    torch.manual_seed(1)
    x = torch.randn(64, 33, 17, dtype=torch.float64)
    y = dropout(x, 0.3, True)
    kept = y != 0
    q = quantised_rate(0.3)
    torch.testing.assert_close(y[kept], x[kept] / (1 - q), rtol=1e-15, atol=0)
    ones = torch.ones(2_000_000, dtype=torch.float64)
    mean = dropout(ones, 0.3, True).mean().item()
    sd = math.sqrt(q / (1 - q) / ones.numel())  # of the mean of Bernoulli(1 − q)/(1 − q)
    assert abs(mean - 1.0) < 5 * sd


def test_the_gradient_is_torch_autograd_of_the_same_masked_product():
    torch.manual_seed(2)
    x = torch.randn(8, 16, 32, dtype=torch.float64, requires_grad=True)
    g = torch.randn(8, 16, 32, dtype=torch.float64)
    state = torch.get_rng_state()
    y = dropout(x, 0.2, True)
    y.backward(g)
    torch.set_rng_state(state)  # the same draw, so the same mask, through torch's own ops
    keep = keep_mask(x.shape, 0.2)
    x2 = x.detach().clone().requires_grad_(True)
    y2 = torch.where(keep, x2 / (1 - quantised_rate(0.2)), torch.zeros_like(x2))
    y2.backward(g)
    torch.testing.assert_close(y, y2, rtol=0, atol=1e-15)
    torch.testing.assert_close(x.grad, x2.grad, rtol=0, atol=1e-15)


def test_torch_manual_seed_fixes_the_mask_and_later_calls_draw_new_ones():
    x = torch.ones(1000)
    torch.manual_seed(3)
    a, b = dropout(x, 0.5, True), dropout(x, 0.5, True)
    torch.manual_seed(3)
    assert torch.equal(dropout(x, 0.5, True), a)
    assert not torch.equal(a, b)


def test_evaluation_p_zero_and_p_one():
    x = torch.randn(5, 7)
    assert dropout(x, 0.5, False) is x and dropout(x, 0.0, True) is x
    assert torch.equal(dropout(x, 1.0, True), torch.zeros_like(x))
    module = Dropout(0.5).eval()
    assert module(x) is x
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        Dropout(1.5)


def test_bf16_input_keeps_its_dtype():
    x = torch.randn(4, 9, dtype=torch.bfloat16)
    y = dropout(x, 0.1, True)
    assert y.dtype == torch.bfloat16 and y.shape == x.shape


def test_a_model_with_dropout_drops_about_p_of_each_sublayer_output_in_training_only():
    """In the model as trained: the residual stream, the FFN's hidden layer, the embeddings."""
    cfg = ModelConfig(arch="decoder", vocab_size=50, d_model=64, n_heads=4, n_layers=2, d_ff=256,
                      dropout=0.25, max_len=128)
    model = build_model(cfg)
    seen = {}
    model.dec[0].ffn.dropout.register_forward_hook(lambda m, i, o: seen.__setitem__("ffn", (i[0], o)))
    ids = torch.randint(0, 50, (16, 128))
    torch.manual_seed(4)
    model.train()
    a = model(ids)
    inp, out = seen["ffn"]
    nonzero = inp != 0
    dropped = int((out[nonzero] == 0).sum())
    assert _within_binomial(dropped, int(nonzero.sum()), quantised_rate(0.25))
    model.eval()
    b, c = model(ids), model(ids)
    assert torch.equal(b, c) and not torch.allclose(a, b)
