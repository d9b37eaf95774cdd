"""`glassformer bench`: glassformer against Hugging Face and PyTorch on the same work (issue 7)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def bench(
        quick: bool = typer.Option(False, "--quick", help="Tiny shapes, 2 repeats: shows the harness works (seconds)."),
        json_path: Optional[Path] = typer.Option(None, "--json", help="Write every number to this JSON file."),
        md: Optional[Path] = typer.Option(None, "--md", help="Write the report (and a .png plot beside it)."),
        only: Optional[str] = typer.Option(None, "--only", help="Comma-separated sections to run."),
        notes: Optional[Path] = typer.Option(None, "--notes", help="Markdown appended to the report."),
    ) -> None:
        """Time glassformer against HF BertModel, nn.Transformer and HF GPT-2; print the ratios."""
        import json

        from ..bench import SECTIONS, run_all
        from ..errors import InputError

        chosen = [s.strip() for s in only.split(",")] if only else None
        bad = [s for s in chosen or [] if s not in SECTIONS]
        if bad:
            raise InputError(f"unknown bench section {', '.join(bad)}; choose from {', '.join(SECTIONS)}")
        if notes is not None and md is None:  # the notes are a part of the report, and only --md writes one
            raise InputError(f"--notes {notes} is appended to the --md report, and no --md is given; give --md FILE,"
                             " or drop --notes")
        if notes is not None and not notes.is_file():
            raise InputError(f"--notes file {notes} does not exist; give a markdown file")
        results = run_all(quick=quick, only=chosen, log=lambda m: typer.echo(m, err=True))
        for row in results["targets"]:
            mark = "ok  " if row["met"] else "MISS"
            typer.echo(f"{mark} {row['target']:48s} {row['value']:8.3f}  goal {row['goal']}")
        if json_path is not None:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(json.dumps(results, indent=1), encoding="utf-8")
        if md is not None:
            from ..bench.report import write
            flags = [("--quick", quick), (f"--only {only}", only), (f"--json {json_path}", json_path),
                     (f"--md {md}", md), (f"--notes {notes}", notes)]
            command = " ".join(["glassformer bench"] + [text for text, given in flags if given])
            write(results, md, command, notes.read_text(encoding="utf-8") if notes else "")
