"""Every flag `train` accepts is read by the run it starts, or the run is refused in one line saying
what would be right (the class of --resume's silently ignored flags: a flag that does nothing must
not look as if it had taken effect). Each case was a silent no-op before."""

from __future__ import annotations

import json

import pytest

from glassformer.config import ModelConfig
from glassformer.errors import ConfigError
from glassformer.train import TrainConfig

from cli_helpers import run

TINY = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--threads", "1", "--quiet",
        "--max-steps", "10", "--eval-every", "10", "--eval-size", "20"]


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    path = tmp_path_factory.mktemp("lm") / "lines.txt"
    path.write_text("".join(f"the cat sat on mat number {i} and ate a fish\n" for i in range(200)), encoding="utf-8")
    return str(path)


LM = ["--task", "lm", "--data", "{text}", "--recipe", "paper", "--block-size", "16"]
CASES = [
    (["--task", "reverse", "--lr", "0.5"], "--lr 0.5 is not read by the noam schedule"),
    (["--task", "reverse", "--schedule", "constant", "--noam-factor", "5"],
     "--noam-factor 5.0 scales only the noam schedule; this run's is constant"),
    (["--task", "reverse", "--schedule", "constant", "--warmup", "3"], "--warmup 3 is not read by --schedule constant"),
    (["--task", "reverse", "--schedule", "cosine", "--warmup", "400"], "--warmup 400 is longer than the run"),
    (["--task", "reverse", "--block-size", "7"], "--block-size 7 sets a language model's window"),
    (["--task", "reverse", "--recipe", "auto"], "--recipe auto chooses its settings from a data file"),
    (["--task", "reverse", "--max-len", "4"], "--max-len 4 sizes a learned position table"),
    (["--task", "reverse", "--norm", "none", "--norm-eps", "0.5"], "--norm-eps 0.5 has nothing to act on"),
    (["--task", "reverse", "--norm", "none", "--final-norm"], "--final-norm has nothing to act on"),
    (["--task", "reverse", "--tokenizer", "word/char"], "task 'reverse' has one tokenizer for both sides"),
    ([*LM, "--no-share"], "--no-share chooses whether an encoder-decoder's source and target share"),
    ([*LM, "--tokenizer", "char/word"], "task 'lm' has one tokenizer for both sides"),
    ([*LM, "--dec-layers", "3"], "n_dec_layers=3 (--dec-layers) sets an encoder-decoder's decoder"),
]


@pytest.mark.parametrize("args,said", CASES, ids=[" ".join(a[-2:]) for a, _ in CASES])
def test_a_flag_the_run_would_not_read_is_refused_in_one_line(args, said, text, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    args = [a.replace("{text}", text) for a in args]
    code, _, err = run(monkeypatch, capsys, "train", *args, "--out", str(out), *TINY)
    assert code == 2 and err.count("\n") == 1, err
    assert said in err
    assert not (out / "checkpoint").exists()  # refused before anything trained


NEIGHBOURS = [  # the same flags where the run reads them: they train, and the value lands in the run
    (["--task", "reverse", "--schedule", "constant", "--lr", "0.004"], "train_config", "lr", 0.004),
    (["--task", "reverse", "--noam-factor", "3"], "train_config", "noam_factor", 3.0),
    (["--task", "reverse", "--pe", "learned", "--max-len", "40"], "config", "max_len", 40),
    (["--task", "reverse", "--tokenizer", "word/word"], "train_config", "tokenizer", "word/word"),
]


@pytest.mark.parametrize("args,where,key,value", NEIGHBOURS, ids=[a[-2] for a, *_ in NEIGHBOURS])
def test_the_same_flags_train_where_they_are_read(args, where, key, value, tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    code, _, err = run(monkeypatch, capsys, "train", *args, "--out", str(out), *TINY)
    assert code == 0, err
    if where == "config":
        got = json.loads((out / "checkpoint" / "config.json").read_text())[key]
    else:
        got = json.loads((out / "checkpoint" / "meta.json").read_text())["train_config"][key]
    assert got == value


def test_the_library_refuses_what_no_flag_check_sees():
    """ModelConfig and TrainConfig refuse the combinations that need no knowledge of what was typed."""
    with pytest.raises(ConfigError, match="n_dec_layers=3"):
        ModelConfig(arch="decoder", vocab_size=10, d_model=8, n_heads=2, n_layers=2, d_ff=16, n_dec_layers=3)
    ModelConfig(arch="decoder", vocab_size=10, d_model=8, n_heads=2, n_layers=2, d_ff=16, n_dec_layers=2)  # same
    with pytest.raises(ConfigError, match="one tokenizer for both sides"):
        TrainConfig(task="lm", data="x.txt", out="o", tokenizer="char/bpe")
    TrainConfig(task="tsv", data="x.tsv", out="o", tokenizer="char/bpe")  # a translator has two
