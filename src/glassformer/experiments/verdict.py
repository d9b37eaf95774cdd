"""The verdict rule: how `glassformer ablate` decides from the numbers whether a seed's claim holds.

No verdict is chosen by hand. Each experiment states its claim as *checks*, fixed in code before
anything runs:

- `Check`: "arm A beats arm B on this metric by at least δ" (δ, the smallest effect the claim is
  about; its published source is in `deltas`). d = mean(A) − mean(B) in the claimed direction,
  [lo, hi] its Welch t interval (Newcombe's, from two Wilson intervals, when both arms are
  declared success rates) at the check's level: 95% in one row, Holm-adjusted over the main
  checks of a whole report (`claims_doc`).
    1. a quality gate failed, B already at the task's ceiling or both arms at its floor
                                                                    -> "not tested": the task
       cannot show the effect, whatever the architecture does;
    2. fewer than MIN_SEEDS finite values on either side            -> "inconclusive";
    3. lo > 0 and d ≥ δ                                            -> "holds";
    4. hi < δ (the claimed effect lies outside the interval)        -> "does not hold";
    5. otherwise                                                    -> "inconclusive".
- `Exact`: a deterministic measurement (a count, an identity checked to float precision)
  compared with a threshold: "holds" or "does not hold", nothing in between, and no interval
  (there is no sampling error to cover), so it is outside the Holm family.

Each check is its own sub-claim. `combine` is kept for the one-row summary of `ablate ID`; the
report itself gives one reconciled verdict per seed claim (`seed_claims`), not per row.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Sequence

from .stats import (LEVEL, finite, interval, newcombe, newcombe_p_beyond, t_interval, t_p_beyond,
                    welch)

HOLDS, FAILS, UNSURE, UNTESTED = "holds", "does not hold", "inconclusive", "not tested"
VERDICTS = (HOLDS, FAILS, UNSURE, UNTESTED)
MIN_SEEDS = 5

RULE = ("Each check 'A beats B by at least δ' takes d = mean(A) − mean(B) in the claimed direction and its "
        "Welch t interval [lo, hi] (Welch–Satterthwaite degrees of freedom; for two arms that are success "
        "rates, Newcombe's hybrid score interval built from the two Wilson intervals) at the check's level. "
        "The main checks of the report form one family held to α = 0.05 by Holm's step-down: each gets a "
        "p-value, p = min(p of 'd > 0', p of 'd < δ'), the i-th smallest of m is tested at α/(m − i + 1), "
        "the first that fails stops the descent, and each check's interval is shown at confidence 1 − its "
        "Holm level (side checks: 95%, outside the family). If the row's quality gate failed, B already sits "
        "at the task's ceiling or both arms at its floor, the check is **not tested**; with fewer than "
        f"{MIN_SEEDS} finite values on a side it is **inconclusive**; lo > 0 and d ≥ δ: **holds**; hi < δ: "
        "**does not hold** (an effect of the claimed size is excluded); otherwise **inconclusive**. δ comes "
        "from a published effect converted to the row's units where one exists, and is otherwise a value "
        "pre-registered in code before the full run (the δ column says which). Per-arm intervals are t "
        "intervals of the mean, Wilson score intervals for arms declared success rates. Exact checks (counts, "
        "identities at float precision) compare one deterministic number with a threshold and carry no "
        "interval.")


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
    rate: bool = False  # a success indicator per seed (0/1): declared, never guessed from the values

    def to_dict(self) -> dict:
        m, s = mean_std(self.values)
        lo, hi = interval(self.values, self.rate)
        clean = [None if v is None or not math.isfinite(v) else float(v) for v in self.values]
        return {"name": self.name, "metric": self.metric, "values": clean, "n_seeds": len(finite(self.values)),
                "mean": m, "std": s, "ci_low": lo, "ci_high": hi,
                "interval": "wilson" if self.rate else "t"}


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
    # this check's own gate ("met: …" / "failed: …"), e.g. a measurement the machine could not make;
    # a failed one makes the check "not tested" (the row's gate, `Outcome.gate`, covers every check)
    gate: str | None = None
    result: dict = field(default_factory=dict)

    def evaluate(self, variants: dict[str, Variant]) -> dict:
        a, b = variants[self.better], variants[self.worse]
        rate = a.rate and b.rate
        failed = self.gate is not None and self.gate.startswith("failed")
        verdict, d, lo, hi = decide(a.values, b.values, self.higher_is_better, self.min_effect, self.ceiling,
                                    self.floor, rate=rate, gate_failed=failed)
        self.result = {"kind": "rate difference" if rate else "difference", "claim": self.claim,
                       "better": self.better, "worse": self.worse,
                       "higher_is_better": self.higher_is_better, "min_effect": self.min_effect,
                       "ceiling": self.ceiling, "floor": self.floor, "main": self.main,
                       "difference": d, "ci_low": lo, "ci_high": hi, "level": LEVEL,
                       "precondition": precondition(a.values, b.values, self.higher_is_better, self.ceiling,
                                                    self.floor),
                       "published": self.published, "gate": self.gate, "verdict": verdict}
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


def precondition(better: Sequence[float | None], worse: Sequence[float | None], higher_is_better: bool,
                 ceiling: float | None = None, floor: float | None = None) -> str | None:
    """Why the task cannot show the effect at all (B at the ceiling, both at the floor), or None."""
    xa, xb = finite(better), finite(worse)
    if not xa or not xb:
        return None
    sign = 1.0 if higher_is_better else -1.0
    ma, mb = sign * sum(xa) / len(xa), sign * sum(xb) / len(xb)
    if ceiling is not None and mb >= sign * ceiling:
        return f"B's mean is already at the task's ceiling ({ceiling:g}): the task cannot show a gain"
    if floor is not None and ma <= sign * floor and mb <= sign * floor:
        return f"both arms at the task's floor ({floor:g}): neither learned the task"
    return None


def difference_interval(better: Sequence[float], worse: Sequence[float], higher_is_better: bool,
                        level: float = LEVEL, rate: bool = False) -> tuple[float, float, float]:
    """(d, lo, hi) in the claimed direction: Welch t, or Newcombe for two success rates."""
    sign = 1.0 if higher_is_better else -1.0
    if rate:
        k1, n1, k2, n2 = int(sum(better)), len(better), int(sum(worse)), len(worse)
        lo, hi = newcombe(k1, n1, k2, n2, level)
        d = k1 / n1 - k2 / n2
    else:
        d, se, df = welch(better, worse)
        lo, hi = t_interval(d, se, df, level)
    lo, hi = sorted((sign * lo, sign * hi))
    return sign * d, lo, hi


def p_value(better: Sequence[float | None], worse: Sequence[float | None], higher_is_better: bool,
            min_effect: float, rate: bool = False) -> float:
    """The p-value Holm orders a check by: min(p of 'd > 0', p of 'd < δ'), two-sided-equivalent.

    Each is the smallest α at which the (1 − α) interval excludes that bound, so "p ≤ level" is
    exactly "the interval at 1 − level decides". Two one-sided questions per check, as in an
    equivalence test: at most one of "d ≤ 0" and "d ≥ δ" can be true (δ ≥ 0), so a wrong verdict
    still has probability ≤ α."""
    xa, xb = finite(better), finite(worse)
    sign = 1.0 if higher_is_better else -1.0
    if rate:
        k1, n1, k2, n2 = int(sum(xa)), len(xa), int(sum(xb)), len(xb)
        if sign > 0:
            return min(newcombe_p_beyond(k1, n1, k2, n2, 0.0, True),
                       newcombe_p_beyond(k1, n1, k2, n2, min_effect, False))
        return min(newcombe_p_beyond(k1, n1, k2, n2, 0.0, False),
                   newcombe_p_beyond(k1, n1, k2, n2, -min_effect, True))
    d, se, df = welch(xa, xb)
    d *= sign
    return min(t_p_beyond(d, se, df, 0.0, True), t_p_beyond(d, se, df, min_effect, False))


def decide(better: Sequence[float | None], worse: Sequence[float | None], higher_is_better: bool,
           min_effect: float, ceiling: float | None = None, floor: float | None = None,
           level: float = LEVEL, rate: bool = False, gate_failed: bool = False
           ) -> tuple[str, float | None, float | None, float | None]:
    """(verdict, d, lo, hi) for 'better beats worse by ≥ min_effect' — the rule in the docstring."""
    xa, xb = finite(better), finite(worse)
    if not xa or not xb:
        return (UNTESTED if gate_failed else UNSURE), None, None, None
    if len(xa) < 2 or len(xb) < 2:  # no variance, no interval
        sign = 1.0 if higher_is_better else -1.0
        d = sign * (sum(xa) / len(xa) - sum(xb) / len(xb))
        return (UNTESTED if gate_failed else UNSURE), d, None, None
    d, lo, hi = difference_interval(xa, xb, higher_is_better, level, rate)
    if gate_failed or precondition(xa, xb, higher_is_better, ceiling, floor):
        return UNTESTED, d, lo, hi
    return verdict_of(d, lo, hi, min_effect, len(xa), len(xb)), d, lo, hi


def verdict_of(d: float, lo: float, hi: float, min_effect: float, n_better: int, n_worse: int) -> str:
    """Steps 2–5 of the rule, from the interval alone."""
    if n_better < MIN_SEEDS or n_worse < MIN_SEEDS:
        return UNSURE
    if lo > 0 and d >= min_effect:
        return HOLDS
    if hi < min_effect:
        return FAILS
    return UNSURE


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
