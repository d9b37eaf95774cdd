"""REPORT.md, its plots and the JSON rows of `glassformer ablate`.

The report is written so that `DIR/REPORT.md` + `DIR/claims/*.png` can be copied as-is to
`docs/claims.md` + `docs/claims/` (the links are relative to the report).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")  # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402

from .verdict import RULE  # noqa: E402

PLOT_DIR = "claims"


def line_plot(path: Path, series: dict[str, tuple[Sequence[float], Sequence[float]]], xlabel: str,
              ylabel: str, title: str, logx: bool = False, logy: bool = False,
              bands: dict[str, Sequence[float]] | None = None) -> None:
    """One line per series (x, y); optional ± band per series; NaN/inf points are skipped."""
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    for name, (xs, ys) in series.items():
        pts = [(x, y) for x, y in zip(xs, ys) if y is not None and math.isfinite(y)]
        if not pts:
            continue
        px, py = zip(*pts)
        line, = ax.plot(px, py, label=name, marker="o" if len(px) <= 12 else None, lw=1.4)
        if bands and name in bands:
            lo = [y - s for y, s in zip(py, bands[name])]
            hi = [y + s for y, s in zip(py, bands[name])]
            ax.fill_between(px, lo, hi, alpha=0.2, color=line.get_color())
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)



def step_plot(path: Path, curves: dict[str, Sequence[float]], ylabel: str, title: str, **kw) -> None:
    """`line_plot` of per-step curves: x is the step, 1, 2, …"""
    line_plot(path, {k: (list(range(1, len(v) + 1)), v) for k, v in curves.items()}, "step", ylabel, title, **kw)

def smooth(xs: Sequence[float], k: int = 10) -> list[float]:
    """Running mean over k steps (loss curves are noisy at small batch sizes)."""
    out, acc = [], []
    for x in xs:
        acc.append(x)
        if len(acc) > k:
            acc.pop(0)
        out.append(sum(acc) / len(acc))
    return out


def mean_curve(curves: Sequence[Sequence[float]]) -> list[float]:
    """Step-wise mean of several loss curves (shorter, diverged curves end early)."""
    n = max((len(c) for c in curves), default=0)
    out = []
    for i in range(n):
        xs = [c[i] for c in curves if i < len(c) and math.isfinite(c[i])]
        out.append(sum(xs) / len(xs) if xs else math.nan)
    return out


def _fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e4):
            return f"{v:.3g}"
        return f"{v:.4g}"
    return str(v)


# The verdicts of docs/claims.md before issue 12 (main at 52ccebe: 3 seeds, rule d > max(std, δ)),
# kept so that the report can print "before" beside "after".
BEFORE = {"commit": "52ccebe", "rule": "3 seeds, d > max(std, δ)", "verdicts": {
    "pe-order": "holds", "scaling": "inconclusive", "residual": "holds", "norm-placement": "holds",
    "norm-type": "does not hold", "pe-extrapolation": "holds", "pe-add-concat": "does not hold",
    "heads": "holds", "ffn": "does not hold", "rnn": "does not hold"}}


def _ci(lo, hi) -> str:
    return "—" if lo is None or hi is None else f"[{_fmt(lo)}, {_fmt(hi)}]"


def _protocol(row: dict) -> str:
    n = len(row["seeds"])
    if row["checks"] and all(c.get("kind") == "exact" for c in row["checks"]) and n == 1:
        return "exact check (deterministic)"
    return f"quick, {n} seeds (code check, not a verdict)" if row["quick"] else f"full, {n} seeds"


def _main_intervals(row: dict) -> str:
    """The main checks' d and interval (or the exact value), as the summary table shows them."""
    parts = []
    for c in row["checks"]:
        if c["main"]:
            ci = "" if c.get("kind") == "exact" else " " + _ci(c.get("ci_low"), c.get("ci_high"))
            parts.append(f"{_fmt(c['difference'])}{ci}")
    return "; ".join(parts)


