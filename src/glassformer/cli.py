"""The `glassformer` command: a thin Typer shell over the library.

Each subcommand lives in its own module under `glassformer/commands/` and registers itself
with `register(app)`. A user's mistake (GlassformerError, a missing file) prints one line and
exits with status 2 — no traceback.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

try:  # recent Typer vendors its own click
    from typer._click.exceptions import UsageError
except ImportError:  # pragma: no cover - older Typer on real click
    from click.exceptions import UsageError

from .errors import GlassformerError

app = typer.Typer(
    name="glassformer",
    help="The Transformer of 'Attention Is All You Need', built to be read, traced and checked.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.callback()
def _root() -> None:
    """The Transformer of 'Attention Is All You Need', built to be read, traced and checked."""


def _register_commands() -> None:
    from . import commands
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


_register_commands()


def _check_every_argument() -> None:
    """Every command's arguments through one set of checks (commands/_arguments.py)."""
    from .commands._arguments import checked
    for info in app.registered_commands:
        info.callback = checked(info.callback)


_check_every_argument()


def fail(message: str, code: int = 2) -> None:
    """Print one line to stderr and exit: the way every user mistake ends."""
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except UsageError as e:  # unknown option, bad value, missing argument: one line
        where = e.ctx.command_path if e.ctx is not None else "glassformer"
        message = " ".join(e.format_message().split()) or "no command given; name one of the commands above"
        typer.echo(f"error: {message} (see `{where} --help`)", err=True)
        sys.exit(2)
    except typer.Abort:
        typer.echo("aborted", err=True)
        sys.exit(130)
    except GlassformerError as e:  # an interrupted training run says so, and exits 130 like Ctrl-C
        typer.echo(f"{getattr(e, 'label', 'error')}: {e}", err=True)
        sys.exit(getattr(e, "exit_code", 2))
    except OSError as e:  # a missing file, a folder where a file should be, a read-only or full disk
        where = f": {e.filename}" if e.filename else ""
        hint = "" if isinstance(e, FileNotFoundError) else " (give a path to a folder you can write to)"
        typer.echo(f"error: {e.strerror or e}{where}{hint}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted", err=True)
        sys.exit(130)
    if isinstance(code, int) and code:
        sys.exit(code)
