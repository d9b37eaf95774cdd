"""Character n-gram baselines: the quality gate of every text row (issue 28 §2).

A Transformer compared with another after it has learned only what a trigram knows tests nothing
about attention (two characters of context need one head). So a text row states the held-out loss
of character n-grams, n = 1…5, trained on the same training split and scored on the same held-out
split, and its arms must beat the 4-gram before their comparison is read.

The model: interpolated absolute discounting (Ney, Essen & Kneser 1994), D = 0.75 at every order,
interpolated down to a uniform distribution over the alphabet plus one unknown symbol:

    P_n(c | h) = max(C(h c) − D, 0) / C(h) + D · N₁₊(h ·) / C(h) · P_{n−1}(c | h′)

(h′ is h without its first character; an unseen context falls through to P_{n−1}). Every order
is scored on the same positions (those with 4 characters before them).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

DISCOUNT = 0.75
GATE_ORDER = 4  # the gate: below the character 4-gram


def _codes(ids: np.ndarray, n: int, base: int) -> np.ndarray:
    """One integer per n-gram starting at each position: Σ ids[t+i]·base^(n−1−i)."""
    out = np.zeros(ids.size - n + 1, dtype=np.int64)
    for i in range(n):
        out = out * base + ids[i:ids.size - n + 1 + i]
    return out


def _count(sorted_codes: np.ndarray, query: np.ndarray) -> np.ndarray:
    return np.searchsorted(sorted_codes, query, side="right") - np.searchsorted(sorted_codes, query, side="left")


def ngram_losses(train: np.ndarray, valid: np.ndarray, vocab: int, max_n: int = 5,
                 discount: float = DISCOUNT) -> list[float]:
    """Held-out nats per character of the n-gram model for n = 1…max_n (ids in 0…vocab−1)."""
    train, valid = np.asarray(train, np.int64), np.asarray(valid, np.int64)
    base = int(max(train.max(), valid.max())) + 1
    first = max_n - 1  # score positions with max_n − 1 characters of history
    p = np.full(valid.size - first, 1.0 / vocab)
    losses = []
    for n in range(1, max_n + 1):
        grams = np.sort(_codes(train, n, base))
        hist = np.sort(_codes(train[:-1], n - 1, base)) if n > 1 else None
        # distinct continuations of each history: unique n-grams, keyed by their history
        uniq = np.unique(grams)
        followers = np.sort(uniq // base)
        q_gram = _codes(valid, n, base)[first - (n - 1):]
        c_hc = _count(grams, q_gram).astype(float)
        if n == 1:
            c_h = np.full(q_gram.size, float(train.size))
            n1 = np.full(q_gram.size, float(uniq.size))
        else:
            q_hist = q_gram // base
            c_h = _count(hist, q_hist).astype(float)
            n1 = _count(followers, q_hist).astype(float)
        seen = c_h > 0
        safe = np.where(seen, c_h, 1.0)
        mixed = np.maximum(c_hc - discount, 0) / safe + discount * n1 / safe * p
        p = np.where(seen, mixed, p)
        losses.append(float(-np.log(p).mean()))
    return losses


@lru_cache(maxsize=2)
def text_baselines(corpus: str = "fortunes-en") -> tuple[float, ...]:
    """The n = 1…5 baselines of `text_task.CharTextTask`'s split (nats/char)."""
    from .text_task import FIRST_CHAR, _streams
    alphabet, train, valid = _streams(corpus)
    vocab = len(alphabet) + 1  # + the unknown symbol
    return tuple(ngram_losses(train.numpy() - FIRST_CHAR, valid.numpy() - FIRST_CHAR, vocab))


def gate_text(losses: dict[str, list[float | None]], baselines: tuple[float, ...]) -> dict:
    """The gate of a text row: every arm's mean held-out loss below the 4-gram's."""
    bar = baselines[GATE_ORDER - 1]
    shown = ", ".join(f"{n + 1}-gram {b:.3f}" for n, b in enumerate(baselines))
    means = {}
    for arm, xs in losses.items():
        finite = [x for x in xs if x is not None and math.isfinite(x)]
        means[arm] = sum(finite) / len(finite) if finite else math.inf
    worst = max(means, key=means.get)
    passed = means[worst] < bar
    verb = "met" if passed else "failed"
    return {"passed": passed,
            "text": f"{verb}: every arm's mean held-out loss below the character {GATE_ORDER}-gram ({bar:.3f} "
                    f"nats/char); worst arm {worst} {means[worst]:.3f} (baselines on the same split: {shown})"}
