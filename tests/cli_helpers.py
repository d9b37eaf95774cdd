"""Running the CLI inside the test process."""

import io
import sys

from glassformer.cli import main


def run(monkeypatch, capsys, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """Run `glassformer ARGS` in this process (optionally with `stdin` text): (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["glassformer", *args])
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode("utf-8"))))
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out = capsys.readouterr()
    return code, out.out, out.err


def train_once(*args: str) -> None:
    """`glassformer train ARGS` in this process, for module- and session-scoped fixtures."""
    import pytest
    mp = pytest.MonkeyPatch()
    mp.setattr(sys, "argv", ["glassformer", "train", *args])
    try:
        main()
    except SystemExit as e:
        assert e.code in (0, None)
    finally:
        mp.undo()
