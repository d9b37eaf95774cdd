"""The statistics behind every verdict: Wilson intervals, bootstrap intervals, steps to a threshold.

Small-sample rules a reviewer expects (and nothing more):
- a *success rate* (k of n seeds reached the goal) gets the Wilson score interval, which stays
  inside [0, 1] and does not collapse to a point at k = 0 or k = n (Wilson 1927);
- a *mean* and a *difference of two means* get a percentile bootstrap interval: resample the
  seeds of each arm with replacement, B times, from a fixed generator (Efron & Tibshirani 1993);
- where runs sit on a plateau and leave it all at once, the number that carries information is
  *when* a run crosses a loss threshold, not its loss at a fixed step (`steps_to`).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

LEVEL = 0.95  # every interval in the report is a 95% interval
BOOTSTRAP = 4000  # resamples; the CI endpoints move by < 0.01 std between generator seeds
_Z = 1.959963984540054  # the standard normal's 97.5% quantile


def finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def is_rate(values: Sequence[float | None]) -> bool:
    """Values that are all 0 or 1 are success indicators: their mean is a rate."""
    xs = finite(values)
    return bool(xs) and all(x in (0.0, 1.0) for x in xs)


def wilson(successes: int, n: int, z: float = _Z) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion k/n."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _percentile_ci(samples: np.ndarray) -> tuple[float, float]:
    alpha = (1 - LEVEL) / 2
    lo, hi = np.quantile(samples, [alpha, 1 - alpha])
    return float(lo), float(hi)


def bootstrap_mean(values: Sequence[float | None], seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of the finite values."""
    xs = np.asarray(finite(values))
    if xs.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    means = xs[rng.integers(0, xs.size, (BOOTSTRAP, xs.size))].mean(1)
    return _percentile_ci(means)


def bootstrap_difference(a: Sequence[float | None], b: Sequence[float | None],
                         seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of mean(a) − mean(b), each arm resampled on its own."""
    xa, xb = np.asarray(finite(a)), np.asarray(finite(b))
    if xa.size == 0 or xb.size == 0:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    ma = xa[rng.integers(0, xa.size, (BOOTSTRAP, xa.size))].mean(1)
    mb = xb[rng.integers(0, xb.size, (BOOTSTRAP, xb.size))].mean(1)
    return _percentile_ci(ma - mb)


def interval(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """The interval the report prints for one arm: Wilson for a rate, bootstrap for a mean."""
    xs = finite(values)
    if not xs:
        return None, None
    if is_rate(xs):
        return wilson(int(sum(xs)), len(xs))
    return bootstrap_mean(xs)


def steps_to(losses: Sequence[float], threshold: float, budget: int, smooth: int = 10) -> float:
    """First step (1-based) at which the running mean of `smooth` losses is ≤ threshold.

    A run that never gets there is *censored*: it returns budget + 1, i.e. "later than the
    budget" (a diverged run's curve ends early and counts the same), so that a mean over seeds is a lower bound on the true mean time and a run that
    fails still counts against its arm.
    """
    acc = 0.0
    window: list[float] = []
    for step, x in enumerate(losses, 1):
        if not math.isfinite(x):
            break
        window.append(x)
        acc += x
        if len(window) > smooth:
            acc -= window.pop(0)
        if len(window) == smooth and acc / smooth <= threshold:
            return float(step)
    return float(budget + 1)
