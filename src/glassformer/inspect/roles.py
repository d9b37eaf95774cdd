"""Head roles from attention-pattern statistics (seed 000 §2.6, after Clark et al. 2019).

Clark et al. ("What Does BERT Look At?") sort BERT's heads by where their attention mass goes:
to the previous token, the next one, the token itself, [CLS], [SEP], or spread broadly. Every
function here is pure NumPy on patterns `P` of shape (..., q_pos, k_pos) whose rows sum to 1,
so the statistics can be checked on hand-made patterns.

Scores (one number per head, averaged over the queries where the relation exists):
- prev  : P[i, i-1]          next : P[i, i+1]          self : P[i, i]
- cls   : P[i, 0]            (the first position: [CLS] for BERT, the first token for GPT-2)
- sep   : Σ_{j ∈ sep} P[i, j] ([SEP] / end-of-text positions; NaN when there are none)
- broad : H(P[i]) / log(n_i), the row entropy over its maximum (n_i visible keys), in [0, 1]
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

POSITION_ROLES = ("prev", "next", "self", "cls", "sep")
ROLES = POSITION_ROLES + ("broad",)
ROLE_NAMES = {"prev": "previous token", "next": "next token", "self": "self", "cls": "[CLS] / first",
              "sep": "[SEP] / end", "broad": "broad", "mixed": "mixed (no single role)"}


def _rows(P: np.ndarray) -> np.ndarray:
    P = np.asarray(P, dtype=np.float64)
    if P.ndim < 2 or P.shape[-1] != P.shape[-2]:
        raise ValueError(f"patterns must be (..., seq, seq), got shape {P.shape}")
    return P


def row_entropy(P: np.ndarray) -> np.ndarray:
    """Entropy (nats) of every attention row: (..., q_pos, k_pos) -> (..., q_pos)."""
    P = _rows(P)
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.where(P > 0, np.log(np.where(P > 0, P, 1.0)), 0.0)
    return -(P * logs).sum(-1)


def visible_keys(seq: int, causal: bool) -> np.ndarray:
    """How many keys query i may see: all of them, or i + 1 under a causal mask."""
    return np.arange(1, seq + 1) if causal else np.full(seq, seq)


def role_scores(P: np.ndarray, sep_positions: Sequence[int] = (), causal: bool = False) -> dict[str, np.ndarray]:
    """Score of every role for every head: P (..., seq, seq) -> {role: array (...)}."""
    P = _rows(P)
    S = P.shape[-1]
    i = np.arange(S)
    diag = P[..., i, i]
    out = {
        "prev": P[..., i[1:], i[1:] - 1].mean(-1) if S > 1 else np.full(P.shape[:-2], np.nan),
        # under a causal mask the next token is never visible: the relation does not exist
        "next": (P[..., i[:-1], i[:-1] + 1].mean(-1) if S > 1 and not causal
                 else np.full(P.shape[:-2], np.nan)),
        "self": diag.mean(-1),
        "cls": P[..., :, 0].mean(-1),
    }
    seps = sorted({int(s) for s in sep_positions if 0 <= int(s) < S})
    if seps and not causal:
        out["sep"] = P[..., :, seps].sum(-1).mean(-1)
    else:
        out["sep"] = np.full(P.shape[:-2], np.nan)
    n = visible_keys(S, causal)
    keep = n > 1  # a query that sees one key has no choice to measure
    if keep.any():
        out["broad"] = (row_entropy(P)[..., keep] / np.log(n[keep])).mean(-1)
    else:
        out["broad"] = np.full(P.shape[:-2], np.nan)
    return out


def assign_roles(scores: dict[str, np.ndarray], threshold: float = 0.5,
                 broad_threshold: float = 0.75) -> np.ndarray:
    """One role name per head.

    A positional role wins when its score — the mean attention mass it receives — is at least
    `threshold` (most of the mass goes there). Otherwise the head is "broad" when its normalised
    entropy is at least `broad_threshold`, and "mixed" when neither holds.
    """
    stack = np.stack([np.nan_to_num(scores[r], nan=-1.0) for r in POSITION_ROLES], axis=-1)
    best = stack.argmax(-1)
    best_score = np.take_along_axis(stack, best[..., None], -1)[..., 0]
    names = np.array(POSITION_ROLES, dtype=object)[best]
    broad = np.nan_to_num(scores["broad"], nan=0.0) >= broad_threshold
    return np.where(best_score >= threshold, names, np.where(broad, "broad", "mixed"))


def attention_distance(P: np.ndarray, exclude: Sequence[int] = ()) -> np.ndarray:
    """Mean |i - j| weighted by attention, per query: (..., q_pos, k_pos) -> (..., q_pos).

    `exclude` drops key positions (e.g. [CLS] and [SEP], which Clark et al. show soak up mass
    as a "no-op") and renormalises the rest; a row with no mass left gives NaN.
    """
    P = _rows(P).copy()
    S = P.shape[-1]
    if exclude:
        P[..., list(exclude)] = 0.0
        total = P.sum(-1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            P = np.where(total > 0, P / np.where(total > 0, total, 1.0), np.nan)
    dist = np.abs(np.arange(S)[:, None] - np.arange(S)[None, :])
    return (P * dist).sum(-1)


def layer_trends(P: np.ndarray, special: Sequence[int] = (), causal: bool = False) -> dict[str, np.ndarray]:
    """Per-layer means of one sentence's patterns P (layer, head, seq, seq).

    entropy (nats), entropy_norm (÷ log n), distance (tokens), distance_content (special keys
    excluded, special queries dropped) — each of shape (layer,).
    """
    P = _rows(P)
    S = P.shape[-1]
    n = visible_keys(S, causal)
    keep = n > 1
    ent = row_entropy(P)
    content_q = np.array([q not in set(special) for q in range(S)])
    dist_c = attention_distance(P, exclude=special)[..., content_q]
    return {
        "entropy": ent.mean((-1, -2)),
        "entropy_norm": (ent[..., keep] / np.log(n[keep])).mean((-1, -2)) if keep.any() else np.full(P.shape[0], np.nan),
        "distance": attention_distance(P).mean((-1, -2)),
        "distance_content": np.nanmean(dist_c, axis=(-1, -2)) if dist_c.size else np.full(P.shape[0], np.nan),
    }


def consistency(roles_per_sentence: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Majority role of every head over sentences and how often it held.

    roles_per_sentence: (sentence, layer, head) role names -> (majority (layer, head),
    fraction (layer, head) of sentences that gave the head its majority role).
    """
    R = np.asarray(roles_per_sentence, dtype=object)
    majority = np.empty(R.shape[1:], dtype=object)
    frac = np.zeros(R.shape[1:])
    for idx in np.ndindex(*R.shape[1:]):
        names, counts = np.unique(R[(slice(None),) + idx].astype(str), return_counts=True)
        k = counts.argmax()
        majority[idx], frac[idx] = names[k], counts[k] / R.shape[0]
    return majority, frac


def head_roles_json(P: np.ndarray, sep_positions: Sequence[int] = (), causal: bool = False,
                    threshold: float = 0.5) -> dict:
    """The `"head_roles"` block of `glassformer inspect --json`: scores and a role per head."""
    scores = role_scores(P, sep_positions, causal)
    roles = assign_roles(scores, threshold)
    return {
        "roles": roles.tolist(),
        "scores": {r: np.where(np.isnan(s), None, np.round(s, 6)).tolist() for r, s in scores.items()},
        "threshold": threshold,
        "definitions": {r: ROLE_NAMES[r] for r in ROLES},
    }
