"""The per-arm learning-rate sweep of the claims report (issue 28 §2): ≥ 4 rates over ≥ 2 seeds,
chosen on validation loss held out from training and from the rows' test batches."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from glassformer.experiments import base
from glassformer.experiments.runner import TrainSpec
from glassformer.experiments.synthetic import TaggingTask


def test_the_grid_is_four_rates_from_3e_4_to_1e_2_over_two_seeds_off_the_evaluation_seeds():
    assert len(base.LR_GRID) >= 4 and min(base.LR_GRID) == 3e-4 and max(base.LR_GRID) == 1e-2
    assert len(base.SWEEP_SEEDS) >= 2 and not set(base.SWEEP_SEEDS) & set(range(100))


def test_the_choice_is_the_lowest_mean_validation_loss_and_a_diverged_seed_loses():
    losses = {"0.0003": [2.0, 2.2], "0.001": [1.5, 1.7], "0.003": [1.2, base.DIVERGED], "0.01": [1.9, 1.9]}
    # 0.003 has the lowest single value but one seed diverged: it loses to every rate where none did
    assert base.choose_lr(losses) == "0.001"
    losses["0.003"] = [1.2, 1.6]  # mean 1.4 < 1.6
    assert base.choose_lr(losses) == "0.003"
    assert base.choose_lr({"0.001": [1.0, 2.0], "0.003": [2.0, 1.0]}) == "0.001"  # a tie: the lower rate
    assert base.choose_lr({"0.001": [math.inf, 1.0], "0.003": [5.0, 5.0]}) == "0.003"


def test_best_lr_runs_every_rate_on_every_sweep_seed_and_scores_held_out_batches(tmp_path, monkeypatch):
    task = TaggingTask("lag", n_symbols=8, min_len=8, max_len=12, a=1)
    spec = TrainSpec(steps=5, batch_size=4, lr=1e-3, warmup=1)
    calls = []
    want = task.batches(base.SWEEP_VALID_BATCHES, 4, seed=base.SWEEP_VALID_SEED)
    # a made-up loss surface: 3e-3 best on average; 1e-2 diverges on the second seed
    surface = {3e-4: 2.0, 1e-3: 1.5, 3e-3: 1.1, 1e-2: 0.9}

    def fake_run(cfg, task_, spec_, seed, evals=None, model=None, first_layer=None):
        calls.append((spec_.lr, seed))
        assert set(evals) == {"valid"} and len(evals["valid"]) == len(want)
        for (ids, targets), (ids_w, targets_w) in zip(evals["valid"], want):
            assert torch.equal(ids, ids_w) and torch.equal(targets, targets_w)
        diverged = spec_.lr == 1e-2 and seed == base.SWEEP_SEEDS[1]
        loss = math.inf if diverged else surface[spec_.lr] + 0.01 * seed
        return SimpleNamespace(metrics={"valid": {"loss": loss}}, result=SimpleNamespace(diverged=diverged))

    monkeypatch.setattr(base, "run_tagging", fake_run)
    ctx = base.Context(quick=False, seeds=[0], out_dir=tmp_path, log=lambda s: None, memo_dir=tmp_path)
    assert base.best_lr(ctx, "arm", None, task, spec) == 3e-3
    assert sorted(calls) == sorted((lr, s) for lr in base.LR_GRID for s in base.SWEEP_SEEDS)
    kept = json.loads((tmp_path / "full.lr-sweep-valid.arm.json").read_text())
    assert kept["0.01"][1] == base.DIVERGED and kept["0.003"] == pytest.approx([1.1 + 10.0, 1.1 + 10.01])
    calls.clear()
    assert base.best_lr(ctx, "arm", None, task, spec) == 3e-3 and calls == []  # resumed from the memo


def test_an_interrupted_sweep_resumes_at_its_next_run(tmp_path, monkeypatch):
    """A row's sweep is 8+ runs of minutes each: the runs finished before an interruption are not
    run again (the whole sweep used to be kept only once all of it had finished)."""
    task = TaggingTask("lag", n_symbols=8, min_len=8, max_len=12, a=1)
    spec = TrainSpec(steps=5, batch_size=4, lr=1e-3, warmup=1)
    surface = {3e-4: 2.0, 1e-3: 1.5, 3e-3: 1.1, 1e-2: 1.3}
    calls, stop_after = [], [3]

    def fake_run(cfg, task_, spec_, seed, evals=None, model=None, first_layer=None):
        if len(calls) == stop_after[0]:
            raise RuntimeError("interrupted")  # as a Ctrl-C or a kill would, mid-sweep
        calls.append((spec_.lr, seed))
        return SimpleNamespace(metrics={"valid": {"loss": surface[spec_.lr]}}, result=SimpleNamespace(diverged=False))

    monkeypatch.setattr(base, "run_tagging", fake_run)
    ctx = base.Context(quick=False, seeds=[0], out_dir=tmp_path, log=lambda s: None, memo_dir=tmp_path)
    with pytest.raises(RuntimeError, match="interrupted"):
        base.best_lr(ctx, "arm", None, task, spec)
    done, stop_after[0] = list(calls), -1
    calls.clear()
    assert len(done) == 3 and base.best_lr(ctx, "arm", None, task, spec) == 3e-3
    everything = {(lr, s) for lr in base.LR_GRID for s in base.SWEEP_SEEDS}
    assert sorted(calls) == sorted(everything - set(done))  # only the runs that had not finished


def test_quick_keeps_the_spec_rate(tmp_path):
    ctx = base.Context(quick=True, seeds=[0], out_dir=tmp_path)
    assert base.best_lr(ctx, "arm", None, None, TrainSpec(steps=1, batch_size=2, lr=7e-4)) == 7e-4


def test_a_memorisation_task_is_validated_on_its_table():
    from glassformer.experiments.ffn_capacity import FactsTask

    task = FactsTask(40, seed=base.SWEEP_SEED)
    batches = base.validation_batches(task, 16)
    ids, targets = task.table()
    assert [len(b[0]) for b in batches] == [16, 16, 8]
    assert torch.equal(torch.cat([b[0] for b in batches]), ids) and torch.equal(torch.cat([b[1] for b in batches]), targets)


def test_a_text_task_chooses_its_rate_on_text_it_neither_trains_on_nor_is_tested_on():
    from glassformer.experiments.text_task import TUNE, CharTextTask, _streams

    task = CharTextTask(seq_len=16)
    train, valid = _streams(task.corpus)[1], _streams(task.corpus)[2]
    cut = int(train.numel() * (1 - TUNE))
    tune_text = train[cut:].tolist()

    def inside(window, stream) -> bool:  # the window is a run of consecutive ids of `stream`
        w, s = window.tolist(), stream
        return any(s[i:i + len(w)] == w for i in range(len(s) - len(w) + 1))
    (ids, targets), = base.validation_batches(task, 2)[:1]
    for row, nxt in zip(ids, targets):
        assert inside(torch.cat([row, nxt[-1:]]), tune_text)
    # training windows start before the cut: none reaches into the tuning tail
    ids, _ = task.sampler(64, seed=0)(0)
    assert ids.shape == (64, 16)
    fit = train[:cut].tolist()
    assert all(inside(r, fit) for r in ids[:3])
    assert valid.numel() > 0 and task.batches(1, 2, seed=1)[0][0].shape == (2, 16)


@pytest.mark.parametrize("surface, tried, best", [
    # falling to the top of the grid: 3e-2 is tried, then 1e-1, which is worse: 3e-2 inside
    ({3e-4: 3.0, 1e-3: 2.5, 3e-3: 2.0, 1e-2: 1.5, 3e-2: 1.2, 1e-1: 1.4}, (3e-2, 1e-1), 3e-2),
    # 3e-2 already worse than 1e-2: one extension, 1e-2 inside
    ({3e-4: 3.0, 1e-3: 2.5, 3e-3: 2.0, 1e-2: 1.5, 3e-2: 1.6}, (3e-2,), 1e-2),
    # the smallest rate best: 1e-4 tried below it
    ({1e-4: 1.1, 3e-4: 1.0, 1e-3: 1.2, 3e-3: 1.5, 1e-2: 2.0}, (1e-4,), 3e-4),
    # an interior best: nothing added
    ({3e-4: 2.0, 1e-3: 1.0, 3e-3: 1.5, 1e-2: 2.5}, (), 1e-3),
])
def test_the_grid_grows_past_an_end_where_the_best_rate_sits(tmp_path, monkeypatch, surface, tried, best):
    task = TaggingTask("lag", n_symbols=8, min_len=8, max_len=12, a=1)
    calls = []

    def fake_run(cfg, task_, spec_, seed, evals=None, model=None, first_layer=None):
        calls.append(spec_.lr)
        return SimpleNamespace(metrics={"valid": {"loss": surface[spec_.lr]}}, result=SimpleNamespace(diverged=False))
    monkeypatch.setattr(base, "run_tagging", fake_run)
    logged = []
    ctx = base.Context(quick=False, seeds=[0], out_dir=tmp_path, log=logged.append)
    assert base.best_lr(ctx, "arm", None, task, TrainSpec(steps=5, batch_size=4, lr=1e-3, warmup=1)) == best
    assert sorted(set(calls)) == sorted(set(base.LR_GRID) | set(tried))
    assert len(calls) == len(base.SWEEP_SEEDS) * (len(base.LR_GRID) + len(tried))
    assert ("an end of the grid" in logged[-1]) == (best in (min(calls), max(calls)))
