"""The CLI shell: a user's mistake ends in one line on stderr and exit status 2, never a traceback."""

import json
import sys

import pytest

from glassformer import cli


def run_cli(monkeypatch, capsys, *argv):
    monkeypatch.setattr(sys, "argv", ["glassformer", *argv])
    with pytest.raises(SystemExit) as e:
        cli.main()
    out = capsys.readouterr()
    return e.value.code, out.out, out.err


@pytest.mark.parametrize("argv,needle", [
    (["train", "--no-such-flag"], "No such option: --no-such-flag"),
    (["translate", "--beam", "x", "--ckpt", ".", "猫"], "Invalid value for '--beam'"),
    (["no-such-command"], "No such command 'no-such-command'"),
    (["translate"], "Missing option '--ckpt'"),
])
def test_usage_errors_are_one_line(monkeypatch, capsys, argv, needle):
    code, _, err = run_cli(monkeypatch, capsys, *argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ") and needle in err
    assert "Traceback" not in err


def test_library_errors_are_one_line(monkeypatch, capsys, tmp_path):
    code, _, err = run_cli(monkeypatch, capsys, "translate", "--ckpt", str(tmp_path / "missing"), "猫 吃 鱼")
    assert code == 2 and err.count("\n") == 1 and "does not exist" in err


def test_walkthrough_takes_an_unquoted_sentence(monkeypatch, capsys, tmp_path):
    """`glassformer walkthrough 猫 吃 鱼` (three arguments) is the sentence 猫 吃 鱼."""
    monkeypatch.setattr(sys, "argv", ["glassformer", "walkthrough", "猫", "吃", "鱼", "--no-plots", "--quiet",
                                      "--json", str(tmp_path / "w.json")])
    cli.main()  # success returns normally
    assert json.loads((tmp_path / "w.json").read_text())["tokens"] == ["猫", "吃", "鱼"]
