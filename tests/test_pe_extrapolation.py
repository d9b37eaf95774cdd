"""pe-extrapolation's two de-confounded pieces (issue 28 §4) on a tiny model, each against a number
computed another way: the loss past the training length L against a by-hand (NumPy) masked mean of
per-position losses, and the learned table's initial scale against the token vectors'."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from glassformer.experiments.base import seeded, tiny_config
from glassformer.experiments.pe_extrapolation import side_losses, token_scale_positions
from glassformer.experiments.runner import IGNORE
from glassformer.experiments.synthetic import TaggingTask
from glassformer.nn import build_model

L = 6
TASK = TaggingTask("lag", n_symbols=5, min_len=3, max_len=14, a=1)


def tiny(pe: str = "sinusoidal"):
    cfg = tiny_config(TASK.vocab_size, pe=pe, max_len=16, d_model=32, n_heads=2, n_layers=1, d_ff=64)
    torch.manual_seed(0)
    return build_model(cfg).eval()


def masked_means_by_hand(model, batches, L):
    """Per-position −log softmax(logits)[target], from the logits by hand, averaged per side of L."""
    side = {"beyond": [], "within": []}
    for ids, targets in batches:
        with torch.no_grad():
            z = model(ids).double().numpy()
        y = targets.numpy()
        for b in range(z.shape[0]):
            for t in range(z.shape[1]):
                if y[b, t] == IGNORE:  # the first position (no x_{-1}) and padding
                    continue
                row = z[b, t]
                nll = math.log(np.exp(row - row.max()).sum()) + row.max() - row[y[b, t]]
                side["beyond" if t >= L else "within"].append(nll)
    return {k: float(np.mean(v)) if v else float("nan") for k, v in side.items()}


def test_beyond_L_loss_is_the_masked_mean_over_positions_past_L():
    """Padded rows of random lengths 3–14 (some end before L: they add nothing past L) and two batches."""
    model = tiny()
    batches = TASK.batches(2, 8, seed=3)
    assert any(int((y[i, L:] != IGNORE).sum()) == 0 for _, y in batches for i in range(len(y)))
    want = masked_means_by_hand(model, batches, L)
    got = side_losses(model, batches, L)
    assert got["beyond"] == pytest.approx(want["beyond"], rel=1e-6)
    assert got["within"] == pytest.approx(want["within"], rel=1e-6)
    # the point of the fix: the whole-row mean is a different number from either side
    whole = (want["beyond"] * sum(int((y[:, L:] != IGNORE).sum()) for _, y in batches)
             + want["within"] * sum(int((y[:, :L] != IGNORE).sum()) for _, y in batches)) / \
        sum(int((y != IGNORE).sum()) for _, y in batches)
    assert abs(whole - got["beyond"]) > 1e-4


def test_beyond_L_loss_of_rows_no_longer_than_L_is_undefined():
    model = tiny()
    got = side_losses(model, TASK.batches(1, 4, seed=1, length=L), L)  # t = 0..L−1 only
    assert math.isnan(got["beyond"]) and math.isfinite(got["within"])


def test_learned_table_starts_at_the_token_vectors_scale():
    cfg = tiny_config(TASK.vocab_size, pe="learned", max_len=64)  # d_model 64, embed_scale on
    model = seeded(lambda: token_scale_positions(build_model(cfg)), 0)
    token_vectors = model.embed(torch.arange(TASK.vocab_size)).detach().numpy()  # what the table is added to
    table = model.pos.W_pos.detach().numpy()
    assert np.std(table) == pytest.approx(np.std(token_vectors), rel=0.1)  # 4096 draws: ~1% sampling error
    assert abs(np.mean(table)) < 0.1
    # the rows past L are as large as a token vector, not the near-zero GPT-2 init (0.02 · √64 = 0.16)
    assert np.linalg.norm(table[16:], axis=1).mean() == pytest.approx(
        np.linalg.norm(token_vectors, axis=1).mean(), rel=0.2)
    # the library's own table now starts at that scale too (GPT-2's 0.02 until 2026-12-04)
    plain = seeded(lambda: build_model(cfg), 0).pos.W_pos.detach().numpy()
    assert np.std(plain) == pytest.approx(np.std(token_vectors), rel=0.1)


def test_token_scale_init_is_reproducible_per_seed():
    cfg = tiny_config(TASK.vocab_size, pe="learned", max_len=32)
    a, b, c = (seeded(lambda: token_scale_positions(build_model(cfg)), s).pos.W_pos for s in (0, 0, 1))
    assert torch.equal(a, b) and not torch.equal(a, c)
