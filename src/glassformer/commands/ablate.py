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
                                    help="pe-order, scaling, residual, norm-placement, norm-type, "
                                         "pe-extrapolation, pe-add-concat, heads, ffn, rnn, or all"),
        out: Path = typer.Option(..., "--out", help="folder for REPORT.md, plots and results.json"),
        quick: bool = typer.Option(False, "--quick", help="tiny runs (CI): proves the code runs; "
                                                         "verdicts may be inconclusive"),
        json_path: Optional[Path] = typer.Option(None, "--json", help="also write the rows here"),
        seeds: Optional[int] = typer.Option(None, "--seeds", help="seeds per variant "
                                                                  "(default 3; 2 with --quick)"),
        jobs: int = typer.Option(1, "--jobs", help="experiments run at once, each in its own process"),
    ) -> None:
        """Measure each claim of the seeds over several seeds and say whether it holds."""
        from ..errors import InputError
        from ..experiments import registry
        from ..experiments.report import PLOT_DIR, write_json, write_report

        ids = registry.resolve(which)
        n = seeds if seeds is not None else (2 if quick else 3)
        if n < 1:
            raise InputError(f"--seeds {n} must be at least 1 (3 or more for a verdict)")
        if jobs < 1:
            raise InputError(f"--jobs {jobs} must be at least 1")
        if out.exists() and not out.is_dir():
            raise InputError(f"--out {out} is a file; give a folder")
        if jobs > 1:  # a TERM signal must end the worker processes too (the pool's exit does it)
            import signal
            import sys
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        start = time.perf_counter()
        done: dict[str, dict] = {}
        for row in registry.run_many(ids, quick, list(range(n)), out / PLOT_DIR, jobs,
                                     log=lambda msg: typer.echo(msg, err=True)):
            typer.echo(f"[{row['id']}] {row['verdict']} ({row['seconds']:.1f} s)", err=True)
            done[row["id"]] = row
            rows = [done[i] for i in ids if i in done]  # the registry's order, whatever finished first
            # rewrite after every experiment: a long run's finished rows survive an interruption
            header = {"mode": "quick" if quick else "full", "seeds": n,
                      "seconds": time.perf_counter() - start, "machine": _machine(),
                      "command": f"glassformer ablate {which}{' --quick' if quick else ''} --seeds {n} --jobs {jobs}"}
            write_report(rows, out, header)
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
