"""The recipe's thread count, re-checked while a run trains (issue 32 §4): a busy minute at the
start must not cost the whole run a core, nor a job that starts later leave it spinning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch

from glassformer.train import threads as thread_watch
from glassformer.train.threads import ThreadWatch, cpu_times

from cli_helpers import run

TINY = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--batch-size", "32", "--quiet"]


class Script:
    """Feeds ThreadWatch the machine's (busy, total) jiffies, its own CPU seconds and the clock."""

    def __init__(self, samples):
        self.samples, self.i = samples, 0

    def step(self):
        self.i += 1

    def machine(self):
        return self.samples[self.i][0]

    def own(self):
        return self.samples[self.i][1]

    def clock(self):
        return self.samples[self.i][2]


def test_other_work_is_the_machines_busy_time_less_the_runs_own():
    # 2 cores. Interval 1 (20 s): the machine was busy 150 of 200 jiffies = 1.5 cores; the run used
    # 10 CPU seconds = 0.5 core; other work 1.0 core -> one free core is not enough for 2 threads.
    # Interval 2: busy 100 of 200 = 1.0 core, all of it the run's (20 s) -> nobody else -> 2 threads.
    s = Script([((0, 0), 0.0, 0.0), ((150, 200), 10.0, 20.0), ((250, 400), 30.0, 40.0), (None, 30.0, 60.0)])
    state = {"threads": 2}
    w = ThreadWatch(2, s.machine, s.own, s.clock, lambda n: state.update(threads=n), lambda: state["threads"])
    s.step()
    line = w.check()
    assert state["threads"] == 1 and line == ("threads 2 → 1: other work kept 1.0 of 2 cores busy since the last "
                                              "evaluation")
    s.step()
    assert w.check() == "threads 1 → 2: other work kept 0.0 of 2 cores busy since the last evaluation"
    assert state["threads"] == 2
    s.step()
    assert w.check() is None and state["threads"] == 2  # nothing measurable (no /proc/stat): no change


def test_an_unchanged_load_changes_nothing():
    s = Script([((0, 0), 0.0, 0.0), ((100, 200), 20.0, 20.0)])  # the run alone on one of two cores
    state = {"threads": 2}
    w = ThreadWatch(2, s.machine, s.own, s.clock, lambda n: state.update(threads=n), lambda: state["threads"])
    s.step()
    assert w.check() is None and state["threads"] == 2


def test_the_runs_own_cpu_time_and_a_spinning_neighbour_are_read_from_the_system():
    # the run's own CPU time (what is subtracted): a busy loop of 0.6 s wall is at most 0.6 s of CPU,
    # and more than a third of it even on a loaded machine
    own0, t0 = thread_watch.own_cpu_seconds(), time.monotonic()
    while time.monotonic() < t0 + 0.6:
        pass
    used = thread_watch.own_cpu_seconds() - own0
    assert 0.2 <= used <= time.monotonic() - t0 + 0.02, used
    # a neighbour spinning while this process sleeps is other work: most of a core, whatever else runs
    w = ThreadWatch(os.cpu_count() or 1)
    if cpu_times() is None:  # no /proc/stat (not Linux): nothing measurable, so never a change
        assert w.others() is None and w.check() is None
        return
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        w.others()  # the interval starts with the neighbour running
        time.sleep(0.6)
        theirs = w.others()
    finally:
        spinner.kill()
    assert 0.8 <= theirs <= (os.cpu_count() or 1) + 0.01, theirs


def _records(path):
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def _pairs(tmp_path):
    pairs = [(f"{a}{b}", f"{a.upper()} {b.upper()}") for a in "abcdefg" for b in "abcdefg"] * 3
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    return path


def test_a_run_with_the_recipes_threads_follows_the_load(tmp_path, monkeypatch, capsys):
    loads = iter([1.0, 0.0, 0.0])  # a neighbour at the first evaluation, gone at the second
    monkeypatch.setattr(ThreadWatch, "others", lambda self: next(loads))
    before = torch.get_num_threads()
    code, out, err = run(monkeypatch, capsys, "train", "--task", "tsv", "--data", str(_pairs(tmp_path)), "--out",
                         str(tmp_path / "run"), "--max-steps", "30", "--eval-every", "10", *TINY)
    assert code == 0, err
    assert "re-checked at each evaluation" in out
    records = [r for r in _records(tmp_path / "run" / "metrics.jsonl") if r["split"] == "threads"]
    first = torch.get_num_threads()
    from glassformer.train.run_folder import saved_train_config
    cfg = saved_train_config(str(tmp_path / "run"))
    assert cfg["threads_auto"] is True
    # whatever the recipe chose at the start, the first evaluation saw one busy core (-> 1 thread) and
    # the second none (-> 2 threads): the log says each change that happened
    if cfg["threads"] == 2:
        assert [(r["step"], r["threads"]) for r in records] == [(10, 1), (20, 2)]
    else:
        assert [(r["step"], r["threads"]) for r in records] == [(20, 2)]
    assert first == before  # the caller's thread count is given back after the run


def test_threads_given_on_the_command_line_are_never_changed(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(ThreadWatch, "others", lambda self: pytest.fail("a given --threads was re-checked"))
    code, out, err = run(monkeypatch, capsys, "train", "--task", "tsv", "--data", str(_pairs(tmp_path)), "--out",
                         str(tmp_path / "run"), "--max-steps", "20", "--eval-every", "10", "--threads", "1", *TINY)
    assert code == 0, err
    from glassformer.train.run_folder import saved_train_config
    assert saved_train_config(str(tmp_path / "run"))["threads_auto"] is False
    assert not [r for r in _records(tmp_path / "run" / "metrics.jsonl") if r["split"] == "threads"]
