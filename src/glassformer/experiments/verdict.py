"""The verdict rule: how `glassformer ablate` decides from the numbers whether a seed's claim holds.

No verdict is chosen by hand. Each experiment states its claim as *checks*, fixed in code before
anything runs:

- `Check`: "arm A beats arm B on this metric by at least δ" (δ, the smallest effect the claim is
  about). d = mean(A) − mean(B) in the claimed direction, [lo, hi] its 95% bootstrap interval
  (`stats.bootstrap_difference`, the seeds of each arm resampled on their own).
    1. B already at the task's ceiling (or both arms at its floor)  -> "not tested": the task
       cannot show the effect, whatever the architecture does;
    2. fewer than MIN_SEEDS finite values on either side            -> "inconclusive";
    3. lo > 0 and d ≥ δ                                            -> "holds";
    4. hi < δ (the claimed effect lies outside the interval)        -> "does not hold";
    5. otherwise                                                    -> "inconclusive".
- `Exact`: a deterministic measurement (a count, an identity checked to float precision)
  compared with a threshold: "holds" or "does not hold", nothing in between.

A row holds when all its main checks hold; does not hold when any does not; is "not tested"
when every main check is; inconclusive otherwise. Side checks are reported, not combined.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from .stats import bootstrap_difference, finite, interval, is_rate

HOLDS, FAILS, UNSURE, UNTESTED = "holds", "does not hold", "inconclusive", "not tested"
VERDICTS = (HOLDS, FAILS, UNSURE, UNTESTED)
MIN_SEEDS = 5

RULE = (f"Each check 'A beats B by at least δ' takes d = mean(A) − mean(B) in the claimed direction "
        "and its 95% percentile-bootstrap interval [lo, hi] (each arm's seeds resampled, 4000 times). "
        "If B already sits at the task's ceiling (or both arms at its floor) the check is **not "
        f"tested**; with fewer than {MIN_SEEDS} finite values on a side it is **inconclusive**; "
        "lo > 0 and d ≥ δ: **holds**; hi < δ: **does not hold** (an effect of the claimed size is "
        "excluded); otherwise **inconclusive**. Per-arm intervals are Wilson score intervals for "
        "success rates (values all 0/1) and bootstrap intervals of the mean otherwise. Exact checks "
        "(counts, identities at float precision) compare one deterministic number with a threshold. "
        "A row holds when all its main checks hold, does not hold when any does not, is not tested "
        "when all are not tested, and is inconclusive otherwise.")


def mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (n−1) of the finite values; None when there are none."""
    xs = finite(values)
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
        lo, hi = interval(self.values)
        clean = [None if v is None or not math.isfinite(v) else float(v) for v in self.values]
        return {"name": self.name, "metric": self.metric, "values": clean, "n_seeds": len(finite(self.values)),
                "mean": m, "std": s, "ci_low": lo, "ci_high": hi,
                "interval": "wilson" if is_rate(self.values) else "bootstrap"}


@dataclass
class Check:
    """The claim 'variant `better` beats variant `worse` by at least `min_effect`' on one metric.

    `ceiling`: the metric value past which the task can no longer separate the arms (e.g. an
    accuracy of 0.98); `floor`: the value at which neither arm has learned anything (chance).
    """

    claim: str
    better: str
    worse: str
    higher_is_better: bool
    min_effect: float
    main: bool = True
    ceiling: float | None = None
    floor: float | None = None
    published: str = ""  # the published figure beside ours, where one exists
    result: dict = field(default_factory=dict)

    def evaluate(self, variants: dict[str, Variant]) -> dict:
        a, b = variants[self.better].values, variants[self.worse].values
        verdict, d, lo, hi = decide(a, b, self.higher_is_better, self.min_effect, self.ceiling, self.floor)
        self.result = {"kind": "difference", "claim": self.claim, "better": self.better, "worse": self.worse,
                       "higher_is_better": self.higher_is_better, "min_effect": self.min_effect,
                       "ceiling": self.ceiling, "floor": self.floor, "main": self.main,
                       "difference": d, "ci_low": lo, "ci_high": hi, "published": self.published,
                       "verdict": verdict}
        return self.result


@dataclass
class Exact:
    """A deterministic measurement of `variant` compared with `threshold` by `relation` ('<=' or '>=').

    The claim holds when `value relation threshold`; e.g. the seed's "an integer arange zeroes the
    encoding" holds when the fraction of zero entries is ≥ 0.99.
    """

    claim: str
    variant: str
    relation: str
    threshold: float
    main: bool = True
    published: str = ""
    result: dict = field(default_factory=dict)

    def evaluate(self, variants: dict[str, Variant]) -> dict:
        value = variants[self.variant].values[0]
        self.result = {"kind": "exact", "claim": self.claim, "better": self.variant, "worse": "",
                       "relation": self.relation, "threshold": self.threshold, "main": self.main,
                       "difference": value, "ci_low": None, "ci_high": None, "min_effect": self.threshold,
                       "published": self.published, "verdict": exact_verdict(value, self.relation, self.threshold)}
        return self.result


def exact_verdict(value: float | None, relation: str, threshold: float) -> str:
    if value is None or not math.isfinite(value):
        return UNSURE
    ok = value <= threshold if relation == "<=" else value >= threshold
    return HOLDS if ok else FAILS


def decide(better: Sequence[float | None], worse: Sequence[float | None], higher_is_better: bool,
           min_effect: float, ceiling: float | None = None, floor: float | None = None
           ) -> tuple[str, float | None, float | None, float | None]:
    """(verdict, d, lo, hi) for 'better beats worse by ≥ min_effect' — the rule in the docstring."""
    xa, xb = finite(better), finite(worse)
    sign = 1.0 if higher_is_better else -1.0
    if not xa or not xb:
        return UNSURE, None, None, None
    d = sign * (sum(xa) / len(xa) - sum(xb) / len(xb))
    lo, hi = (sign * x for x in bootstrap_difference(xa, xb))
    lo, hi = min(lo, hi), max(lo, hi)
    mb, ma = sign * sum(xb) / len(xb), sign * sum(xa) / len(xa)
    if ceiling is not None and mb >= sign * ceiling:
        return UNTESTED, d, lo, hi
    if floor is not None and ma <= sign * floor and mb <= sign * floor:
        return UNTESTED, d, lo, hi
    if len(xa) < MIN_SEEDS or len(xb) < MIN_SEEDS:
        return UNSURE, d, lo, hi
    if lo > 0 and d >= min_effect:
        return HOLDS, d, lo, hi
    if hi < min_effect:
        return FAILS, d, lo, hi
    return UNSURE, d, lo, hi


def combine(results: Sequence[dict]) -> str:
    """Row verdict from the main checks' verdicts."""
    main = [r["verdict"] for r in results if r.get("main", True)]
    if not main:
        return UNSURE
    if all(v == HOLDS for v in main):
        return HOLDS
    if any(v == FAILS for v in main):
        return FAILS
    if all(v == UNTESTED for v in main):
        return UNTESTED
    return UNSURE
