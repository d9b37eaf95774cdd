"""Issue 12's new ablation tasks and measurements, each against a reference computed here by hand
(Python loops, NumPy, scikit-learn), never against the code under test."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.metrics.pairwise import cosine_similarity

from glassformer.experiments.attention_cost import exponent, saved_bytes
from glassformer.experiments.khop import FIRST as KHOP_FIRST, PointerTask
from glassformer.experiments.layer_probes import attention_distance, attention_entropy, mean_pairwise_cosine
from glassformer.experiments.pe_relative_use import toeplitz_share
from glassformer.experiments.recall_extrapolation import FIRST as RX_FIRST, RecallTask
from glassformer.experiments.runner import IGNORE, PAD


def test_pointer_chasing_targets_follow_the_listed_edges_k_times():
    task = PointerTask(n_nodes=6, hops=3)
    ids, targets = task.batch(16, torch.Generator().manual_seed(0))
    N = task.n_nodes
    for row, tgt in zip(ids.tolist(), targets.tolist()):
        edges = [t - KHOP_FIRST for t in row[:N]]
        f = {e // N: e % N for e in edges}  # the row's own edge list, decoded by hand
        assert sorted(f) == list(range(N)) and sorted(f.values()) == list(range(N))  # a permutation
        assert tgt[:N] == [IGNORE] * N
        for tok, y in zip(row[N:], tgt[N:]):
            node = tok - KHOP_FIRST - N * N
            for _ in range(3):
                node = f[node]
            assert y == KHOP_FIRST + N * N + node


def test_copy_rows_ask_for_the_next_token_of_the_copy():
    ids, targets = RecallTask("copy").batch(8, torch.Generator().manual_seed(1), length=21)
    for row, tgt in zip(ids.tolist(), targets.tolist()):
        p = row.index(3)  # SEP
        x = row[:p]
        assert row[p + 1:] == x and len(row) == 2 * p + 1 == 21
        assert tgt[:p] == [IGNORE] * p and tgt[p:p + p] == x and tgt[-1] == IGNORE


def test_recall_rows_ask_for_each_keys_value():
    task = RecallTask("recall")
    ids, targets = task.batch(8, torch.Generator().manual_seed(2))  # random sizes, right-padded
    for row, tgt in zip(ids.tolist(), targets.tolist()):
        row = [t for t in row if t != PAD]
        p = len(row) // 3
        pairs = dict(zip(row[0:2 * p:2], row[1:2 * p:2]))
        assert len(pairs) == p  # keys are distinct within a row
        assert all(RX_FIRST <= k < RX_FIRST + task.n_keys for k in pairs)
        assert sorted(row[2 * p:]) == sorted(pairs)
        assert [pairs[k] for k in row[2 * p:]] == tgt[2 * p:3 * p] and tgt[:2 * p] == [IGNORE] * (2 * p)


def test_mean_pairwise_cosine_is_sklearns_off_diagonal_mean():
    h = torch.randn(7, 12, generator=torch.Generator().manual_seed(3))
    c = cosine_similarity(h.numpy())
    assert mean_pairwise_cosine(h) == pytest.approx(c[~np.eye(7, dtype=bool)].mean(), abs=1e-6)


def test_attention_distance_and_entropy_by_hand():
    p = torch.softmax(torch.randn(2, 5, 5, generator=torch.Generator().manual_seed(4)), -1)
    P = p.numpy().astype(np.float64)
    dist = np.mean([sum(P[h, i, j] * abs(i - j) for j in range(5)) for h in range(2) for i in range(5)])
    ent = np.mean([-sum(P[h, i, j] * np.log(P[h, i, j]) for j in range(5)) for h in range(2) for i in range(5)])
    assert attention_distance(p) == pytest.approx(dist, rel=1e-6)
    assert attention_entropy(p) == pytest.approx(ent, rel=1e-6)
    assert attention_distance(torch.eye(5)[None]) == 0.0  # every query on itself: distance 0


def test_toeplitz_share_is_one_for_a_function_of_the_offset_and_matches_numpy():
    n = 9
    T = torch.tensor([[np.cos(0.7 * (i - j)) for j in range(n)] for i in range(n)])
    assert toeplitz_share(T) == pytest.approx(1.0)
    S = torch.randn(n, n, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    vals = {}
    for i in range(n):
        for j in range(i + 1):
            vals.setdefault(i - j, []).append(float(S[i, j]))
    allv = np.concatenate([v for v in vals.values()])
    within = sum(((np.asarray(v) - np.mean(v)) ** 2).sum() for v in vals.values())
    assert toeplitz_share(S) == pytest.approx(1 - within / ((allv - allv.mean()) ** 2).sum())


def test_saved_bytes_counts_what_autograd_keeps_and_the_exponent_is_a_log_log_slope():
    a = torch.randn(1000, requires_grad=True)
    b = torch.randn(1000, requires_grad=True)
    assert saved_bytes(lambda: a * b) == 2 * 1000 * 4  # a product saves both factors (float32)
    ns = [100, 200, 400, 800]
    assert exponent(ns, [3.0 * n ** 2 for n in ns]) == pytest.approx(2.0)
    assert exponent(ns, [5.0 * n for n in ns]) == pytest.approx(1.0)


def test_char_text_targets_are_the_next_character_of_held_out_text():
    from glassformer.experiments.text_task import FIRST_CHAR, CharTextTask, _streams
    task = CharTextTask(seq_len=40)
    alphabet = _streams(task.corpus)[0]
    (ids, targets), = task.batches(1, 3, seed=0)
    assert ids.shape == targets.shape == (3, 40)
    assert torch.equal(ids[:, 1:], targets[:, :-1])
    assert 0 < task.chance < 0.02 and task.vocab_size == FIRST_CHAR + len(alphabet) + 1
    from glassformer.data.corpora import load_corpus, split_documents
    _, valid = split_documents(load_corpus("fortunes-en"), valid_fraction=0.1, seed=0)
    text = "".join(alphabet[i - FIRST_CHAR] if i - FIRST_CHAR < len(alphabet) else "?" for i in ids[0].tolist())
    if "?" not in text:
        assert text in "\n\n".join(valid)  # a window of the held-out documents, not of the training ones
