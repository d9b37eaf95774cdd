"""Look inside real models: attention patterns, head roles, FFN neurons, head-output projections.

`inspect_sentence(subject, sentence)` is the JSON of `glassformer inspect`; `analysis.analyze`
runs the bundled sentence set for the head-role and layer-trend report (docs/head_roles.md).
"""

from __future__ import annotations

from importlib import resources

import numpy as np

from .loader import Subject, load_subject
from .roles import head_roles_json, layer_trends

__all__ = ["Subject", "load_subject", "inspect_sentence", "bundled_sentences"]


def bundled_sentences() -> list[str]:
    """The ≥ 50 varied English sentences the role analysis averages over."""
    text = resources.files(__package__).joinpath("sentences.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip()]


def inspect_sentence(subject: Subject, sentence: str) -> dict:
    """Tokens, every layer's and head's pattern, head roles and layer means for one sentence."""
    tokens, P = subject.patterns(sentence)
    special = subject.special_positions(tokens)
    trends = layer_trends(P, special, subject.causal)
    return {
        "model": subject.name,
        "sentence": sentence,
        "tokens": tokens,
        "hook": subject.pattern_hook,
        "patterns": np.round(P.astype(np.float64), 7).tolist(),
        "head_roles": head_roles_json(P, subject.sep_positions(tokens), subject.causal),
        "layers": {k: np.round(v, 5).tolist() for k, v in trends.items()},
    }
