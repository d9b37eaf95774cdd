"""Would more minutes help? A stated rule on the validation curve (issue 32 §5).

The rule: of the run's n validations (metrics.jsonl, split "valid"), compare the best of the
last k = min(3, n − 1) with the best before them, for each held-out measure the run logs:

- the held-out loss: a gain if the last k lowered the best loss by more than LOSS_GAIN (0.5%);
- the exact match (translators): a gain if they raised the best by more than EXACT_GAIN (1 point);

"still improving" if either measure gained, else "plateaued"; fewer than 3 validations: "too few
validations to tell". Both measures, because each alone misleads: an exact match still at 0% hides
a loss that falls fast, and a loss that rises (over-confidence) can hide an exact match that climbs.
A gain below the thresholds is within what the same weights scored twice differ by. A run whose
wsd decay started early (schedule.WSDClock: validation stalled at the peak rate) is "plateaued"
whatever its last validations gained: that gain is the decay's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

LAST = 3  # validations at the end of the curve
LOSS_GAIN = 0.005  # relative fall of the best held-out loss
EXACT_GAIN = 0.01  # absolute rise of the best held-out exact match
MIN_VALIDATIONS = 3
# a gain must pass its threshold by more than float rounding: 0.65 − 0.64 is 0.010000000000000009, and
# 5 more right of 500 held-out items is a rise *of* 1 point, not over it (two 10-minute runs read "still
# improving" on exactly that)
ROUNDING = 1e-9


def _gain(values: Sequence[float], k: int, measure: str) -> tuple[float, str, bool]:
    """(gain, words, counts) of the last k values over the best before them."""
    before, last = values[:-k], values[-k:]
    if measure == "loss":
        was, now = min(before), min(last)
        gain = (was - now) / max(abs(was), 1e-12)
        words = (f"lowered the best held-out loss by {was - now:.4f} ({100 * gain:.2f}%)" if gain > 0 else
                 f"did not lower the best held-out loss ({now:.4f} against {was:.4f} before)")
        return gain, words, gain > LOSS_GAIN + ROUNDING
    was, now = max(before), max(last)
    gain = now - was
    words = (f"raised the best exact match by {100 * gain:.1f} points" if gain > 0 else
             f"did not raise the best exact match ({100 * now:.1f}% against {100 * was:.1f}% before)")
    return gain, words, gain > EXACT_GAIN + ROUNDING


def judge(curves: dict[str, Sequence[float]]) -> dict[str, Any]:
    """The verdict on validation curves, {"loss": [...], "exact_match": [...]} in the order logged
    (exact_match only for translators)."""
    n = len(curves["loss"])
    if n < MIN_VALIDATIONS:
        return {"verdict": "too few", "n": n,
                "text": f"too few validations to tell whether more minutes would help ({n}; need "
                        f"{MIN_VALIDATIONS}: lower --eval-every)"}
    k = min(LAST, n - 1)
    gains = {m: _gain(v, k, m) for m, v in curves.items() if len(v) == n}
    improving = [m for m, (_, _, counts) in gains.items() if counts]
    shown = improving or list(gains)
    what = f"the last {k} validations " + " and ".join(gains[m][1] for m in shown)
    rule = f"(a fall over {100 * LOSS_GAIN:.1f}% of the loss or a rise over {100 * EXACT_GAIN:.0f} point counts)"
    out = {"n": n, "k": k, "gain": {m: g for m, (g, _, _) in gains.items()}}
    if improving:
        return {**out, "verdict": "improving",
                "text": f"still improving: {what} {rule}; more minutes would likely help"}
    return {**out, "verdict": "plateaued", "text": f"plateaued: {what} {rule}; more minutes alone are unlikely to help"}


def from_metrics(path: Path) -> dict[str, Any]:
    """The verdict on the "valid" records of a run's metrics.jsonl."""
    records = [json.loads(ln) for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]
    valid = [r for r in records if r.get("split") == "valid"]
    curves = {"loss": [r["loss"] for r in valid]}
    if valid and all("exact_match" in r for r in valid):
        curves["exact_match"] = [r["exact_match"] for r in valid]
    out = judge(curves)
    early = [r for r in records if r.get("split") == "schedule" and r.get("early_decay")]
    if early and out["verdict"] != "too few":
        # the wsd decay started early (schedule.WSDClock): the curve had stalled at the peak rate, so
        # what the last validations gained is the decay's, not a sign that more minutes would help
        at = early[-1]
        out = {**out, "verdict": "plateaued",
               "text": f"plateaued at the peak rate: validation stalled there by step {at['step']:,}"
                       f" ({at['elapsed_s'] / 60:.1f} min), so the rate decayed from that point and the run ended;"
                       f" the gain of its last validations is the decay's, and more minutes alone are unlikely"
                       f" to help"}
    return out
