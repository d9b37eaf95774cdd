"""`glassformer ablate ID|all`: test the seeds' claims, one small experiment each, and write REPORT.md."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def ablate(
        which: str = typer.Argument(..., metavar="ID|all",
                                    help="an experiment id (the sections of docs/claims.md) or all"),
        out: Path = typer.Option(..., "--out", help="folder for REPORT.md, plots and results.json"),
        quick: bool = typer.Option(False, "--quick", help="tiny runs (CI): proves the code runs; "
                                                         "verdicts may be inconclusive"),
        json_path: Optional[Path] = typer.Option(None, "--json", help="also write the rows here"),
        seeds: Optional[int] = typer.Option(None, "--seeds", help="seeds per variant (default: each "
                                                                  "experiment's own, 10 or 5; 2 with --quick)"),
        jobs: int = typer.Option(1, "--jobs", help="experiments run at once, each in its own process"),
        fresh: bool = typer.Option(False, "--fresh", help="ignore the cache of finished runs in OUT/cache"),
        runs: Optional[Path] = typer.Option(None, "--runs", help="a folder of finished single runs to take "
                                            "instead of training them (docs/claims/runs: the runs behind "
                                            "the page's text rows)"),
        reverse: bool = typer.Option(False, "--reverse", help="train in the opposite order (every row's rate "
                                     "sweeps; the text rows' arms and seeds too): started beside a first call "
                                     "with the same --out, it takes the runs from the other end and a long row "
                                     "uses two cores"),
    ) -> None:
        """Measure each claim of the seeds over several seeds and say whether it holds."""
        from ..errors import InputError
        from ..experiments import registry
        from ..experiments.report import PLOT_DIR, write_json, write_report

        ids = registry.resolve(which)
        if seeds is not None and seeds < 1:
            raise InputError(f"--seeds {seeds} must be at least 1 (5 or more for a verdict)")
        if jobs < 1:
            raise InputError(f"--jobs {jobs} must be at least 1")
        if out.exists() and not out.is_dir():
            raise InputError(f"--out {out} is a file; give a folder")
        if runs is not None and not runs.is_dir():
            raise InputError(f"--runs {runs} is not a folder; give one of finished runs, such as docs/claims/runs")
        if runs is not None and not any(runs.glob("*.*.json")):  # a wrong path would train for hours unasked
            raise InputError(f"--runs {runs} holds no finished runs (files named MODE.DIGEST.json, as "
                             "OUT/cache/runs/shared holds them); give such a folder, such as docs/claims/runs")
        if reverse and fresh:
            raise InputError("--reverse shares a row's runs with another call through OUT/cache, which --fresh "
                             "ignores; drop one of them")
        if runs is not None and fresh:  # --fresh trains every run, so the archive would be read by nothing
            raise InputError("--runs takes finished runs in place of training them, and --fresh trains every run; "
                             "drop --fresh (give an empty --out for a clean row)")
        if jobs > 1 and len(ids) == 1:  # --jobs parallelises rows, so one row would silently keep one core
            typer.echo(f"note: --jobs {jobs} runs rows side by side and {which} is one row, trained one run at a "
                       f"time; for a second core start `glassformer ablate {which} --out {out} --reverse` beside "
                       "this call", err=True)
        if jobs > 1:  # a TERM signal must end the worker processes too (the pool's exit does it)
            import signal
            import sys
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        start = time.perf_counter()
        done: dict[str, dict] = {}
        cache = None if fresh else out / "cache"
        # rows already finished before this call: the wall time below is from scratch only without them
        cached = [i for i in ids if cache is not None and registry.cached_row(registry.cache_path(
            cache, i, quick, seeds or registry.default_seeds(i, quick))) is not None]
        for row in registry.run_many(ids, quick, seeds, out / PLOT_DIR, jobs,
                                     log=lambda msg: typer.echo(msg, err=True), cache_dir=cache, archive=runs,
                                     reverse=reverse):
            typer.echo(f"[{row['id']}] {row['verdict']} ({row['seconds']:.1f} s)", err=True)
            done[row["id"]] = row
            rows = [done[i] for i in ids if i in done]  # the registry's order, whatever finished first
            # rewrite after every experiment: a long run's finished rows survive an interruption
            header = {"mode": "quick" if quick else "full", "seeds": seeds or "per experiment",
                      "seconds": time.perf_counter() - start, "machine": _machine(),
                      "command": f"glassformer ablate {which}{' --quick' if quick else ''}"
                                 f"{f' --seeds {seeds}' if seeds else ''} --jobs {jobs}"
                                 f"{f' --runs {runs}' if runs else ''}{' --reverse' if reverse else ''}"}
            write_report(rows, out, header, ids)
            write_json({**header, "jobs": jobs, "cached": cached, "finished": len(rows), "of": len(ids)},
                       out / "run.json")
            if json_path is not None:
                write_json(rows, json_path)
        for row in rows:
            typer.echo(f"{row['id']:18s} {row['verdict']}")
        typer.echo(f"report: {out / 'REPORT.md'}")


def _machine() -> str:
    import os
    import platform

    import torch
    return f"{platform.machine()} CPU ({os.cpu_count()} cores, torch {torch.__version__}, 1 thread per run)"
