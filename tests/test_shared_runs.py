"""Runs that several claims rows need are trained once (issue 28 §7's budget): the text rows share
their common arm through a cache keyed by everything that decides a run (base.run_identity)."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from glassformer.cli import app
from glassformer.experiments import base, text_task
from glassformer.experiments.runner import TrainSpec
from glassformer.experiments.text_task import CharTextTask, run_arms, text_config


def _counting_run(calls):
    def fake_run(cfg, task, spec, seed, evals=None, model=None, first_layer=None):
        calls.append((cfg.n_heads, cfg.d_ff, spec.lr, seed, model is not None))
        loss = 1.0 + cfg.n_heads / 100 + seed / 1000 + sum(len(b) for b in evals.values()) / 1e4
        return SimpleNamespace(metrics={n: {"loss": loss} for n in evals}, result=SimpleNamespace(diverged=False))
    return fake_run


def _ctx(root, row):
    return base.Context(quick=True, seeds=[0, 1], out_dir=root, log=lambda s: None, memo_dir=root / "runs" / row)


def test_an_arm_two_rows_both_need_trains_once_and_anything_that_differs_trains_again(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(base, "run_tagging", _counting_run(calls))
    task = CharTextTask()
    spec = TrainSpec(steps=4, batch_size=8, lr=1e-3, warmup=2)
    common = text_config(task.vocab_size)
    first = run_arms(_ctx(tmp_path, "row-a"), {"d_k=16": (common, None)}, spec, (64,), task)
    assert len(calls) == 2  # two seeds
    # another row, another arm name, the same config (built again, not the same object): no training
    again = run_arms(_ctx(tmp_path, "row-b"), {"h=8": (text_config(task.vocab_size, n_heads=8), None)},
                     spec, (64,), task)
    assert len(calls) == 2 and again["h=8"] == first["d_k=16"]
    # a different field of the config, of the spec, other test windows, or an arm with its own builder
    run_arms(_ctx(tmp_path, "row-c"), {"a": (text_config(task.vocab_size, d_ff=128), None)}, spec, (64,), task)
    run_arms(_ctx(tmp_path, "row-d"), {"a": (common, None)}, TrainSpec(steps=5, batch_size=8, lr=1e-3, warmup=2),
             (64,), task)
    run_arms(_ctx(tmp_path, "row-e"), {"a": (common, None)}, spec, (64, 128), task)
    run_arms(_ctx(tmp_path, "row-f"), {"a": (common, lambda: base.build_model(common))}, spec, (64,), task)
    assert len(calls) == 2 + 4 * 2
    assert calls[-1][-1] and not any(c[-1] for c in calls[:-2])
    # each shared file says which run it holds; the arm with its own builder is kept too, under an identity
    # that names the row and key that built it (so that it persists in an archive and no other row takes it)
    kept = [json.loads(p.read_text()) for p in (tmp_path / "runs" / base.SHARED).iterdir()]
    assert len(kept) == 2 * 5 and {k["identity"]["config"]["d_ff"] for k in kept} == {128, 512}
    assert sorted(k["identity"].get("built_by", "") for k in kept)[-2:] == ["row-f/a.s0", "row-f/a.s1"]


@pytest.mark.parametrize("own_builder", [False, True])
def test_a_changed_arm_trains_again_under_its_old_name_in_the_same_row(own_builder, tmp_path, monkeypatch):
    """A row's own cache used to keep a run under its name alone ("ARM.sSEED"): a row whose arm changed
    (a wider model, a longer budget) and was rerun into the same --out read the old runs and printed them
    as the new design's. Every run with an identity is now kept under its digest, in the row's folder too,
    whether or not the arm has a builder of its own."""
    calls = []
    monkeypatch.setattr(base, "run_tagging", _counting_run(calls))
    task = CharTextTask()
    short, long_ = (TrainSpec(steps=n, batch_size=8, lr=1e-3, warmup=2) for n in (4, 8))

    def arm(cfg):
        return {"arm": (cfg, (lambda: base.build_model(cfg)) if own_builder else None)}
    narrow, wider = text_config(task.vocab_size), text_config(task.vocab_size, d_ff=1024)
    run_arms(_ctx(tmp_path, "row"), arm(narrow), short, (64,), task)
    assert len(calls) == 2
    run_arms(_ctx(tmp_path, "row"), arm(wider), short, (64,), task)
    assert len(calls) == 4  # the wider arm trained: it did not read the narrow arm's runs
    run_arms(_ctx(tmp_path, "row"), arm(wider), long_, (64,), task)
    assert len(calls) == 6  # nor did a longer budget
    run_arms(_ctx(tmp_path, "row"), arm(wider), long_, (64,), task)
    assert len(calls) == 6  # the same arm again: cached


def test_a_changed_arm_sweeps_its_rate_again(tmp_path, monkeypatch):
    """The same for the learning-rate sweep of an arm (kept whole under the arm's name before)."""
    calls = []
    monkeypatch.setattr(base, "run_tagging", _counting_run(calls))
    task = CharTextTask()
    spec = TrainSpec(steps=4, batch_size=8, lr=1e-3, warmup=2)
    ctx = base.Context(quick=False, seeds=[0], out_dir=tmp_path, log=lambda s: None, memo_dir=tmp_path / "runs" / "r")
    base.best_lr(ctx, "arm", text_config(task.vocab_size), task, spec)
    swept = len(calls)
    assert swept >= len(base.LR_GRID) * len(base.SWEEP_SEEDS)
    base.best_lr(ctx, "arm", text_config(task.vocab_size), task, spec)
    assert len(calls) == swept
    base.best_lr(ctx, "arm", text_config(task.vocab_size, n_heads=4), task, spec)
    assert len(calls) > swept


def test_a_shared_run_is_the_run_the_row_would_train_on_its_own(tmp_path):
    """real-heads' h = 8 and h = 1 arms are dk-sweet-spot's d_k = 16 and d_k = 128 arms: taken from
    dk-sweet-spot's cache they must equal real-heads trained alone (the identity misses nothing that
    decides the numbers: the config, the spec, the seed, the windows)."""
    runner = CliRunner()
    shared_out, alone_out = tmp_path / "shared", tmp_path / "alone"
    for row, out in (("dk-sweet-spot", shared_out), ("real-heads", shared_out), ("real-heads", alone_out)):
        result = runner.invoke(app, ["ablate", row, "--quick", "--out", str(out)])
        assert result.exit_code == 0, result.output

    def variants(out, row):  # the finished row, as the cache keeps it
        kept = json.loads((out / "cache" / f"{row}.quick.2seeds.json").read_text(encoding="utf-8"))
        return {v["name"]: v["values"] for v in kept["variants"]}
    shared, alone, dk = variants(shared_out, "real-heads"), variants(alone_out, "real-heads"), \
        variants(shared_out, "dk-sweet-spot")
    assert shared == alone
    assert shared["h=8"] == dk["d_k=16 (h=8)"] and shared["h=1"] == dk["d_k=128 (h=1)"]
    assert len(list((shared_out / "cache" / "runs" / base.SHARED).glob("quick.*.json"))) == 4 * 2  # 4 arms, 2 seeds


def test_the_widened_text_rows_share_one_model_and_budget():
    """dk-sweet-spot, real-heads and real-ffn train the same model at the same budget, so that their
    common arm is one set of runs; the budget is the one the pilots put under the 4-gram gate."""
    from glassformer.experiments import dk_sweet_spot, real_ffn, real_heads

    ctx = base.Context(quick=False, seeds=[0], out_dir=None)
    assert dk_sweet_spot.spec(ctx) == real_heads.spec(ctx) == real_ffn.spec(ctx)
    assert dk_sweet_spot.spec(ctx).steps == text_task.STEPS == 5000
    vocab = CharTextTask().vocab_size
    assert text_config(vocab) == base.tiny_config(vocab, d_model=128, n_heads=8, d_ff=512)


def test_a_run_trained_here_keeps_its_seconds_and_threads_and_a_reused_one_gains_none(tmp_path, monkeypatch):
    """A row's time on the page is the sum of its own runs (issue 28 §7): each run that trains writes
    the seconds its training took (here a clock that advances 7.5 s per training) and its thread count
    beside its value; a run found in another row's cache or the archive is not timed again, and one taken
    from the archive keeps the time it was archived with."""
    import torch

    clock = iter([100.0, 107.5, 200.0, 207.5])
    monkeypatch.setattr(base.time, "perf_counter", lambda: next(clock))
    ctx = _ctx(tmp_path, "row-a")
    identity = {"run": 1}
    assert ctx.memo("arm.s0", lambda: {"loss": 1.5}, identity) == {"loss": 1.5}
    [kept] = (tmp_path / "runs" / base.SHARED).glob("quick.*.json")
    run = json.loads(kept.read_text(encoding="utf-8"))
    assert run == {"identity": identity, "value": {"loss": 1.5}, "seconds": 7.5, "threads": torch.get_num_threads(),
                   "row": "row-a"}
    # another row reuses it: nothing trains, the clock is not read, the file is unchanged
    assert _ctx(tmp_path, "row-b").memo("other.s0", lambda: pytest.fail("trained again"), identity) == {"loss": 1.5}
    assert json.loads(kept.read_text(encoding="utf-8")) == run
    # from an archive into an empty cache: kept whole, with the time and row it trained with (row-a's: a
    # later session of row-a sums it, row-c does not, claims_merge_row.run_seconds); nothing trains again
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / kept.name).write_text(kept.read_text(encoding="utf-8"), encoding="utf-8")
    ctx_c = base.Context(quick=True, seeds=[0], out_dir=tmp_path, log=lambda s: None,
                         memo_dir=tmp_path / "fresh" / "runs" / "row-c", archive=archive)
    assert ctx_c.memo("arm.s0", lambda: pytest.fail("trained again"), identity) == {"loss": 1.5}
    copied = json.loads((tmp_path / "fresh" / "runs" / base.SHARED / kept.name).read_text(encoding="utf-8"))
    assert copied == run


