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


def write_report(rows: list[dict], out_dir: Path, header: dict, all_ids: Sequence[str] = ()) -> dict:
    """DIR/REPORT.md, DIR/claims.json (the decision layer over these rows: `claims_doc.build`) and
    DIR/results.json (the rows as measured). REPORT.md is `claims_doc.render(claims.json)`.

    Ids in `all_ids` without a row are named as "not rerun" in the page's introduction."""
    from .claims_doc import build, render

    out_dir.mkdir(parents=True, exist_ok=True)
    timing = header.get("wall") or f"total time {header['seconds']:.0f} s"
    have = {row["id"] for row in rows}
    missing = [i for i in all_ids if i not in have]
    intro = (f"Mode: **{header['mode']}**; seeds: {header['seeds']}; {timing} on {header['machine']}; command: "
             f"`{header['command']}`. Each experiment trains small models from scratch with the lean trainer of "
             "`glassformer.experiments.runner` (or computes an exact quantity) and measures one number per seed. "
             "Nothing is chosen by hand: the verdict follows from the numbers by the rule below."
             + (f" Not rerun: {', '.join(f'`{m}`' for m in missing)}." if missing else ""))
    doc = build(rows, {**{k: header[k] for k in header if k in ("status", "closing", "title")}, "intro": intro})
    atomic_text(out_dir / "REPORT.md", render(doc))
    write_json(doc, out_dir / "claims.json")
    write_json(rows, out_dir / "results.json")
    return doc


def atomic_text(path: Path, text: str) -> None:
    """Temp file + rename: an interrupted write never leaves half a page."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_json(rows: list[dict] | dict, path: Path) -> None:
    atomic_text(path, json.dumps(rows, indent=1, ensure_ascii=False, allow_nan=False, default=_json_default))


def _json_default(o):
    raise TypeError(f"not JSON-serialisable: {type(o).__name__}")
