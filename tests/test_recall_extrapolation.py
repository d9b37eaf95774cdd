"""recall-extrapolation's de-confounded pieces (issue 28 §4), each against a number computed another way:
the accuracy past the training length L against a NumPy masked mean over hand-made rows, the learned
table's initial scale against the token vectors' (measured with torch), and the targets past L and
their distances counted by hand on one row of each task."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from glassformer.experiments.base import seeded, tiny_config
from glassformer.experiments.pe_extrapolation import side_scores
from glassformer.experiments.recall_extrapolation import (TEST_LENS, TRAIN_LEN, RecallTask, model_maker,
                                                          source_distance, targets_per_row)
from glassformer.experiments.runner import IGNORE
from glassformer.nn import build_model

COPY, RECALL = RecallTask("copy"), RecallTask("recall")
_ = IGNORE
SEP = 3
A, B, C = 4, 5, 6  # copy symbols (FIRST = 4)
K1, K2, K3 = 4, 5, 6  # recall keys; values follow the 96 keys
V1, V2, V3 = 100, 101, 102


def hand_batch():
    """Two copy rows (x = A B C and x = C A), right-padded: targets after SEP are the next copied token."""
    ids = torch.tensor([[A, B, C, SEP, A, B, C],
                        [C, A, SEP, C, A, 0, 0]])
    targets = torch.tensor([[_, _, _, A, B, C, _],
                            [_, _, C, A, _, _, _]])
    return ids, targets


def test_the_task_writes_the_hand_rows():
    gen = torch.Generator().manual_seed(0)
    ids, targets = COPY._row(3, gen)
    assert targets == [_] * 3 + ids[:3] + [_] and ids[3] == SEP and ids[4:] == ids[:3]


def test_beyond_L_accuracy_is_a_masked_mean_over_positions_past_L():
    cfg = tiny_config(COPY.vocab_size, pe="sinusoidal", max_len=16, d_model=32, n_heads=2, n_layers=1, d_ff=64)
    model = seeded(lambda: build_model(cfg), 0).eval()
    ids, targets = hand_batch()
    with torch.no_grad():
        pred = model(ids).numpy().argmax(-1)  # (batch, seq)
    y = targets.numpy()
    L = 4
    # by hand: row 0 scores positions 3, 4, 5 (4 and 5 past L), row 1 positions 2, 3 (none past L)
    beyond = [pred[0, 4] == y[0, 4], pred[0, 5] == y[0, 5]]
    within = [pred[0, 3] == y[0, 3], pred[1, 2] == y[1, 2], pred[1, 3] == y[1, 3]]
    got = side_scores(model, [(ids, targets)], L)
    assert got["beyond"]["accuracy"] == pytest.approx(np.mean(beyond))
    assert got["within"]["accuracy"] == pytest.approx(np.mean(within))
    # and with a model that is right exactly at the positions past L, the sides separate: 1 and 0
    oracle = torch.full((2, 7, COPY.vocab_size), 0.0)
    oracle[0, 4, B] = oracle[0, 5, C] = 1.0

    class Fixed(torch.nn.Module):
        def forward(self, x):
            return oracle
    sides = side_scores(Fixed(), [(ids, targets)], L)
    assert (sides["beyond"]["accuracy"], sides["within"]["accuracy"]) == (1.0, 0.0)


def test_learned_table_starts_at_the_token_vectors_scale():
    """The arm as the row builds it (the recall vocabulary, 256 rows): its table's std is the std of the
    token vectors it is added to (W_E × √d_model), within 10%."""
    cfg = tiny_config(RECALL.vocab_size, pe="learned", max_len=max(TEST_LENS))
    model = seeded(model_maker(cfg), 0)
    token_std = model.embed(torch.arange(RECALL.vocab_size)).detach().std()
    assert model.pos.W_pos.detach().std() == pytest.approx(float(token_std), rel=0.1)
    assert model.pos.W_pos.shape[0] == 256 and float(token_std) > 0.5  # ≈ 1, not GPT-2's 0.02
    assert model_maker(tiny_config(RECALL.vocab_size, pe="sinusoidal")) is None


def test_targets_past_L_and_their_distance_by_hand():
    """One row of each task: copy x = A B C (L = 4), recall k1 v1 k2 v2 k3 v3 then k3 k1 k2 (L = 7)."""
    ids, targets = hand_batch()
    beyond, within = targets_per_row(targets, 4)
    assert beyond.tolist() == [2, 0] and within.tolist() == [1, 2]
    assert source_distance(ids, targets)[0].tolist() == [0, 0, 0, 3, 3, 3, 0]  # every copy target: p back
    ids = torch.tensor([[K1, V1, K2, V2, K3, V3, K3, K1, K2]])
    targets = torch.tensor([[_, _, _, _, _, _, V3, V1, V2]])
    beyond, within = targets_per_row(targets, 7)
    assert (beyond.item(), within.item()) == (2, 1)  # positions 7, 8 past L; 6 before it
    assert source_distance(ids, targets)[0, 6:].tolist() == [1, 6, 5]  # V3 at 5, V1 at 1, V2 at 3


def test_rows_of_the_test_lengths_score_past_L_as_the_setup_says():
    """Copy at 64: p = 31, targets at positions 31..61, of which 32..61 (30) are past 32; recall at 64:
    p = 21, targets at 42..62, all 21 past 32; at 128 and 256 every target is past 32."""
    want = {("copy", 64): (30, 1), ("copy", 128): (63, 0), ("copy", 256): (127, 0),
            ("recall", 64): (21, 0), ("recall", 128): (42, 0), ("recall", 256): (85, 0)}
    for (kind, n), counts in want.items():
        ids, targets = RecallTask(kind).batches(1, 3, seed=n, length=n)[0]
        beyond, within = targets_per_row(targets, TRAIN_LEN)
        assert set(zip(beyond.tolist(), within.tolist())) == {counts}, (kind, n)
        d = source_distance(ids, targets)[targets != IGNORE]
        if kind == "copy":  # the source sits p back, twice the longest distance of training (15)
            assert set(d.tolist()) == {(n - 1) // 2}
