"""A timed auto-recipe run decides dropout from its own first tenth (train/dropout_rule.py, issue 32 §4).

The clock is driven by hand, one second per optimiser step, so the passes the rule counts are known
exactly: 6 steps of 8 pairs in the first 6 s of a 60-s budget are 48 pairs, 480 a minute, and
480 pairs a minute for 1 minute over the training split's pairs."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from cli_helpers import run
from glassformer.config import ModelConfig
from glassformer.data.tasks import make_task
from glassformer.errors import ConfigError
from glassformer.nn import build_model
from glassformer.tokenize import build_tokenizer
from glassformer.train import TrainConfig, load_checkpoint, train
from glassformer.train.dropout_rule import set_dropout
from glassformer.train.tasks import TaskData, encode_split

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, norm_position="pre", dropout=0.0)


def copy_task(n: int = 400) -> TaskData:
    tok = build_tokenizer("word", [str(d) for d in range(10)] + ["+"])
    raw = {"train": make_task("copy", n, seed=0, max_len=5), "valid": make_task("copy", 50, seed=1, max_len=5),
           "test": make_task("copy", 50, seed=2, max_len=5)}
    data = TaskData("copy", "seq2seq", raw, tok, tok)
    for split, items in raw.items():
        data.encoded[split] = encode_split("seq2seq", items, tok, tok, 0)
    return data


def _records(run_dir, split):
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if r.get("split") == split]


@pytest.fixture
def hand_clock(monkeypatch):
    from glassformer.train import loop
    now = [1000.0]
    monkeypatch.setattr(loop, "clock", lambda: now[0])

    def tick(step, model, loss):
        now[0] += 1.0
    return now, tick


def _timed(tmp_path, passes_needed, max_steps, **extra):
    return TrainConfig(task="copy", out=str(tmp_path / "run"), eval_every=1000, batch_size=8, quiet=True,
                       eval_size=8, max_minutes=1.0, schedule="wsd", max_steps=max_steps,
                       dropout_auto=0.1, dropout_passes=passes_needed, **extra)


@pytest.mark.parametrize("more", [True, False])
def test_the_run_turns_dropout_on_only_if_its_own_rate_gives_enough_passes(tmp_path, hand_clock, more):
    now, tick = hand_clock
    data = copy_task()
    n = len(data.encoded["train"])
    passes = 480 / n  # 48 pairs in the first 6 s: 480 a minute, for the 1-minute budget
    train(_timed(tmp_path, passes / 2 if more else passes * 2, 10), data=data, model_overrides=TINY,
          callbacks=[tick])
    [d] = _records(tmp_path / "run", "dropout")
    assert d["step"] == 6 and d["seconds"] == pytest.approx(6.0)  # decided after the first tenth of 60 s
    assert d["examples_per_minute"] == pytest.approx(480) and d["passes"] == pytest.approx(passes)
    assert d["dropout"] == (0.1 if more else 0.0)
    saved = load_checkpoint(tmp_path / "run" / "checkpoint")  # the model the user holds says what it trained with
    assert saved.config.dropout == d["dropout"]


@pytest.mark.parametrize(("strong_at", "expected"), [(0.5, 0.2), (2.0, 0.1)])
def test_a_second_tier_gives_the_stronger_dropout_only_from_its_own_passes(tmp_path, hand_clock, strong_at,
                                                                          expected):
    """An LM on a small text: 0.1 from dropout_passes, 0.2 from dropout_strong_passes (recipe.py)."""
    now, tick = hand_clock
    data = copy_task()
    passes = 480 / len(data.encoded["train"])  # as above: the rate its first 6 s count
    train(_timed(tmp_path, passes / 4, 10, dropout_strong=0.2, dropout_strong_passes=passes * strong_at),
          data=data, model_overrides=TINY, callbacks=[tick])
    [d] = _records(tmp_path / "run", "dropout")
    assert d["passes"] == pytest.approx(passes) and d["dropout"] == expected
    assert load_checkpoint(tmp_path / "run" / "checkpoint").config.dropout == expected


def test_a_resumed_run_keeps_the_decision_it_made(tmp_path, hand_clock):
    now, tick = hand_clock
    data = copy_task()
    n = len(data.encoded["train"])
    cfg = _timed(tmp_path, 240 / n, 8)  # 4.8 passes at 480 a minute: dropout
    train(cfg, data=data, model_overrides=TINY, callbacks=[tick])
    now[0] += 3600.0
    train(dataclasses.replace(cfg, max_steps=20), data=data, resume=True, callbacks=[tick])
    assert [d["dropout"] for d in _records(tmp_path / "run", "dropout")] == [0.1]  # decided once
    assert load_checkpoint(tmp_path / "run" / "checkpoint").config.dropout == 0.1


def test_a_run_resumed_before_its_decision_measures_its_own_first_tenth(tmp_path, hand_clock):
    now, tick = hand_clock
    data = copy_task()
    cfg = _timed(tmp_path, 1e6, 3)  # stopped at 3 s, before the 6-s decision
    train(cfg, data=data, model_overrides=TINY, callbacks=[tick])
    assert _records(tmp_path / "run", "dropout") == []
    train(dataclasses.replace(cfg, max_steps=20), data=data, resume=True, callbacks=[tick])
    [d] = _records(tmp_path / "run", "dropout")
    assert d["step"] == 9 and d["seconds"] == pytest.approx(6.0) and d["dropout"] == 0.0


def test_a_busy_first_tenth_is_counted_again_and_the_dropout_raised(tmp_path, monkeypatch):
    """The first 6 s run at 2 s a step (a busy machine: 240 pairs a minute), then 0.5 s a step (960):
    the first count says none, the count at 12 s (a fifth of the budget) raises it to 0.1."""
    from glassformer.train import loop
    now = [1000.0]
    monkeypatch.setattr(loop, "clock", lambda: now[0])

    def tick(step, model, loss):
        now[0] += 2.0 if step <= 3 else 0.5

    data = copy_task()
    n = len(data.encoded["train"])
    train(_timed(tmp_path, 480 / n, 20), data=data, model_overrides=TINY, callbacks=[tick])
    first, again = _records(tmp_path / "run", "dropout")
    assert (first["step"], first["dropout"], first["examples_per_minute"]) == (3, 0.0, pytest.approx(240))
    # 12 steps of 8 pairs in the 6 s since: 960 a minute, 960 / n passes in the minute
    assert (again["step"], again["dropout"], again["recount"]) == (15, 0.1, True)
    assert again["examples_per_minute"] == pytest.approx(960) and again["passes"] == pytest.approx(960 / n)
    assert load_checkpoint(tmp_path / "run" / "checkpoint").config.dropout == 0.1


def test_a_count_again_only_raises_and_stops_at_half_the_budget():
    from glassformer.train.dropout_rule import DropoutDecision
    # an LM's two tiers: 0.1 from 10 passes, 0.2 from 20; 1,000 windows, a 100-s budget
    rule = DropoutDecision(0.1, 10, 100.0, 100.0, 1_000, strong=(20, 0.2))
    assert not rule.due(9.0, 500, 9.0) and rule.due(10.0, 1_200, 10.0)
    assert rule.decide(1_200, 10.0)["dropout"] == 0.1  # 120 a second: 12 passes in 100 s
    assert not rule.due(15.0, 1_800, 15.0) and rule.due(20.0, 1_900, 20.0)
    assert rule.decide(1_900, 20.0) is None and rule.decided["dropout"] == 0.1  # 70 a second: never lowered
    assert rule.decide(4_400, 30.0)["dropout"] == 0.2  # 250 a second: 25 passes
    assert not rule.due(40.0, 9_000, 40.0)  # at the top tier: nothing more to count
    late = DropoutDecision(0.1, 10, 100.0, 100.0, 1_000)
    late.decide(100, 10.0)  # 1 pass: none
    for t in (20.0, 30.0, 40.0, 50.0):
        assert late.due(t, 200, t) and late.decide(int(20 * t), t) is None  # 20 a second: 2 passes
    assert not late.due(60.0, 10_000, 60.0)  # past half the budget: no more counts
    skipped = DropoutDecision(0.1, 10, 100.0, 100.0, 1_000)
    skipped.decide(100, 10.0)
    assert skipped.decide(200, 35.0, 35.0) is None and skipped.checks == [40.0, 50.0]  # 0.2 and 0.3 passed at once


def test_set_dropout_trains_as_a_model_built_with_that_dropout():
    """The reference: a model built with the dropout in its config, the same weights, the same seed."""
    cfg = ModelConfig(arch="encoder-decoder", vocab_size=30, d_model=16, n_heads=2, n_layers=2, d_ff=32)
    src, tgt = torch.randint(4, 30, (3, 7)), torch.randint(4, 30, (3, 6))
    for attn in (None, 0.05):  # attention's own rate follows the dropout unless the user set one
        cfg0 = dataclasses.replace(cfg, dropout=0.0, attn_dropout=attn)
        torch.manual_seed(0)
        model = build_model(cfg0).train()
        new = set_dropout(model, cfg0, 0.1)
        assert new.dropout == 0.1 and new.attn_dropout == attn
        twin = build_model(dataclasses.replace(cfg0, dropout=0.1)).train()
        twin.load_state_dict(model.state_dict())
        torch.manual_seed(7)
        ours = model(src, tgt)
        torch.manual_seed(7)
        ref = twin(src, tgt)
        torch.testing.assert_close(ours, ref, rtol=0, atol=0)
        assert not torch.allclose(ours, model.eval()(src, tgt))  # it does drop in training


def test_dropout_auto_without_a_time_budget_or_out_of_range_is_refused():
    with pytest.raises(ConfigError, match="give max_minutes"):
        TrainConfig(dropout_auto=0.1, dropout_passes=20)
    with pytest.raises(ConfigError, match=r"dropout_auto=1\.5 must be a dropout rate in \(0, 1\)"):
        TrainConfig(dropout_auto=1.5, dropout_passes=20, max_minutes=1)
    with pytest.raises(ConfigError, match="dropout_passes=None must be a number of passes > 0"):
        TrainConfig(dropout_auto=0.1, max_minutes=1)
    with pytest.raises(ConfigError, match="dropout_strong is a second tier of dropout_auto"):
        TrainConfig(dropout_auto=0.1, dropout_passes=20, dropout_strong=0.2, dropout_strong_passes=10, max_minutes=1)
    with pytest.raises(ConfigError, match="dropout_strong_passes=None must be a number of passes > 0"):
        TrainConfig(dropout_auto=0.1, dropout_passes=20, dropout_strong=0.2, max_minutes=1)


def test_the_cli_run_says_what_it_decided_and_keeps_it(tmp_path, monkeypatch, capsys):
    """`train --task tsv` with the auto recipe and a time budget: the block says the run decides; the run's
    log and its checkpoint hold the decision (a fake probe: the machine's speed is not the point here)."""
    from glassformer.train import recipe
    monkeypatch.setattr(recipe, "measure_tokens_per_minute", lambda *a, **k: 1e9)
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{i} {i + 1}\t{i + 1} {i}\n" for i in range(200)), encoding="utf-8")
    out = tmp_path / "run"
    code, printed, err = run(monkeypatch, capsys, "train", "--task", "tsv", "--data", str(data), "--out", str(out),
                             "--max-minutes", "0.05", "--threads", "1", "--tokenizer", "word", "--eval-size", "4")
    assert code == 0, err
    assert "dropout decided by the run from its own speed: none for its first tenth (0.005 min)" in printed
    [d] = _records(out, "dropout")
    assert "dropout rule:" in printed and f"about {d['passes']:.1f} passes" in printed
    assert load_checkpoint(out / "checkpoint").config.dropout == d["dropout"]
