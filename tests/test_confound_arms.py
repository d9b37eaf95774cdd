"""The arms that remove issue 28 §4's confounds, against references written by hand:
`no-layernorm`'s arms without LayerNorm start at a loss of ≈ ln 64 (torch's cross-entropy on a fresh
model, compared with the number ln 64), and ReZero is the identity at step 0 (the logits equal the
embedding + sinusoid read by the head, written out with the paper's formulas); `ffn-capacity`'s
parameter counts follow from the weight shapes, and the matched arms sit within 5% of the 4× arm."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from glassformer.experiments import ffn_capacity as fc
from glassformer.experiments import no_layernorm as nl
from glassformer.experiments.synthetic import TaggingTask

TASK = TaggingTask("pair", n_symbols=8, min_len=8, max_len=12, a=2, b=5)  # the row's task: 64 classes


def fresh(arm: str, seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return nl.make(nl.config(TASK, arm), arm)()


def loss_at_step_0(model: torch.nn.Module, seed: int) -> float:
    ids, targets = TASK.batch(256, torch.Generator().manual_seed(seed))
    with torch.no_grad():
        logits = model(ids)
    keep = targets != -100
    return F.cross_entropy(logits[keep], targets[keep]).item()


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("arm", [nl.REZERO, nl.FINAL])
def test_arms_without_layernorm_start_near_ln_64(arm, seed):
    assert TASK.n_classes == 64
    assert abs(loss_at_step_0(fresh(arm, seed), seed) - math.log(64)) < 1.0


def test_the_unscaled_arm_starts_hundreds_of_nats_high():
    # the confound the review found (~2,460 nats): the stream grows through 24 sublayers, no head norm
    assert loss_at_step_0(fresh(nl.UNSCALED, 0), 0) > 100


def test_rezero_is_the_identity_at_step_0_and_alpha_gets_a_gradient():
    model = fresh(nl.REZERO, 0)
    ids = torch.tensor([[3, 7, 4, 10, 5, 3]])
    d = model.config.d_model
    pos = torch.arange(ids.shape[1], dtype=torch.float64)[:, None]
    i = torch.arange(0, d, 2, dtype=torch.float64)[None, :]
    pe = torch.zeros(ids.shape[1], d, dtype=torch.float64)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos / 10000 ** (i / d)), torch.cos(pos / 10000 ** (i / d))  # §3.2
    x0 = model.embed.W_E.detach().double()[ids[0]] * math.sqrt(d) + pe  # embed_scale: × sqrt(d_model)
    want = x0 @ model.head.W_U.detach().double()  # no block adds anything: x + 0·F(x)
    logits = model(ids)
    torch.testing.assert_close(logits[0].double(), want, atol=1e-4, rtol=1e-4)
    F.cross_entropy(logits[0], torch.tensor([5, 6, 7, 8, 9, 10])).backward()
    alphas = [m.alpha.grad for m in model.modules() if isinstance(m, nl.ReZero)]
    assert len(alphas) == 2 * nl.DEPTH and all(g is not None and float(g.abs()) > 0 for g in alphas)


def count_by_hand(vocab: int, d: int, layers: int, d_ff: int | None) -> int:
    """W_E (V, d) + per layer [W_Q, W_K, W_V, W_O (d, d) and their biases (d), two norms' gamma and
    beta (d), W_1 (d, d_ff) + b_1, W_2 (d_ff, d) + b_2] + W_U (d, V), no head bias; sinusoids: none."""
    ffn = 0 if d_ff is None else d * d_ff + d_ff + d_ff * d + d
    return vocab * d + layers * (4 * (d * d + d) + 2 * 2 * d + ffn) + d * vocab


def test_ffn_capacity_parameter_counts_match_the_shapes_and_the_matched_arms_match():
    vocab = fc.FIRST_SYMBOL + fc.SYMBOLS
    hand = {"no FFN": count_by_hand(vocab, 64, 1, None), "d_ff=1×": count_by_hand(vocab, 64, 1, 64),
            fc.FFN4: count_by_hand(vocab, 64, 1, 256), fc.DEEP: count_by_hand(vocab, 64, 3, None),
            fc.WIDE: count_by_hand(vocab, 104, 1, None)}
    assert {arm: fc.parameters(arm) for arm in fc.ARMS} == hand
    for arm in (fc.DEEP, fc.WIDE):
        assert abs(hand[arm] / hand[fc.FFN4] - 1) <= 0.05, (arm, hand[arm], hand[fc.FFN4])
    assert hand["no FFN"] < 0.5 * hand[fc.FFN4]  # what the unmatched comparison left open


def test_the_facts_table_holds_distinct_three_symbol_keys_read_at_their_last_symbol():
    from glassformer.experiments.runner import IGNORE
    from glassformer.experiments.synthetic import FIRST_SYMBOL

    task = fc.FactsTask(5000, seed=3, n_symbols=64, key_len=3)
    ids, targets = task.table()
    assert ids.shape == (5000, 3) and targets.shape == (5000, 3)
    keys = {tuple(r) for r in (ids - FIRST_SYMBOL).tolist()}
    assert len(keys) == 5000 and all(0 <= x < 64 for k in keys for x in k)  # distinct, in range
    assert (targets[:, :2] == IGNORE).all() and ((targets[:, 2] >= FIRST_SYMBOL) & (targets[:, 2] < FIRST_SYMBOL + 64)).all()
    assert len({k[0] for k in keys}) == 64  # every symbol in the first place: the keys are not 2-symbol ones padded
    with pytest.raises(ValueError, match="need more than the 4096 distinct keys"):
        fc.FactsTask(5000, seed=0, key_len=2).table()
