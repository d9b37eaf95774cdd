"""What the auto recipe's speed probe predicts for each dataset, beside what runs of it made (issue 32 §4).

    python bench/real/probe_check.py DATA_DIR [--minutes 2 5 10 30] [--threads 1] [--runs RUN ...]

For each suite file under DATA_DIR (bench/real/prepare.py writes them: NAME-train.tsv / .txt), the
recipe is chosen as `glassformer train --max-minutes M --threads T` would choose it, and one line per
budget says the tokens a minute its probe measured, the passes that gives, and the dropout it predicts
(the run decides from its own first tenth: train/dropout_rule.py).
With --runs, each finished run folder's own speed is printed beside: its steps, its wall time, its
training steps' median tokens a minute (metrics.jsonl, the loop's own count) and the passes and dropout
its own rule decided, so a probe can be checked against the runs it sizes.
Nothing trains; each probe is a few seconds.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

SUFFIXES = (".tsv", ".txt")


def suite_files(data_dir: Path) -> list[tuple[str, Path]]:
    """(name, training file) of every suite dataset under data_dir, in name order."""
    return sorted((p.name[: -len("-train" + p.suffix)], p) for p in data_dir.iterdir()
                  if p.stem.endswith("-train") and p.suffix in SUFFIXES)


def predicted(name: str, path: Path, minutes: list[float], threads: int | None) -> list[dict]:
    from glassformer.train.config import TrainConfig
    from glassformer.train.recipe import choose
    from glassformer.train.tasks import raw_splits

    task = "lm" if path.suffix == ".txt" else "tsv"
    raw = raw_splits(TrainConfig(task=task, data=str(path)))
    given = {"threads": threads} if threads else {}
    rows = []
    for m in minutes:
        r = choose(task, raw, m, None, given=given)
        dropout = r.model["dropout"]
        if "dropout_auto" in r.train:  # left to the run: what the probe's passes predict it decides
            dropout = r.train["dropout_auto"] if r.passes >= r.train["dropout_passes"] else 0.0
        rows.append(dict(dataset=name, minutes=m, passes=round(r.passes, 2), dropout=dropout,
                         tokens_per_minute=round(r.tokens_per_minute)))
    return rows


def run_speed(run: Path) -> dict:
    """A finished run's steps, wall time and its training steps' median tokens a minute (the loop's own
    tokens_per_s lines: evaluations and checkpoints are not in them)."""
    rows = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
            if ln.strip().startswith("{")]
    train = [r for r in rows if r.get("split") == "train" and "tokens_per_s" in r]
    wall = max(r["elapsed_s"] for r in rows if "elapsed_s" in r)
    median = statistics.median(r["tokens_per_s"] for r in train) * 60
    ruled = [r for r in rows if r.get("split") == "dropout"]  # the run's own decision (dropout_rule.py)
    return dict(run=str(run), steps=max(r["step"] for r in train), wall_s=round(wall),
                median_tokens_per_minute=round(median),
                ruled_passes=round(ruled[0]["passes"], 2) if ruled else None,
                ruled_dropout=ruled[0]["dropout"] if ruled else None)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data_dir", type=Path)
    ap.add_argument("--minutes", type=float, nargs="+", default=[2, 5, 10, 30])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--datasets", nargs="*", help="names to probe (default: every suite file)")
    ap.add_argument("--runs", type=Path, nargs="*", default=[])
    args = ap.parse_args(argv)
    if not args.data_dir.is_dir():
        ap.error(f"{str(args.data_dir)!r} is not a folder; run bench/real/prepare.py DATA first")
    if any(m <= 0 for m in args.minutes) or args.threads < 1:
        ap.error("--minutes must be positive numbers and --threads at least 1")
    for run in args.runs:
        if not (run / "metrics.jsonl").is_file():
            ap.error(f"{str(run)!r} is not a run folder (it has no metrics.jsonl)")
    out = []
    for name, path in suite_files(args.data_dir):
        if args.datasets and name not in args.datasets:
            continue
        for row in predicted(name, path, args.minutes, args.threads):
            print(f"{name:8} {row['minutes']:>4g} min  probe {row['tokens_per_minute']:>9,} tok/min  "
                  f"{row['passes']:>7.2f} passes  dropout {row['dropout']}", flush=True)
            out.append(row)
    for run in args.runs:
        s = run_speed(run)
        print(f"{run}: {s['steps']} steps in {s['wall_s']} s, training steps' median "
              f"{s['median_tokens_per_minute']:,} tok/min"
              + (f"; its rule: {s['ruled_passes']} passes, dropout {s['ruled_dropout']}"
                 if s["ruled_dropout"] is not None else ""), flush=True)
        out.append(s)
    return out


if __name__ == "__main__":
    main()