def _full_ctx(root, reverse=False):
    return base.Context(quick=False, seeds=[0, 1, 2], out_dir=root, log=lambda s: None,
                        memo_dir=root / "runs" / "row", reverse=reverse)


def test_a_row_split_between_a_forward_and_a_reverse_process_trains_each_run_once_and_equals_one_process(
        tmp_path, monkeypatch):
    """`ablate --reverse`: the second process trains arms, rates and seeds from the other end; started on the
    cache of a first process that stopped part-way, it trains only what is missing, and the row it assembles
    (values, arm order, printed rates) is the one a single forward process gives."""
    task = CharTextTask()
    spec = TrainSpec(steps=4, batch_size=8, lr=1e-3, warmup=2)
    arms = {f"h={h}": (text_config(task.vocab_size, n_heads=h), None) for h in (1, 2, 4)}

    def losses_by_rate(cfg, task, spec, seed, evals=None, model=None, first_layer=None):
        calls.append((cfg.n_heads, spec.lr, seed, "valid" in evals))  # the loss has its minimum at 3e-3
        loss = 1.0 + abs(math.log10(spec.lr / 3e-3)) + cfg.n_heads / 100 + seed / 1000
        return SimpleNamespace(metrics={n: {"loss": loss} for n in evals}, result=SimpleNamespace(diverged=False))
    monkeypatch.setattr(base, "run_tagging", losses_by_rate)

    calls = []
    alone = _full_ctx(tmp_path / "alone")
    expected = run_arms(alone, arms, spec, (64,), task)
    assert len(calls) == len(set(calls)) == 3 * (len(base.LR_GRID) * len(base.SWEEP_SEEDS) + 3)
    forward = list(calls)

    calls = []
    first = _full_ctx(tmp_path / "split")
    monkeypatch.setattr(base, "run_tagging", lambda *a, **k: (len(calls) < 7 or pytest.fail("stopped"))
                        and losses_by_rate(*a, **k))
    with pytest.raises(pytest.fail.Exception):  # the first process stops after 7 runs
        run_arms(first, arms, spec, (64,), task)
    monkeypatch.setattr(base, "run_tagging", losses_by_rate)
    second = _full_ctx(tmp_path / "split", reverse=True)
    got = run_arms(second, arms, spec, (64,), task)
    assert calls[:7] == forward[:7]
    # from the other end: the last arm's sweep from its highest rate and last seed, its seeds from the last
    assert calls[7][:2] == (4, base.LR_GRID[-1]) and calls[7][2] == base.SWEEP_SEEDS[-1]
    assert sorted(calls) == sorted(forward)  # every run once over the two processes
    assert list(got) == list(arms) and got == expected
    assert list(second.rates.items()) == list(alone.rates.items())


def test_a_run_another_process_finished_meanwhile_is_read_from_its_file(tmp_path):
    """Two processes meeting in the middle of a row may both train the run between them; the one that
    finishes second returns the first's copy, so every reader of the cache sees one value per run."""
    ctx = _full_ctx(tmp_path)
    identity = {"run": 2}

    def other_process_finishes_first():
        ctx_b = _full_ctx(tmp_path)
        assert ctx_b.memo("arm.s0", lambda: {"loss": 1.25}, identity) == {"loss": 1.25}
        return {"loss": 1.2500001}  # the same run, other float rounding
    assert ctx.memo("arm.s0", other_process_finishes_first, identity) == {"loss": 1.25}
    [kept] = (tmp_path / "runs" / base.SHARED).glob("full.*.json")
    assert json.loads(kept.read_text(encoding="utf-8"))["value"] == {"loss": 1.25}
    assert ctx.memo("arm.s0", lambda: pytest.fail("trained again"), identity) == {"loss": 1.25}
