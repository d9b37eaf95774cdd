"""Every command's default output paths stay out of the committed docs/ (issue 31 §7): run in a
clone, a command given no --out must never rewrite the published pages. Read from the CLI's own
option list, so a new command is checked without being named here."""

from __future__ import annotations

from pathlib import PurePath

import typer.main

from glassformer.cli import app


def _path_defaults():
    group = typer.main.get_command(app)
    for name, command in group.commands.items():
        for param in command.params:
            default = param.default
            if isinstance(default, (str, PurePath)) and ("/" in str(default) or isinstance(default, PurePath)):
                yield name, param.name, PurePath(default)


def test_no_default_path_writes_into_docs():
    found = list(_path_defaults())
    assert any(cmd == "case-study" for cmd, _, _ in found)  # the listing sees the commands' paths
    into_docs = [(cmd, p, str(d)) for cmd, p, d in found if d.parts and d.parts[0] == "docs"]
    assert into_docs == []
