"""Issue 28 §3: `norm-placement` as a learning-rate × warmup grid. The 'trains' threshold, the two
per-seed summaries of the grid and the spike measure, checked by hand; the grid the issue asks for
(≥ 4 rates from 3e-4 to 1e-2, 6–12 layers, width ≥ 256); a quick row with one cell per arm and rate."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from glassformer.cli import app
from glassformer.experiments import norm_placement as npl


def test_trains_threshold_is_midway_between_the_two_plateaus():
    # 64 classes (ordered pairs of 8 symbols): nothing learned = ln 64, one look-up learned = ln 8
    assert npl.trained_below(npl.task()) == pytest.approx((math.log(64) + math.log(8)) / 2)
    assert npl.trained_below(npl.task()) == pytest.approx(3.1191, abs=1e-4)


def test_summaries_of_the_grid_by_hand():
    inf = math.inf
    finals = {3e-4: [2.0, 3.5, inf], 1e-3: [3.0, 3.2, 1.0], 1e-2: [4.1, inf, 3.11]}
    trained, best = npl.summarise(finals, 3.12)
    assert trained == [2.0, 0.0, 2.0]  # seed 0: 2.0, 3.0; seed 1: none (3.5, 3.2, diverged); seed 2: 1.0, 3.11
    assert best == [2.0, 3.2, 1.0]


def test_rebound_is_the_worst_rise_above_the_best_so_far_after_the_first_steps():
    losses = [5.0] * npl.SKIP + [3.0, 2.0, 2.5, 1.0, 1.8]
    assert npl.rebound(losses) == pytest.approx(0.8)  # 1.8 − 1.0 (2.5 − 2.0 = 0.5 is smaller)
    assert npl.rebound([4.0, 3.0, float("nan")]) == math.inf


def test_the_full_grid_is_the_one_the_issue_asks_for():
    assert len(npl.LR_GRID) >= 4 and min(npl.LR_GRID) == 3e-4 and max(npl.LR_GRID) == 1e-2
    assert 6 <= npl.N_LAYERS <= 12 and npl.D_MODEL >= 256


def test_quick_row_has_one_cell_per_arm_and_rate(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["ablate", "norm-placement", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (row,) = json.loads((out / "results.json").read_text(encoding="utf-8"))
    grid = row["extra"]["grid"]
    rates = npl.LR_GRID[1::2]
    arms = [npl.arm_name(p, w) for p in ("post", "pre") for w in (True, False)]
    assert set(grid) == {f"{a} @ {lr:g}" for a in arms for lr in rates}
    by_name = {v["name"]: v["values"] for v in row["variants"]}
    for a in arms:
        # the per-seed count equals the cells' counts summed over the rates
        assert sum(by_name[f"{a}: rates that train"]) == sum(grid[f"{a} @ {lr:g}"]["trained"] for lr in rates)
        # the best loss per seed is at most every cell's mean of finite finals
        for lr in rates:
            m = grid[f"{a} @ {lr:g}"]["mean_final"]
            assert m is None or min(by_name[f"{a}: best loss"]) <= m + 1e-9
