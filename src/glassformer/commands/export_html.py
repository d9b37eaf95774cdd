"""`glassformer export-html SENTENCE... --out FILE`: one trace as a standalone, offline HTML explorer."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("export-html")
    def export_html(
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

        text = " ".join(sentence) if sentence else "猫 吃 鱼"
        try:
            # as `serve` reads --runs: a folder named on the command line must be one (the default may be absent)
            if runs.exists() and not runs.is_dir():
                raise GlassformerError(f"--runs {runs} is a file; give the folder that holds run folders")
            if not runs.exists() and runs != Path("runs"):
                raise GlassformerError(f"--runs {runs} does not exist; give the folder that holds run folders "
                                       "(e.g. runs)")
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
