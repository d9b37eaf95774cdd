"""`glassformer serve`: the explorer page and its JSON API on http://HOST:PORT (loopback by default)."""

from __future__ import annotations

from pathlib import Path

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def serve(
        host: str = typer.Option("127.0.0.1", help="Address to bind; the default keeps it on this machine."),
        port: int = typer.Option(8000, min=1, max=65535, help="TCP port."),
        runs: Path = typer.Option(Path("runs"), help="Folder whose checkpoints the page offers."),
    ) -> None:
        """Serve the explorer: type a sentence, pick a model, see every attention pattern."""
        import uvicorn

        from ..server.app import create_app

        if host not in ("127.0.0.1", "localhost", "::1"):
            typer.echo(f"warning: binding {host} exposes the explorer beyond this machine", err=True)
        typer.echo(f"glassformer explorer on http://{host}:{port}/ (API schema at /openapi.json)")
        uvicorn.run(create_app(runs), host=host, port=port, log_level="warning")
