"""`glassformer export-html SENTENCE... --out FILE`: one trace as a standalone, offline HTML explorer."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("export-html")
    def export_html(
        ctx: typer.Context,
        sentence: Optional[list[str]] = typer.Argument(None, help="The sentence (quoted or not). Default: 猫 吃 鱼."),
        model: str = typer.Option("walkthrough", "--model", help="walkthrough, minilm, or run:<folder> under --runs."),
        out: Path = typer.Option(Path("runs/explorer.html"), "--out", help="The HTML file to write."),
        runs: Path = typer.Option(Path("runs"), "--runs", help="Folder whose checkpoints run:<folder> names."),
    ) -> None:
        """Trace a sentence and write the explorer page with the trace inside: opens offline, no server."""
        from ..errors import GlassformerError
        from ..server.app import MAX_TOKENS
        from ..server.models import ModelRegistry
        from ..server.standalone import write_standalone

        from ._arguments import check_runs_folder, given

        if not model.startswith("run:") and given(ctx, "runs"):  # only a run:<folder> model is looked up there
            from ..errors import InputError
            raise InputError(f"--runs {runs} is where --model run:<folder> is found, and --model {model} is not one;"
                             " drop --runs, or give --model run:<folder>")
        check_runs_folder(runs)  # as `serve` reads it
        text = " ".join(sentence) if sentence else "猫 吃 鱼"
        try:
            registry = ModelRegistry(runs, max_tokens=MAX_TOKENS)
            try:
                registry.check(model)
            except KeyError as e:
                raise GlassformerError(str(e.args[0])) from None
            path = write_standalone(registry.trace(model, text), out)
        except GlassformerError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2)
        except OSError as e:
            typer.echo(f"error: cannot write {e.filename or out}: {e.strerror}", err=True)
            raise typer.Exit(2)
        typer.echo(f"HTML: {path} ({path.stat().st_size / 1e6:.2f} MB, opens offline)")
