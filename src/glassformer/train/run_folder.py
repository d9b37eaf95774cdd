"""A run folder is a user's work: never replaced silently, resumed only by the same run.

- `guard_new_run`: training into a folder that already holds a run (a `checkpoint/`, a `best/`
  or `metrics.jsonl`) stops with one line unless `--resume` (continue it) or `--force` (replace
  it) is given. We chose refusing over a new numbered folder: the command then does what it
  says, and `--out` is where the result is.
- `check_same_run`: `--resume` with another `--task` or another `--data` (another path, or the
  same path with different contents, by SHA-256) stops with one line instead of continuing the
  old run on new data.
- `GracefulInterrupt`: the first Ctrl-C (SIGINT), or a SIGTERM from a job scheduler, only raises
  a flag that the loop reads between optimiser steps, so the checkpoint it then writes is never
  of a half-applied step; a second signal interrupts at once.
"""

from __future__ import annotations

import hashlib
import shlex
import shutil
import signal
import threading
from pathlib import Path

from ..errors import GlassformerError, InputError

RUN_ITEMS = ("checkpoint", "best", "averaged", "metrics.jsonl", "loss.png", ".checkpoint.old", ".best.old",
             ".averaged.old")  # what a run writes: --force removes all of it, so no old file passes for the new run's


class TrainingInterrupted(GlassformerError):
    """Ctrl-C during training: the state was saved; the message is the command that resumes."""

    label = "interrupted"

    def __init__(self, message: str, signum: int = signal.SIGINT):
        super().__init__(message)
        self.exit_code = 128 + int(signum)  # the shell's code for death by that signal: 130, 143


def guard_new_run(run_dir: Path, force: bool) -> list[str]:
    """Refuse to start over an existing run unless `force`; return what `clear` must remove."""
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError(f"--out {run_dir} is a file; give a folder for the run (it is created if missing)")
    found = [name for name in RUN_ITEMS if (run_dir / name).exists()]
    if found and not force:
        raise InputError(f"{run_dir} already holds a training run ({', '.join(found)}); add --resume to continue "
                         "it, --force to replace it, or choose another --out")
    return found


def clear(run_dir: Path, found: list[str]) -> None:
    """--force: the old run goes before the new one writes, so the two never mix."""
    for name in found:
        p = run_dir / name
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def saved_train_config(run_dir: str | Path) -> dict:
    """The training config a run folder's checkpoint was written with ({} when there is none).

    Read from meta.json (plain JSON), so that `--resume` needs no --task or --data of its own.
    """
    import json
    try:
        meta = json.loads((Path(run_dir) / "checkpoint" / "meta.json").read_text(encoding="utf-8"))
        return dict(meta.get("train_config") or {})
    except (OSError, ValueError, AttributeError, TypeError):
        return {}  # the resume itself reports what is wrong with the folder


def data_fingerprint(path: str | None) -> str | None:
    """SHA-256 of a data file's bytes (None for the built-in tasks, or a file the reader will report)."""
    if path is None or not Path(path).is_file():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_same_run(run_dir: Path, given, was: dict, fingerprint: str | None) -> None:
    """`given` (this command's TrainConfig) must name the run's own task and data."""
    if given.task != was.get("task"):
        raise InputError(f"{run_dir} is a --task {was.get('task')} run; --resume continues it only with "
                         f"--task {was.get('task')} (use another --out for a new {given.task} run)")
    stored = was.get("data")
    # a relative stored path (runs made before paths were stored absolute) names a file relative to a
    # folder not recorded: it cannot be compared, and the SHA-256 below decides alone
    comparable = stored is not None and (Path(stored).is_absolute() or Path(stored).exists())
    if given.data is not None and comparable and Path(given.data).resolve() != Path(stored).resolve():
        raise InputError(f"{run_dir} was trained on --data {was['data']}, not {given.data}; resume it with its own "
                         "data or start a new run with another --out")
    data = given.data or was.get("data")
    if fingerprint is not None and data is not None and Path(data).is_file() and data_fingerprint(data) != fingerprint:
        raise InputError(f"{data} has changed since {run_dir} was trained on it (its SHA-256 differs); restore the "
                         "file or start a new run with another --out")


def resume_command(cfg) -> str:
    parts = ["glassformer", "train", "--task", cfg.task]
    if cfg.data is not None:
        parts += ["--data", str(cfg.data)]
    parts += ["--out", str(cfg.out), "--resume"]
    return " ".join(shlex.quote(p) for p in parts)


class GracefulInterrupt:
    """`with GracefulInterrupt() as stop:` ... `if stop.requested:` — the first SIGINT/SIGTERM sets a flag."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.requested, self.signum = False, None
        self._previous: dict = {}

    def _handle(self, signum, frame) -> None:
        self.requested, self.signum = True, signum
        for s, handler in self._previous.items():  # a second signal: the usual behaviour, at once
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)

    def __enter__(self) -> "GracefulInterrupt":
        if threading.current_thread() is threading.main_thread():  # signals reach the main thread only
            self._previous = {s: signal.signal(s, self._handle) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
