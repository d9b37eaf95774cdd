"""Every integer, float and text argument of every command is checked the same way (issue 31 §1).

The cases are generated from the CLI's own option list, not from today's flags: for each command
and each of its numeric or text parameters, the command line gets that parameter's bad values (an
integer beyond 64 bits; a seed outside NumPy's 0 … 2³² − 1; more threads than cores; a beam of 0 or
past 128; NaN and infinities; text holding a byte that is not UTF-8, as Python passes one on: a lone
surrogate; a path through a regular file; a folder where one output file is written) and
valid dummies for whatever else is required. Each must end with exit status 2 and one line that
names the argument — no traceback, and nothing run. A new command is covered with nothing added.
"""

from __future__ import annotations

import sys
import typing
from pathlib import Path

import pytest
import typer.main

from glassformer.cli import app, main
from glassformer.commands._arguments import BEAM_MAX, OUT_IS_A_FILE, OUTPUT_FILES, _cores

GROUP = typer.main.get_command(app)
DUMMY = {"integer": "1", "float": "1.0", "text": "x", "path": "x"}


def _kind(param) -> str:
    """integer, float, text, path or other, from the parameter's annotation (Optional and List unwrapped)."""
    a = param.type_descriptor.annotation
    while (inner := [x for x in typing.get_args(a) if x is not type(None)]):
        a = inner[0]
    return {int: "integer", float: "float", str: "text"}.get(a, "path" if a is Path else "other")


def _bad_values(param, command: str = "") -> list[str]:
    kind = _kind(param)
    if kind == "path":  # the test runs in a folder holding a file `afile` and a folder `adir`
        bad = ["afile/x"]  # through a regular file: cannot exist, read or written
        callback = GROUP.commands[command].callback.__name__ if command else ""
        if param.name in OUTPUT_FILES or (param.name == "out" and callback in OUT_IS_A_FILE):
            bad.append("adir")  # an output file that is a folder
        return bad
    if kind == "integer":
        bad = [str(2 ** 70), str(-2 ** 70)]
        if param.name == "seed":
            bad += ["-1", str(2 ** 32)]
        if param.name == "threads":
            bad += ["0", str(_cores() + 1)]
        if param.name in ("beam", "beam_size"):
            bad += ["0", str(BEAM_MAX + 1), "100000"]
        return bad
    if kind == "float":
        return ["nan", "inf", "-inf"]
    if kind == "text":
        return ["cat\udcffdog"]  # what Python makes of the bytes b"cat\xffdog" in argv
    return []


def _dummy(param) -> str:
    return DUMMY.get(_kind(param), "x")


def _command_line(command: str, target, bad: str) -> list[str]:
    cmd = GROUP.commands[command]
    options, positional = [], []
    for p in cmd.params:
        if p.param_type_name == "argument":
            if p is target:
                positional.append(bad)
            elif p.required:
                positional.append(_dummy(p))
        elif p is target:
            options += [p.opts[0], bad]
        elif p.required:
            options += [p.opts[0], _dummy(p)]
    return [command, *options, "--", *positional] if positional else [command, *options]


CASES = [(name, p.name, bad) for name, cmd in sorted(GROUP.commands.items()) for p in cmd.params
         for bad in _bad_values(p, name)]


def test_the_cases_cover_every_command_with_numbers_or_text():
    covered = {c for c, _, _ in CASES}
    assert {"train", "generate", "translate", "walkthrough", "inspect", "lens", "serve", "eval"} <= covered
    assert len(CASES) > 100
    assert {(c, b) for c, n, b in CASES if b == "adir"} >= {("export-html", "adir"), ("walkthrough", "adir"),
                                                           ("lens", "adir"), ("bench", "adir")}


@pytest.mark.parametrize("command, name, bad", CASES, ids=[f"{c}-{n}-{b!a}" for c, n, b in CASES])
def test_every_bad_argument_is_one_line_and_exit_2(command, name, bad, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)  # nothing a command might write lands in the checkout
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    target = next(p for p in GROUP.commands[command].params if p.name == name)
    monkeypatch.setattr(sys, "argv", ["glassformer", *_command_line(command, target, bad)])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2, err
    assert len(err) == 1 and err[0].startswith("error:"), err
    shown = target.opts[0] if target.param_type_name == "option" else name.upper()
    assert shown in err[0] or name.replace("_", "-") in err[0].lower(), err[0]


# folders a command reads by name (every option called --runs): one named on the command line that is not
# there is a typo, and stops with one line instead of being read as empty (export-html drew the page of its
# default model and said nothing until 2026-12-06)
READ_FOLDERS = [(name, p.name) for name, cmd in sorted(GROUP.commands.items()) for p in cmd.params
                if p.name == "runs" and _kind(p) == "path"]


def test_the_read_folders_are_found_from_the_cli():
    assert {c for c, _ in READ_FOLDERS} >= {"ablate", "export-html", "serve"}


@pytest.mark.parametrize("command, name", READ_FOLDERS)
def test_a_folder_to_read_that_is_not_there_is_one_line_and_exit_2(command, name, monkeypatch, capsys, tmp_path):
    monkeypatch.chdir(tmp_path)
    target = next(p for p in GROUP.commands[command].params if p.name == name)
    line = _command_line(command, target, "no_such_folder")
    if command == "ablate":  # a row that exists, so that only the folder is wrong
        line[-1] = "pe-order"
    monkeypatch.setattr(sys, "argv", ["glassformer", *line])
    with pytest.raises(SystemExit) as e:
        main()
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2, err
    assert len(err) == 1 and err[0].startswith("error:") and "--runs no_such_folder" in err[0], err
    assert not list(tmp_path.iterdir()), "nothing is written"
