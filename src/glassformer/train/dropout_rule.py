"""Whether a timed run gets dropout, decided from its own steps (issue 32 §4; the paper's §5.4 dropout).

The auto recipe gives dropout only when the minutes allow enough passes over the data for the model to overfit
without it (train/recipe.py: `DROPOUT_EPOCHS` for a translator, `lm_dropout_passes` for an LM, fewer on a text
with fewer characters per weight of the model; counted for the model *without* dropout; an LM on a small text
has a second tier, 0.2 from `LM_DROPOUT_STRONG_EPOCHS`, where 0.1 let it overfit). It counted those passes
from a 1.5-s speed probe at start-up, and a probe that short reads the machine of that second: the same G2P
command, 30 minutes on two threads, probed 1.37× the rate its run then trained at once and 0.81× another time
— dropout in the first run (67.3% exact match), none in the second (65.7%; docs/real-data.md, "Training step
speed").

So a run whose recipe left dropout to the measurement trains its first tenth without dropout, counts
the passes its own steps made in that time (evaluations and batching included: what the budget will
really buy) and extrapolates them to the whole budget; from then on it trains with the recipe's dropout
if they reach the rule's threshold, and says so either way. A tenth without dropout should cost little
(dropout regularises the late part of a run, where the model starts to memorise what it has seen): assumed,
not measured against dropout from the first step. Measured: G2P's first tenth read 14.6–17.9 passes over
four launches where the probe read 17 and 23 (docs/real-data.md, "The dropout rule on the run's own rate").
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..config import ModelConfig

if TYPE_CHECKING:  # torch-free at load, as the recipe that imports DECIDE_SHARE
    from torch import nn

DECIDE_SHARE = 0.1  # the share of the budget trained without dropout, to measure the rate on


class DropoutDecision:
    """The recipe's dropout rule, applied once to the rate this process measured (see above).

    p: the dropout the recipe gives a run with enough passes; passes_needed: its threshold;
    budget_s: the run's whole budget; left_s: what is left of it when this process starts (a resumed
    run measures its own rate again); n_examples: the training examples (pairs, or an LM's windows);
    strong: (passes, dropout) — a stronger dropout from that many passes (None: one tier)."""

    def __init__(self, p: float, passes_needed: float, budget_s: float, left_s: float, n_examples: int,
                 strong: tuple[float, float] | None = None):
        self.p, self.passes_needed, self.n_examples = p, passes_needed, max(n_examples, 1)
        self.strong = strong
        self.budget_s = budget_s
        self.due_s = min(DECIDE_SHARE * budget_s, left_s)  # seconds of this process's training
        self.decided: dict[str, Any] | None = None

    def due(self, seconds: float, examples: int) -> bool:
        """Whether to decide now: the first tenth is over and at least one step gave a rate."""
        return self.decided is None and seconds >= self.due_s and examples > 0

    def decide(self, examples: int, seconds: float) -> dict[str, Any]:
        """The decision for `examples` seen in `seconds` of this process's training: the passes the
        whole budget gives at that rate, the dropout chosen, and a line that says why."""
        rate = examples / max(seconds, 1e-9)  # examples a second, without dropout
        done = examples / self.n_examples
        passes = rate * self.budget_s / self.n_examples  # (a resumed run: its earlier part at this rate too)
        p = self.p if passes >= self.passes_needed else 0.0
        verdict = (f"dropout {self.p:g} from now (≥ {self.passes_needed:g}: enough to overfit without it)"
                   if p else f"no dropout (< {self.passes_needed:g}: too few to overfit)")
        if self.strong is not None and passes >= self.strong[0]:
            p = self.strong[1]
            verdict = f"dropout {p:g} from now (≥ {self.strong[0]:g}: {self.p:g} would not hold it so many passes)"
        line = (f"dropout rule: {done:.2f} passes over the data in the first {seconds:.0f} s without dropout,"
                f" {rate * 60:,.0f} examples a minute: about {passes:.1f} passes in the whole budget; {verdict}")
        self.decided = dict(dropout=p, passes=passes, examples_per_minute=rate * 60, seconds=seconds,
                            threshold=self.passes_needed, text=line)
        return self.decided


def set_dropout(model: "nn.Module", config: ModelConfig, p: float) -> ModelConfig:
    """The model trains with dropout `p` from its next step; returns its config saying so (a checkpoint
    records the dropout the run ended with). Attention's own rate follows unless the user set one."""
    from ..nn.attention import MultiHeadAttention
    from ..nn.dropout import Dropout

    config = dataclasses.replace(config, dropout=p)
    for m in model.modules():
        if isinstance(m, Dropout):
            m.p = p
        elif isinstance(m, MultiHeadAttention):
            m.dropout_p = config.attn_dropout_p
    return config
