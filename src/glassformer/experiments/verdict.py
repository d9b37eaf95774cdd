"""The verdict rule: how `glassformer ablate` decides from the numbers whether a seed's claim holds.

No verdict is chosen by hand. Each experiment states its claim as one or more *checks*: "variant A
is better than variant B on this metric by at least δ" (δ, the smallest difference the claim is
about, is declared with the check before anything runs). With d the difference of the means in
the claimed direction and s = max(std_A, std_B) over seeds (sample std, n−1):

- fewer than 3 finite values on either side       -> "inconclusive" (too few seeds to judge)
- d >  max(s, δ)                                   -> "holds"
- d < −max(s, δ)                                   -> "does not hold" (the opposite was measured)
- |d| ≤ max(s, δ) and s ≤ δ                        -> "does not hold" (no effect of the claimed size)
- otherwise (|d| ≤ s, s > δ: seeds disagree)       -> "inconclusive"

An experiment's row verdict combines its main checks: every one holds -> "holds"; any one does
not hold -> "does not hold"; otherwise "inconclusive". Side checks are reported, not combined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

HOLDS, FAILS, UNSURE = "holds", "does not hold", "inconclusive"
MIN_SEEDS = 3

RULE = (f"For each check 'A beats B by at least δ': d = difference of the seed means in the claimed "
        f"direction, s = max(std_A, std_B) (sample std over seeds). Fewer than {MIN_SEEDS} finite "
        "values on a side: inconclusive. d > max(s, δ): holds. d < −max(s, δ): does not hold. "
        "|d| ≤ max(s, δ) with s ≤ δ: does not hold (no effect of the claimed size). Otherwise: "
        "inconclusive. A row holds when all its main checks hold, does not hold when any main "
        "check does not hold, and is inconclusive otherwise.")


def _finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (n−1) of the finite values; None when there are none."""
    xs = _finite(values)
    if not xs:
        return None, None
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, 0.0
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1))


@dataclass
class Variant:
    """One measured configuration: a metric's value per seed."""

    name: str
    metric: str
    values: list[float | None]

    def to_dict(self) -> dict:
        m, s = mean_std(self.values)
        clean = [None if v is None or not math.isfinite(v) else float(v) for v in self.values]
        return {"name": self.name, "metric": self.metric, "values": clean, "mean": m, "std": s}


@dataclass
class Check:
    """The claim 'variant `better` beats variant `worse` by at least `min_effect`' on one metric."""

    claim: str
    better: str
    worse: str
    higher_is_better: bool
    min_effect: float
    main: bool = True
    result: dict = field(default_factory=dict)

    def evaluate(self, variants: dict[str, Variant]) -> dict:
        a, b = variants[self.better], variants[self.worse]
        verdict, d, s = decide(a.values, b.values, self.higher_is_better, self.min_effect)
        self.result = {"claim": self.claim, "better": self.better, "worse": self.worse,
                       "higher_is_better": self.higher_is_better, "min_effect": self.min_effect,
                       "main": self.main, "difference": d, "spread": s, "verdict": verdict}
        return self.result


def decide(better: Sequence[float | None], worse: Sequence[float | None], higher_is_better: bool,
           min_effect: float) -> tuple[str, float | None, float | None]:
    """(verdict, d, s) for 'better beats worse by ≥ min_effect' — the rule in this module's docstring."""
    xa, xb = _finite(better), _finite(worse)
    if len(xa) < MIN_SEEDS or len(xb) < MIN_SEEDS:
        ma, sa = mean_std(xa)
        mb, sb = mean_std(xb)
        d = None if ma is None or mb is None else (ma - mb) * (1 if higher_is_better else -1)
        s = None if sa is None or sb is None else max(sa, sb)
        return UNSURE, d, s
    ma, sa = mean_std(xa)
    mb, sb = mean_std(xb)
    d = (ma - mb) * (1 if higher_is_better else -1)
    s = max(sa, sb)
    bar = max(s, min_effect)
    if d > bar:
        return HOLDS, d, s
    if d < -bar:
        return FAILS, d, s
    if s <= min_effect:
        return FAILS, d, s
    return UNSURE, d, s


def combine(results: Sequence[dict]) -> str:
    """Row verdict from the main checks' verdicts."""
    main = [r["verdict"] for r in results if r.get("main", True)]
    if not main:
        return UNSURE
    if all(v == HOLDS for v in main):
        return HOLDS
    if any(v == FAILS for v in main):
        return FAILS
    return UNSURE
