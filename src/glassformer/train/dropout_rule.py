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

A first tenth can still read a busy minute: a run that began beside other work counts fewer passes than the
rest of its budget will make (a G2P run started under a test suite counted 0.04 passes in its first 50 s).
So a run whose decision left it below the rule's top tier counts again at each further tenth up to half its
budget (`RECHECKS`), at the rate of the tenth just trained, and raises its dropout from then if that rate
gives the passes; it never lowers it (a model that trained with dropout is not made to overfit later because
the machine got busier). After half the budget a raise is not made: what is left is mostly the decay.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from ..config import ModelConfig

if TYPE_CHECKING:  # torch-free at load, as the recipe that imports DECIDE_SHARE
    from torch import nn

DECIDE_SHARE = 0.1  # the share of the budget trained without dropout, to measure the rate on
RECHECKS = (0.2, 0.3, 0.4, 0.5)  # shares of the budget at which a decision below the top tier counts again


class DropoutDecision:
    """The recipe's dropout rule, applied to the rate this process measured (see above): once, then again at
    each of `RECHECKS` while it can still raise the dropout.

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
        self.top = strong[1] if strong is not None else p
        # the run's seconds at which to count again (those after the first decision), and this process's
        # (examples, seconds) at the last count: the next count's rate is over what came since
        self.checks = [share * budget_s for share in RECHECKS if share * budget_s > budget_s - left_s + self.due_s]
        self.mark = (0, 0.0)

    def due(self, seconds: float, examples: int, run_seconds: float | None = None) -> bool:
        """Whether to count now: the first tenth is over and at least one step gave a rate (seconds: this
        process's training), or a re-check's share of the budget is reached (run_seconds: the run's)."""
        if self.decided is None:
            return seconds >= self.due_s and examples > 0
        return (self.decided["dropout"] < self.top and bool(self.checks) and run_seconds is not None
                and run_seconds >= self.checks[0] and seconds > self.mark[1])

    def decide(self, examples: int, seconds: float, run_seconds: float | None = None) -> dict[str, Any] | None:
        """The decision for `examples` seen in `seconds` of this process's training: the passes the whole
        budget gives at the rate since the last count, the dropout chosen, and a line that says why. At a
        re-check (the run at `run_seconds`), None unless the dropout goes up."""
        first = self.decided is None
        window = examples - self.mark[0], seconds - self.mark[1]
        self.mark = (examples, seconds)
        if not first:  # every share passed is counted now (a long evaluation may have stepped over two)
            self.checks = [t for t in self.checks[1:] if run_seconds is None or t > run_seconds]
        rate = window[0] / max(window[1], 1e-9)  # examples a second (without dropout, until it has some)
        passes = rate * self.budget_s / self.n_examples  # (a resumed run: its earlier part at this rate too)
        p = self.p if passes >= self.passes_needed else 0.0
        verdict = (f"dropout {self.p:g} from now (≥ {self.passes_needed:g}: enough to overfit without it)"
                   if p else f"no dropout (< {self.passes_needed:g}: too few to overfit)")
        if self.strong is not None and passes >= self.strong[0]:
            p = self.strong[1]
            verdict = f"dropout {p:g} from now (≥ {self.strong[0]:g}: {self.p:g} would not hold it so many passes)"
        if not first and p <= self.decided["dropout"]:
            return None
        if first:
            line = (f"dropout rule: {examples / self.n_examples:.2f} passes over the data in the first {seconds:.0f} s"
                    f" without dropout, {rate * 60:,.0f} examples a minute: about {passes:.1f} passes in the whole"
                    f" budget; {verdict}")
        else:
            line = (f"dropout rule, counted again: {rate * 60:,.0f} examples a minute over the last {window[1]:.0f} s"
                    f" (the count that decided read {self.decided['examples_per_minute']:,.0f}):"
                    f" about {passes:.1f} passes in the whole budget; {verdict}")
        self.decided = dict(dropout=p, passes=passes, examples_per_minute=rate * 60, seconds=seconds,
                            threshold=self.passes_needed, text=line, **({} if first else {"recount": True}))
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
