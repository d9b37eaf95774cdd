"""One set of checks for every argument of every command (issue 31: fix classes, not cases).

Typer converts each value to its declared type; what it does not check is whether the library
below can take it. Each command's callback is wrapped (`checked`) so that before it runs:

- every integer fits the 64-bit integers torch and NumPy compute with;
- a seed is one the generators take (NumPy's: 0 … 2³² − 1), whichever command reads it;
- a beam is 1 … 128 wide: each step scores beam × vocabulary candidates, and `translate --beam
  100000` ran for minutes with no word (the server's cap is 8; the library takes any width: a
  beam of V² over two steps is an exhaustive search, which the tests use);
- a thread count is one this machine can run (1 … its cores): 100,000 threads crashed the
  process and kept other processes from starting threads while it ran;
- every float is a finite number (NaN and infinities pass Typer's FLOAT);
- every text is valid UTF-8: Python hands bytes it cannot decode to the program as lone
  surrogates (PEP 383), which the tokenizers reject with a TypeError.

- a path can exist: one that runs through a regular file (`--out notes.txt/x`) is refused before
  any work, whichever command and whether it is read or written;
- an output *file* (`--json`, `--markdown`, `--html`, `--md`, `--report`, and `--out` where a command
  writes one file) that names an existing folder is refused: the atomic write's temporary file was
  otherwise what the error named.

A command registered later gets the same checks with nothing to add (a new output-file flag is one
name in OUTPUT_FILES). Whether a path exists or holds the right data is left to the readers (a
file name need not be UTF-8 on Linux).
"""

from __future__ import annotations

import functools
import inspect
import math
import os
from pathlib import PurePath
from typing import Any, Callable

import typer

from ..errors import InputError

INT64_MAX = 2 ** 63 - 1
SEED_MAX = 2 ** 32 - 1  # numpy.random.seed's limit; torch.manual_seed takes more
BEAM_MAX = 128  # beam search papers stop well below: past ~10 beams translation quality falls (Koehn & Knowles 2017)


# parameters that name one file the command writes: by name everywhere, and `out` in these commands
OUTPUT_FILES = {"json_path", "md", "md_path", "markdown", "html_path", "report"}
OUT_IS_A_FILE = {"ablate_heads", "case_study", "export_html", "lens", "patch"}


def _flag(name: str) -> str:
    """How the user typed it: --seed for an option; SENTENCE for a positional argument."""
    return name if name.isupper() else "--" + name.replace("_", "-")


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _bad_text(text: str) -> int | None:
    """Where a text holds what is not UTF-8 (a lone surrogate), or None."""
    for i, ch in enumerate(text):
        if 0xD800 <= ord(ch) <= 0xDFFF:
            return i
    return None


def check_value(name: str, value: Any, flag: str | None = None) -> None:
    """Refuse `value` of argument `name` (typed as `flag`) in one line when the library below cannot take it."""
    flag = flag or _flag(name)
    if isinstance(value, (list, tuple)):
        for v in value:
            check_value(name, v, flag)
        return
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, PurePath):
        _check_path(flag, value)
        return
    if isinstance(value, int):
        if name.lower() == "seed" and not 0 <= value <= SEED_MAX:
            raise InputError(f"{flag} {value} is out of range; a seed is an integer from 0 to {SEED_MAX}")
        if name.lower() in ("beam", "beam_size") and not 1 <= value <= BEAM_MAX:
            raise InputError(f"{flag} {value} is out of range; a beam is 1 (greedy) to {BEAM_MAX} wide")
        if name.lower() == "threads" and not 1 <= value <= _cores():
            raise InputError(f"{flag} {value} is out of range; this machine runs 1 to {_cores()} threads")
        if abs(value) > INT64_MAX:
            raise InputError(f"{flag} {value} is out of range; give an integer below 2**63")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"{flag} {value} is not a finite number; give a finite value (see --help for its range)")
    elif isinstance(value, str):
        at = _bad_text(value)
        if at is not None:
            shown = value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise InputError(f"the text given for {flag} is not valid UTF-8 (an undecodable byte at "
                             f"character {at + 1} of \"{shown}\"); give UTF-8 text")


def _check_path(flag: str, path: PurePath) -> None:
    from pathlib import Path
    for parent in Path(path).parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"{flag} {path}: {parent} is a file, not a folder; give a path in a folder")
            return


def check_runs_folder(runs) -> None:
    """--runs of the explorer commands (serve, export-html): a folder named on the command line must be one;
    the default `runs` may be absent (a fresh checkout has trained nothing)."""
    from pathlib import Path
    if runs.exists() and not runs.is_dir():
        raise InputError(f"--runs {runs} is a file; give the folder that holds run folders")
    if not runs.exists() and runs != Path("runs"):
        raise InputError(f"--runs {runs} does not exist; give the folder that holds run folders (e.g. runs)")


EXAMPLE_NAMES = {"json_path": "result.json", "md": "report.md", "md_path": "walkthrough.md",
                 "markdown": "report.md", "html_path": "walkthrough.html", "report": "head_roles.md",
                 "export_html": "explorer.html", "case_study": "case-study.md", "lens": "lens.png",
                 "patch": "patch.png", "ablate_heads": "heads.png"}


def check_output_file(name: str, path, command: str = "", flag: str | None = None) -> None:
    """An output file must not be an existing folder."""
    from pathlib import Path
    if path is not None and Path(path).is_dir():
        example = Path(path) / EXAMPLE_NAMES.get(name if name != "out" else command, "output")
        raise InputError(f"{flag or _flag(name)} {path} is a folder; give the path of the file to write (e.g. {example})")


def checked(callback: Callable) -> Callable:
    """`callback` with every argument checked first; its signature, as Typer reads it, unchanged."""
    shown = {}  # how the user typed each parameter: --json for json_path, SENTENCE for an argument
    for name, p in inspect.signature(callback).parameters.items():
        if isinstance(p.default, typer.models.ArgumentInfo):
            shown[name] = name.upper()
        else:
            decls = [d for d in (getattr(p.default, "param_decls", None) or ()) if d.startswith("--")]
            shown[name] = decls[0] if decls else _flag(name)

    @functools.wraps(callback)
    def run(*args, **kwargs):
        for name, value in kwargs.items():
            check_value(name, value, shown.get(name))
            if name in OUTPUT_FILES or (name == "out" and callback.__name__ in OUT_IS_A_FILE):
                check_output_file(name, value, callback.__name__, shown.get(name))
        return callback(*args, **kwargs)
    return run


def given(ctx, *names: str) -> list[str]:
    """Those of `names` (parameter names) the user typed on the command line, not left at their default.

    A default cannot be told from the same value typed, and a flag that has no effect in a combination
    is refused only when typed. The source's .name is compared: Typer vendors its own click, whose
    ParameterSource is another class than click's."""
    return [n for n in names if getattr(ctx.get_parameter_source(n), "name", None) == "COMMANDLINE"]


def flag_as_typed(ctx, name: str) -> str:
    """A parameter's flag as the user typed it: --no-tie for a False switch, else its first spelling."""
    p = next(p for p in ctx.command.params if p.name == name)
    return p.secondary_opts[0] if getattr(p, "secondary_opts", None) and ctx.params.get(name) is False else p.opts[0]


def typed(ctx, *names: str) -> str:
    """Parameters as the user typed them, with their values, for a message: "--top-k 5 --seed 1", "--no-plots"."""
    return " ".join(flag_as_typed(ctx, n) + ("" if isinstance(ctx.params[n], bool) else f" {ctx.params[n]}")
                    for n in names)
