"""The claims report's measurement functions against the same quantity written by hand in NumPy
(plain loops where they make the definition obvious), never against the code under test:
`selective_share` (ffn-memories, seed 003 §5), `content_distance` (attention-locality, seed 000 §2.6)
and `cross_cosine` (representation-convergence's anisotropy baseline, seed 000 §7.4)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from glassformer.errors import InputError
from glassformer.experiments.ffn_memories import MODAL, TOP_K, selective_share
from glassformer.experiments.layer_probes import content_distance, cross_cosine


# ---- selective_share: a neuron is token-selective when ≥ MODAL of its TOP_K top positions hold one token ----
def share_by_hand(tokens: np.ndarray, act: np.ndarray) -> float:
    n_pos, d_ff = act.shape
    selective = 0
    for j in range(d_ff):
        # rank positions by activation, highest first; equal activations: the earlier position first
        order = sorted(range(n_pos), key=lambda i: (-act[i, j], i))
        counts: dict[int, int] = {}
        for i in order[:TOP_K]:
            counts[int(tokens[i])] = counts.get(int(tokens[i]), 0) + 1
        selective += max(counts.values()) >= MODAL
    return selective / d_ff


@pytest.mark.parametrize("seed,n_pos,vocab", [(0, 40, 3), (1, 60, 6), (2, TOP_K, 2), (3, 200, 40)])
def test_selective_share_matches_a_hand_count(seed, n_pos, vocab):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, vocab, n_pos)
    act = rng.standard_normal((n_pos, 64)).astype(np.float32)
    want = share_by_hand(tokens, act)
    assert selective_share(torch.from_numpy(tokens), torch.from_numpy(act)) == pytest.approx(want, abs=1e-12)
    if seed == 1:
        assert 0 < want < 1  # a case that separates the neurons, not all-or-nothing


def test_selective_share_planted_neurons():
    """Neuron 0's top five positions all hold token 7 (selective), neuron 1 has MODAL − 1 of them in
    its top TOP_K (not), neuron 2 is random over tokens that never repeat (not)."""
    n_pos = 50
    tokens = np.arange(n_pos) + 10  # every position its own token ...
    hot = [3, 11, 20, 33, 47]
    tokens[hot] = 7  # ... except five that share token 7
    rng = np.random.default_rng(4)
    act = rng.uniform(0, 1, (n_pos, 3)).astype(np.float32)
    act[hot, 0] = 5.0
    act[hot[:MODAL - 1], 1] = 5.0
    act[hot[MODAL - 1:], 1] = 0.0  # the remaining token-7 positions fall out of neuron 1's top
    assert [share_by_hand(tokens, act[:, j:j + 1]) for j in range(3)] == [1.0, 0.0, 0.0]
    tokens_t, act_t = torch.from_numpy(tokens), torch.from_numpy(act)
    assert selective_share(tokens_t, act_t) == pytest.approx(1 / 3)
    assert [selective_share(tokens_t, act_t[:, j:j + 1]) for j in range(3)] == [1.0, 0.0, 0.0]


def test_selective_share_ties_at_the_cut_off_go_to_the_earlier_position():
    """Activations tied across the TOP_K cut-off: which positions count decides the answer. Five
    distinct tokens at 2.0, then ten positions tied at 1.0 for the five slots left: ties go to the
    earlier positions, so the neuron is selective exactly when the first five tied ones share a token."""
    act = np.array([2.0] * 5 + [1.0] * 10, dtype=np.float32)[:, None]
    early = np.array([1, 2, 3, 4, 6] + [5] * 5 + [20, 21, 22, 23, 24])
    late = np.array([1, 2, 3, 4, 6] + [20, 21, 22, 23, 24] + [5] * 5)
    assert share_by_hand(early, act) == 1.0 and share_by_hand(late, act) == 0.0
    assert selective_share(torch.from_numpy(early), torch.from_numpy(act)) == 1.0
    assert selective_share(torch.from_numpy(late), torch.from_numpy(act)) == 0.0
    # all activations equal (a dead neuron): its "top" is the first TOP_K positions
    flat = np.zeros((30, 2), dtype=np.float32)
    toks = np.array([3] * MODAL + list(range(100, 125)))
    assert selective_share(torch.from_numpy(toks), torch.from_numpy(flat)) == share_by_hand(toks, flat) == 1.0


def test_selective_share_refuses_fewer_positions_than_top_k_and_bad_shapes():
    with pytest.raises(InputError, match=f"at least TOP_K={TOP_K} positions"):
        selective_share(torch.tensor([4]), torch.randn(1, 8))  # a single token
    with pytest.raises(InputError, match="tokens \\(positions,\\) and act"):
        selective_share(torch.arange(12), torch.randn(11, 8))


# ---- content_distance: attention distance among content tokens, weights renormalised over them ----
def content_distance_by_hand(p: np.ndarray, special: np.ndarray) -> float:
    total, n = 0.0, 0
    content = [i for i in range(len(special)) if not special[i]]
    for h in range(p.shape[0]):
        for q in content:
            mass = sum(p[h, q, k] for k in content)
            total += sum(p[h, q, k] / mass * abs(q - k) for k in content)
            n += 1
    return total / n


def softmax_pattern(rng, heads: int, seq: int) -> np.ndarray:
    s = rng.standard_normal((heads, seq, seq)) * 2
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("special_at", [[0, 9], [0, 4, 9], [], [0, 1, 2, 3, 4, 5, 6, 7, 8]])
def test_content_distance_matches_a_hand_sum(special_at):
    """[CLS]/[SEP] at the ends, a [SEP] in the middle (distances across it stay in original positions),
    no special token (then it is the plain attention distance), and a single content token (distance 0)."""
    rng = np.random.default_rng(len(special_at))
    p = softmax_pattern(rng, 3, 10)
    special = np.zeros(10, dtype=bool)
    special[special_at] = True
    want = content_distance_by_hand(p, special)
    got = content_distance(torch.from_numpy(p).float(), torch.from_numpy(special))
    assert got == pytest.approx(want, rel=1e-6, abs=1e-9)
    if len(special_at) == 9:
        assert want == 0.0


def test_content_distance_ignores_padding_and_special_keys():
    """Padded keys with zero weight and special keys: removing them and renormalising must leave the
    distances among words as if the words had been attended to alone."""
    rng = np.random.default_rng(7)
    words = softmax_pattern(rng, 2, 5)  # attention among 5 words only, positions 1..5
    seq = 8  # [CLS] w w w w w [SEP] [PAD]
    p = np.zeros((2, seq, seq))
    p[:, 1:6, 1:6] = words * 0.6
    p[:, 1:6, 0] = 0.3  # every word sends 30% to [CLS], 10% to [SEP]
    p[:, 1:6, 6] = 0.1
    p[:, [0, 6, 7], :7] = 1 / 7  # special and pad queries: dropped, whatever they hold
    special = np.array([1, 0, 0, 0, 0, 0, 1, 1], dtype=bool)
    plain = float(np.mean([[sum(words[h, q, k] * abs(q - k) for k in range(5)) for q in range(5)]
                           for h in range(2)]))
    got = content_distance(torch.from_numpy(p), torch.from_numpy(special))
    assert got == pytest.approx(plain, rel=1e-9)
    assert got == pytest.approx(content_distance_by_hand(p, special), rel=1e-9)


def test_content_distance_refuses_what_it_cannot_measure():
    p = torch.full((1, 3, 3), 1 / 3)
    with pytest.raises(InputError, match="every position is special"):
        content_distance(p, torch.ones(3, dtype=torch.bool))
    with pytest.raises(InputError, match="bool mask"):
        content_distance(p, torch.tensor([0, 1, 0]))
    q = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, 0.0, 1.0]]])  # query 1 looks only at [SEP]
    with pytest.raises(InputError, match="no weight on any content key"):
        content_distance(q, torch.tensor([False, False, True]))


# ---- cross_cosine: mean cosine over all (row of h, row of g) pairs of two different sentences ----
def cross_cosine_by_hand(h: np.ndarray, g: np.ndarray) -> float:
    total = 0.0
    for a in h:
        for b in g:
            total += float(a @ b) / (np.sqrt(a @ a) * np.sqrt(b @ b))
    return total / (len(h) * len(g))


@pytest.mark.parametrize("n,m,offset", [(5, 7, 0.0), (1, 1, 0.0), (1, 9, 3.0), (12, 4, -2.0)])
def test_cross_cosine_matches_a_hand_double_loop(n, m, offset):
    """Different lengths, a single token on each side, and a shared offset (anisotropy: every vector
    leans one way, so the cosine of unrelated tokens is far from 0)."""
    rng = np.random.default_rng(n * 100 + m)
    h = rng.standard_normal((n, 16)) + offset
    g = rng.standard_normal((m, 16)) + offset
    want = cross_cosine_by_hand(h, g)
    assert cross_cosine(torch.from_numpy(h).float(), torch.from_numpy(g).float()) == pytest.approx(want, abs=1e-6)
    if offset == 3.0:
        assert want > 0.8


def test_cross_cosine_is_scale_free_and_signed():
    h = np.array([[1.0, 0.0], [0.0, 2.0]])
    g = np.array([[-5.0, 0.0]])
    # pairs: cos((1,0),(−1,0)) = −1, cos((0,1),(−1,0)) = 0 → mean −0.5
    assert cross_cosine(torch.from_numpy(h), torch.from_numpy(g)) == pytest.approx(-0.5, abs=1e-12)
    assert cross_cosine_by_hand(h, g) == pytest.approx(-0.5)