def _row_md(row: dict) -> list[str]:
    lines = [f"## `{row['id']}` — {row['verdict']}", "",
             f"**Claim** ({row['seed_section']}): {row['claim']}", "",
             f"**Run**: {_protocol(row)}.", "",
             f"**Setup**: {row['setup']}", "",
             "| variant | metric | values (one per seed) | n | mean | 95% CI |", "|---|---|---|---|---|---|"]
    for v in row["variants"]:
        vals = ", ".join(_fmt(x) for x in v["values"])
        if len(v["values"]) > 12:
            vals = ", ".join(_fmt(x) for x in v["values"][:12]) + ", …"
        ci = _ci(v.get("ci_low"), v.get("ci_high"))
        kind = " (Wilson)" if v.get("interval") == "wilson" else ""
        lines.append(f"| {v['name']} | {v['metric']} | {vals} | {v.get('n_seeds', '')} | {_fmt(v['mean'])} | "
                     f"{ci}{kind} |")
    lines += ["", "| check | A (claimed better) | B | d (or value) | 95% CI of d | δ (or threshold) | main | "
              "published | verdict |", "|---|---|---|---|---|---|---|---|---|"]
    for c in row["checks"]:
        bar = _fmt(c["min_effect"])
        if c.get("kind") == "exact":
            bar = f"{c['relation']} {_fmt(c['threshold'])}"
        lines.append(f"| {c['claim']} | {c['better']} | {c['worse']} | {_fmt(c['difference'])} | "
                     f"{_ci(c.get('ci_low'), c.get('ci_high'))} | {bar} | {'yes' if c['main'] else 'side'} | "
                     f"{c.get('published') or '—'} | {c['verdict']} |")
    lines.append("")
    for file, caption in row.get("plots", []):
        lines += [f"![{caption}]({PLOT_DIR}/{file})", f"*{caption}*", ""]
    if row.get("notes"):
        lines += [f"**Reading**: {row['notes']}", ""]
    lines.append(f"*Time: {row['seconds']:.1f} s.*")
    lines.append("")
    return lines


def write_report(rows: list[dict], out_dir: Path, header: dict, all_ids: Sequence[str] = ()) -> Path:
    """DIR/REPORT.md (summary table, rule, one section per experiment) and DIR/results.json.

    Ids in `all_ids` without a row are listed as "not rerun", with their verdict before."""
    out_dir.mkdir(parents=True, exist_ok=True)
    timing = header.get("wall") or f"total time {header['seconds']:.0f} s"
    lines = ["# Do the seeds' claims hold? — `glassformer ablate`", "",
             f"Mode: **{header['mode']}**; seeds: {header['seeds']}; {timing} "
             f"on {header['machine']}; command: `{header['command']}`.", "",
             "Each experiment trains small models from scratch with the lean trainer of "
             "`glassformer.experiments.runner` (or computes an exact quantity) and measures one number "
             "per seed. Nothing is chosen by hand: the verdict follows from the numbers by the rule below.", "",
             "## Verdict rule", "", RULE, "",
             "## Summary", "",
             f"*Before*: the verdict of main at {BEFORE['commit']} ({BEFORE['rule']}). *Run*: the "
             "protocol this row was measured with in this report.", "",
             "| id | claim | seed section | run | before | main checks: d [95% CI] | verdict |",
             "|---|---|---|---|---|---|---|"]
    have = {row["id"] for row in rows}
    for row in rows:
        claim = row["claim"] if len(row["claim"]) < 140 else row["claim"][:137] + "..."
        lines.append(f"| [`{row['id']}`](#{row['id']}--{row['verdict'].replace(' ', '-')}) | {claim} | "
                     f"{row['seed_section']} | {_protocol(row)} | {BEFORE['verdicts'].get(row['id'], 'new')} | "
                     f"{_main_intervals(row)} | **{row['verdict']}** |")
    for exp_id in all_ids:
        if exp_id not in have:
            lines.append(f"| `{exp_id}` | | | not rerun | {BEFORE['verdicts'].get(exp_id, 'new')} | | — |")
    lines.append("")
    for row in rows:
        lines += _row_md(row)
    path = out_dir / "REPORT.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    write_json(rows, out_dir / "results.json")
    return path


def write_json(rows: list[dict] | dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1, ensure_ascii=False, allow_nan=False,
                               default=_json_default), encoding="utf-8")


def _json_default(o):
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")
