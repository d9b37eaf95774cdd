"""Which model `best/` holds when the run ends: the highest-scoring evaluation, or the last model.

Exact match on the held-out pairs (the first 500 by default, `--eval-size`) is a noisy score: its
standard error near 85% is 1.6 points, and a run evaluates dozens of times. While the rate is held
at its peak the curve is flat and noisy, so the highest of those scores is mostly the luckiest one —
the winner's curse — and a checkpoint from there can beat the last model, which has had the rate's
decay, on validation while losing to it on fresh data. Measured (issue 32, pinyin, 10 minutes, bf16):
two runs' best/ came from peak-rate steps (7,000 and 9,200 of ~11,300) and scored 85.2% and 85.0% on
5,000 test phrases; their last models scored 87.1% and 87.4% (docs/real-data.md, "best/ and the
winner's curse": the last model scored at least as high in all eight pairs measured).

So the run ends with a paired test on the validation pairs both were scored on: an earlier best/
stays only where it was right on significantly more of the pairs where the two disagree than the
last model (McNemar's exact test, one-sided, p < 0.05); otherwise the last model becomes best/.
Runs monitored by loss keep the lowest loss: summed over every held-out token it is far less noisy.
"""

from __future__ import annotations

import math
from typing import Sequence

from .evaluate import item_outputs, same_answer

ALPHA = 0.05  # an earlier best/ must be this unlikely to lead by chance to be kept over the last model


def right_items(raw: Sequence[tuple[str, str]], hypotheses: Sequence[str]) -> list[bool]:
    """For each item exact match scores (evaluate.item_outputs), whether its output is one of its
    right answers; `hypotheses` has one output per line of `raw`, in line order."""
    outputs, _, refs = item_outputs(raw, dict(zip((src for src, _ in raw), hypotheses)))
    return list(map(same_answer, outputs, refs))


def mcnemar_one_sided(only_first: int, only_second: int) -> float:
    """P(the first model is right on at least `only_first` of the n = `only_first + only_second`
    pairs where exactly one of the two is right | both equally good): the binomial(n, 1/2) tail."""
    n = only_first + only_second
    return sum(math.comb(n, k) for k in range(only_first, n + 1)) / 2 ** n if n else 1.0


def decide(raw, best_hypotheses, last_hypotheses, best: dict, last: dict) -> dict:
    """Keep the earlier best (`best`: its step and exact match) or take the last model (`last`)."""
    a, b = right_items(raw, best_hypotheses), right_items(raw, last_hypotheses)
    only_best = sum(x and not y for x, y in zip(a, b))
    only_last = sum(y and not x for x, y in zip(a, b))
    p = mcnemar_one_sided(only_best, only_last)
    return {"best_step": best["step"], "best_exact_match": best["exact_match"], "last_step": last["step"],
            "last_exact_match": last["exact_match"], "n": len(a), "only_best": only_best,
            "only_last": only_last, "p": p, "kept": "best" if p < ALPHA else "last"}


def summary(d: dict) -> str:
    """One line: which model best/ holds and the test that decided it."""
    b = f"step {d['best_step']:,}"
    em = {k: f"{100 * d[f'{k}_exact_match']:.1f}%" for k in ("best", "last")}
    apart = d["only_best"] + d["only_last"]
    if apart == 0:
        test = f"the two are right on the same {d['n']:,} held-out items (p = 1"
    else:
        test = (f"on {apart:,} of the {d['n']:,} held-out items one of the two was right and the other not, {b} on "
                f"{d['only_best']:,} and the last on {d['only_last']:,} (one-sided McNemar p = {d['p']:.2g}")
    if d["kept"] == "best":
        return (f"best/ keeps {b}'s model ({em['best']} exact match) over the last (step {d['last_step']:,}, "
                f"{em['last']}): {test} < {ALPHA})")
    why = ("no lead in exact match: best/ takes the model the whole run made" if d["only_best"] <= d["only_last"]
           else "a lead the highest of many noisy evaluations has by chance")
    return (f"best/ holds the last model (step {d['last_step']:,}, {em['last']} exact match), not {b}'s "
            f"({em['best']}): {test} ≥ {ALPHA}), {why} (train/selection.py)")
