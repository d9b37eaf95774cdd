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
    """The n = 1…5 baselines of `text_task.CharTextTask`'s split (nats/char): fitted on the text the
    models train on (the training split less its tuning tail), scored on the valid split."""
    from .text_task import FIRST_CHAR, CharTextTask, _streams
    alphabet, _, valid = _streams(corpus)
    fit = CharTextTask(corpus=corpus)._fit_tune()[0]
    vocab = len(alphabet) + 1  # + the unknown symbol
    return tuple(ngram_losses(fit.numpy() - FIRST_CHAR, valid.numpy() - FIRST_CHAR, vocab))


def finite_mean(xs: list[float | None]) -> float:
    """The mean of an arm's finite losses (a diverged seed has none); inf when no seed has one."""
    finite = [x for x in xs if x is not None and math.isfinite(x)]
    return sum(finite) / len(finite) if finite else math.inf


def gate_text(losses: dict[str, list[float | None]], baselines: tuple[float, ...], left_out: int = 0) -> dict:
    """The gate of a text row: every arm's mean held-out loss below the 4-gram's. `left_out`: how many
    arms the row does not ask (named after this text), said in its first words."""
    bar = baselines[GATE_ORDER - 1]
    shown = ", ".join(f"{n + 1}-gram {b:.3f}" for n, b in enumerate(baselines))
    means = {arm: finite_mean(xs) for arm, xs in losses.items()}
    worst = max(means, key=means.get)
    passed = means[worst] < bar
    verb = "met" if passed else "failed"
    subject = (f"the mean held-out loss of every arm but the {left_out} named after it" if left_out
               else "every arm's mean held-out loss")
    return {"passed": passed,
            "text": f"{verb}: {subject} below the character {GATE_ORDER}-gram ({bar:.3f} "
                    f"nats/char); worst arm {worst} {means[worst]:.3f} (baselines on the same split: {shown})"}


# ---- every position of a text, every order at once; absolute discounting or Kneser–Ney ----
# (train/baselines.py's n-gram line of `glassformer train`, issue 32 §5.)
#
# The n-grams are numbered densely order by order (an n-gram's id comes from its (n−1)-gram's id
# and its last character, renumbered with np.unique), so the codes never overflow int64 however
# large the alphabet (the base^n codes above do for a Chinese alphabet beyond 5-grams), and every
# count is one np.bincount.
#
# Interpolated Kneser–Ney (Kneser & Ney 1995; Chen & Goodman 1998 §2.7): the same recursion as
# absolute discounting, but every order below the model's own counts *continuations*, N₁₊(· h c),
# the distinct characters seen before h c, instead of C(h c); the discount of each order is
# Ney's estimate D = n₁ / (n₁ + 2 n₂) from that order's count-of-counts.

ORDERS = 7  # n = 1…7 (issue 32: the best interpolated n-gram, n = 1–7)


def _ney_discount(counts: np.ndarray) -> float:
    n1, n2 = int((counts == 1).sum()), int((counts == 2).sum())
    if n1 == 0 or n1 + 2 * n2 == 0:
        return DISCOUNT
    return float(np.clip(n1 / (n1 + 2 * n2), 0.05, 0.95))  # D in (0, 1): mass always left below


def _interpolate(c_g: np.ndarray, c_h: np.ndarray, n1_h: np.ndarray, lower: np.ndarray, d: float) -> np.ndarray:
    """max(c − D, 0)/C(h) + D·N₁₊(h ·)/C(h)·P_lower; an unseen history falls through to P_lower."""
    seen = c_h > 0
    safe = np.where(seen, c_h, 1.0)
    return np.where(seen, np.maximum(c_g - d, 0) / safe + d * n1_h / safe * lower, lower)


def ngram_probabilities(train: np.ndarray, text: np.ndarray, positions: np.ndarray, vocab: int,
                        max_n: int = ORDERS, method: str = "kn") -> np.ndarray:
    """P_n(text[t] | text[t−n+1…t−1]) for n = 1…max_n (rows) at each t in `positions` (columns).

    Ids are 0…vocab−1, the uniform floor is 1/vocab; every t must have max_n − 1 characters of
    `text` before it. method "ad": absolute discounting, D = 0.75 at every order (ngram_losses's
    model); "kn": interpolated Kneser–Ney with Ney's discounts.
    """
    if method not in ("ad", "kn"):
        raise ValueError(f"method={method!r} is not one of ad, kn")
    train, text = np.asarray(train, np.int64), np.asarray(text, np.int64)
    positions = np.asarray(positions, np.int64)
    n_train = train.size
    x = np.concatenate([train, text])
    at = positions + n_train  # where each scored character sits in x
    grams = [np.zeros(x.size, np.int64)]  # grams[k][i]: id of the k-gram x[i…i+k−1]; k = 0 is empty
    hist_of, cont = [None], [None]  # per order: the history id of each k-gram id; N₁₊(· g)
    counts = [np.array([float(n_train)])]
    for k in range(1, max_n + 1):
        key = grams[k - 1][:x.size - k + 1] * vocab + x[k - 1:]
        uniq, ids = np.unique(key, return_inverse=True)
        grams.append(ids.reshape(-1))
        h = np.empty(uniq.size, np.int64)
        h[grams[k]] = grams[k - 1][:grams[k].size]
        hist_of.append(h)
        counts.append(np.bincount(grams[k][:n_train - k + 1], minlength=uniq.size).astype(float))
        # continuations of the (k−1)-grams: distinct k-grams of the training split ending in each
        seen = np.flatnonzero(counts[k])
        suffix = np.empty(uniq.size, np.int64)
        suffix[grams[k]] = grams[k - 1][1:grams[k].size + 1] if k > 1 else 0
        if k > 1:
            cont.append(np.bincount(suffix[seen], minlength=counts[k - 1].size).astype(float))
    out = np.empty((max_n, positions.size))
    lower_kn = np.full(positions.size, 1.0 / vocab)  # the continuation chain of orders below
    lower_ad = lower_kn.copy()
    for k in range(1, max_n + 1):
        g = grams[k][at - k + 1]
        hk = hist_of[k][g]
        own = counts[k]  # this order's model: raw counts at its top order
        c_h = np.bincount(hist_of[k], weights=own, minlength=counts[k - 1].size)
        n1 = np.bincount(hist_of[k][own > 0], minlength=counts[k - 1].size).astype(float)
        if method == "ad":
            lower_ad = _interpolate(own[g], c_h[hk], n1[hk], lower_ad, DISCOUNT)
            out[k - 1] = lower_ad
            continue
        out[k - 1] = _interpolate(own[g], c_h[hk], n1[hk], lower_kn, _ney_discount(own[own > 0]))
        if k < max_n:  # the same order as a lower order of the next: continuation counts
            cc = cont[k]
            cc_h = np.bincount(hist_of[k], weights=cc, minlength=counts[k - 1].size)
            n1c = np.bincount(hist_of[k][cc > 0], minlength=counts[k - 1].size).astype(float)
            lower_kn = _interpolate(cc[g], cc_h[hk], n1c[hk], lower_kn, _ney_discount(cc[cc > 0]))
    return out
