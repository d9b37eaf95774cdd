"""FFN neurons and the tokens that excite them (seed 003 §5).

Seed 003 §5 reads FFN(x) = W_2·φ(x·W_1 + b_1) + b_2 as d_ff "carving knives": each hidden unit
(a neuron, one column of W_1) fires for some pattern of its input. Here a neuron's activation is
φ(x·W_1 + b_1) at the hook `enc.{l}.ffn.act`, and a neuron is described by the tokens, in context,
where that activation is highest over a set of sentences.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np


def top_activating(acts: Sequence[np.ndarray], tokens: Sequence[Sequence[str]], neuron: int,
                   k: int = 10, skip: Sequence[str] = ()) -> list[dict]:
    """The k (sentence, position) pairs where `neuron` is most active.

    acts: one array (seq, d_ff) per sentence; tokens: the matching token lists.
    skip: tokens left out (e.g. [CLS], [SEP], which every sentence shares).
    """
    rows = []
    for s, (a, toks) in enumerate(zip(acts, tokens)):
        a = np.asarray(a)
        if a.shape[0] != len(toks):
            raise ValueError(f"sentence {s}: {a.shape[0]} activation rows for {len(toks)} tokens")
        for p, t in enumerate(toks):
            if t not in skip:
                rows.append((float(a[p, neuron]), s, p, t))
    rows.sort(key=lambda r: -r[0])
    out = []
    for value, s, p, t in rows[:k]:
        toks = tokens[s]
        context = " ".join(toks[max(0, p - 3):p]) + f" [{t}] " + " ".join(toks[p + 1:p + 4])
        out.append({"token": t, "value": round(value, 4), "sentence": s, "position": p,
                    "context": context.strip()})
    return out


def selective_neurons(acts: Sequence[np.ndarray], n: int = 5,
                      mask: Sequence[np.ndarray] | None = None, top: int = 8) -> list[int]:
    """Neurons whose strongest activations stand furthest above their usual level.

    Score: (mean of the `top` largest activations - mean) / std. A neuron that fires hard on a
    handful of tokens and stays quiet elsewhere is the kind seed 003 §5 describes (one "knife"
    per feature); averaging the top few, not the single maximum, prefers a neuron with a
    recurring trigger over one that fired once. An always-on neuron scores low.
    mask: per sentence, a bool array (seq,) of the positions to count (e.g. non-special tokens).
    """
    rows = [np.asarray(a)[m] if mask is not None else np.asarray(a)
            for a, m in zip(acts, mask if mask is not None else [None] * len(acts))]
    A = np.concatenate(rows, axis=0)  # (all tokens, d_ff)
    k = min(top, A.shape[0])
    peak = np.sort(A, axis=0)[-k:].mean(0)
    std = A.std(0)
    score = (peak - A.mean(0)) / np.where(std > 0, std, np.inf)
    return [int(i) for i in np.argsort(-score)[:n]]
