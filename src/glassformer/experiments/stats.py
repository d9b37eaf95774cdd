"""The statistics behind every verdict: Welch, Wilson/Newcombe and Holm; steps to a threshold.

Small-sample rules a reviewer expects (and nothing more):
- a *difference of two means* gets the Welch t interval (Welch 1947): each arm keeps its own
  variance, and with 5 seeds a t quantile (2.8 at 4 df) instead of a bootstrap's resampled spread,
  which on 5 seeds is 25–35% too narrow (issue 28);
- a *success rate* (k of n seeds reached the goal, declared so by its metric, never guessed from
  values that happen to be 0 or 1) gets the Wilson score interval, which stays inside [0, 1] and
  does not collapse at k = 0 or k = n (Wilson 1927); a difference of two rates gets Newcombe's
  hybrid score interval built from the two Wilson intervals (Newcombe 1998, method 10);
- a *family* of checks is held to one error rate by Holm's step-down (Holm 1979): the i-th
  smallest of m p-values is tested at α/(m − i + 1), and the first that fails stops the descent;
- a per-arm mean is shown with its one-sample t interval;
- where runs sit on a plateau and leave it all at once, the number that carries information is
  *when* a run crosses a loss threshold, not its loss at a fixed step (`steps_to`).
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats as _sp

LEVEL = 0.95  # every interval in the report is a 95% interval
BOOTSTRAP = 4000  # resamples; the CI endpoints move by < 0.01 std between generator seeds
_Z = 1.959963984540054  # the standard normal's 97.5% quantile


def finite(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(v)]


def z_of(level: float) -> float:
    """The two-sided normal quantile of a confidence level (1.96 at 0.95)."""
    return float(_sp.norm.ppf(0.5 + level / 2))


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


def interval(values: Sequence[float | None], rate: bool = False,
             level: float = LEVEL) -> tuple[float | None, float | None]:
    """The interval the report prints for one arm: Wilson for a declared rate, t for a mean."""
    xs = finite(values)
    if not xs:
        return None, None
    if rate:
        return wilson(int(sum(xs)), len(xs), z_of(level))
    m = sum(xs) / len(xs)
    if len(xs) < 2:
        return m, m
    half = float(_sp.t.ppf(0.5 + level / 2, len(xs) - 1)) * float(np.std(xs, ddof=1)) / math.sqrt(len(xs))
    return m - half, m + half


# ---- differences: the interval behind every verdict ----
def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """(mean(a) − mean(b), its standard error, Welch–Satterthwaite degrees of freedom).

    An arm that is a constant (the "no change" arm, a chance level) has variance 0 and the
    interval becomes the other arm's one-sample t interval, as it should; when both are constant
    the standard error is 0 and the difference is known exactly."""
    xa, xb = np.asarray(a, float), np.asarray(b, float)
    va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
    se = math.sqrt(va + vb)
    d = float(xa.mean() - xb.mean())
    if se == 0:
        return d, 0.0, math.inf
    df = (va + vb) ** 2 / (va ** 2 / (xa.size - 1) + vb ** 2 / (xb.size - 1))
    return d, se, float(df)


def t_interval(d: float, se: float, df: float, level: float) -> tuple[float, float]:
    half = 0.0 if se == 0 else float(_sp.t.ppf(0.5 + level / 2, df)) * se
    return d - half, d + half


def t_p_beyond(d: float, se: float, df: float, bound: float, above: bool) -> float:
    """Two-sided-equivalent p of "the difference lies above (below) `bound`": the smallest α at
    which the (1 − α) interval excludes `bound` on that side (1 when d is on the wrong side)."""
    if se == 0:
        return 0.0 if (d > bound if above else d < bound) else 1.0
    t = (d - bound) / se if above else (bound - d) / se
    return float(min(1.0, 2 * _sp.t.sf(t, df)))


def newcombe(k1: int, n1: int, k2: int, n2: int, level: float = LEVEL) -> tuple[float, float]:
    """Newcombe's hybrid score interval of p1 − p2 (1998, method 10), from two Wilson intervals."""
    z = z_of(level)
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1, z)
    l2, u2 = wilson(k2, n2, z)
    d = p1 - p2
    return (d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2),
            d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2))


def newcombe_p_beyond(k1: int, n1: int, k2: int, n2: int, bound: float, above: bool) -> float:
    """The smallest α at which Newcombe's (1 − α) interval excludes `bound` on the given side.

    The interval has no closed-form test behind it, so the level is found by bisection (the
    interval widens monotonically with the level)."""
    def excludes(level):
        lo, hi = newcombe(k1, n1, k2, n2, level)
        return lo > bound if above else hi < bound
    if not excludes(1e-9):
        return 1.0
    lo_lvl, hi_lvl = 1e-9, 1 - 1e-12
    if excludes(hi_lvl):
        return 1e-12
    for _ in range(60):
        mid = (lo_lvl + hi_lvl) / 2
        lo_lvl, hi_lvl = (mid, hi_lvl) if excludes(mid) else (lo_lvl, mid)
    return 1 - lo_lvl


def holm_levels(pvalues: Sequence[float], alpha: float = 1 - LEVEL) -> list[float]:
    """Holm's step-down: the α each hypothesis is tested at, in the order given.

    Sorted ascending, the i-th (0-based) of m is tested at α/(m − i); at the first p above its
    level the descent stops and every later hypothesis keeps that same level (none of them can
    be rejected: their p are at least as large). So `p ≤ level` is exactly Holm's rejection, and
    an interval at confidence 1 − level is the one that verdict may rest on."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    levels = [0.0] * m
    stopped = None
    for rank, i in enumerate(order):
        a = alpha / (m - rank) if stopped is None else stopped
        if stopped is None and pvalues[i] > a:
            stopped = a
        levels[i] = a
    return levels


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
