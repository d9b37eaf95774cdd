"""`glassformer ablate`: every experiment runs under --quick, rows are well-formed, the verdict
rule does what its docstring says on hand-made numbers, and the no-PE permutation argument of
seed §3.1 holds against a torch computation."""

from __future__ import annotations

import json
import math
import statistics
import sys

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from glassformer.cli import app
from glassformer.config import ModelConfig
from glassformer.experiments import EXPERIMENTS
from glassformer.experiments.runner import lr_at
from glassformer.experiments.synthetic import TaggingTask
from glassformer.experiments.paper_norm import _torch_layer
from glassformer.experiments.stats import steps_to, wilson
from glassformer.experiments.verdict import FAILS, HOLDS, UNSURE, UNTESTED, VERDICTS, combine, decide, mean_std
from glassformer.nn import build_model


# ---- the verdict rule on hand-made numbers ----
def test_decide_holds_when_the_interval_excludes_zero_and_the_gap_reaches_delta():
    a, b = [1.0, 1.1, 0.9, 1.05, 0.95], [0.5, 0.6, 0.4, 0.55, 0.45]
    verdict, d, lo, hi = decide(a, b, True, 0.1)
    assert verdict == HOLDS and d == pytest.approx(0.5) and 0 < lo <= d <= hi


def test_decide_direction_lower_is_better():
    a, b = [0.5, 0.6, 0.4, 0.55, 0.45], [1.0, 1.1, 0.9, 1.05, 0.95]
    assert decide(a, b, False, 0.1)[0] == HOLDS
    assert decide(b, a, False, 0.1)[0] == FAILS  # the opposite measured


def test_decide_no_effect_of_the_claimed_size_does_not_hold():
    verdict, d, lo, hi = decide([0.50, 0.51, 0.49, 0.5, 0.5], [0.50] * 5, True, 0.1)
    assert verdict == FAILS and hi < 0.1


def test_decide_noisy_seeds_are_inconclusive():
    assert decide([0.1, 0.9, 0.5, 0.0, 1.0], [0.3, 0.4, 0.5, 0.3, 0.4], True, 0.05)[0] == UNSURE


def test_decide_needs_five_finite_values_a_side():
    assert decide([1.0] * 4, [0.0] * 4, True, 0.1)[0] == UNSURE
    assert decide([1.0] * 4 + [None], [0.0] * 5, True, 0.1)[0] == UNSURE
    assert decide([1.0] * 4 + [math.nan], [0.0] * 5, True, 0.1)[0] == UNSURE


def test_decide_a_ceiling_or_floor_is_not_tested():
    # both arms at accuracy ≥ 0.98: the task cannot show the claimed gain
    assert decide([1.0] * 5, [0.99] * 5, True, 0.1, ceiling=0.98)[0] == UNTESTED
    # both arms at chance loss: neither learned anything
    assert decide([4.2] * 5, [4.2] * 5, False, 0.1, floor=4.1)[0] == UNTESTED
    assert decide([1.0] * 5, [4.2] * 5, False, 0.1, floor=4.1)[0] == HOLDS


def test_mean_std_is_the_sample_standard_deviation():
    xs = [0.3, 1.7, 2.2, 5.0]
    m, s = mean_std(xs + [None, math.inf])
    assert m == pytest.approx(statistics.mean(xs)) and s == pytest.approx(statistics.stdev(xs))
    assert mean_std([None]) == (None, None)


def test_combine_uses_main_checks_only():
    h, f, u, n = ({"verdict": v, "main": True} for v in (HOLDS, FAILS, UNSURE, UNTESTED))
    side_fail = {"verdict": FAILS, "main": False}
    assert combine([h, h, side_fail]) == HOLDS
    assert combine([h, f]) == FAILS
    assert combine([h, u]) == UNSURE
    assert combine([f, u]) == FAILS
    assert combine([n, n, side_fail]) == UNTESTED
    assert combine([h, n]) == UNSURE
    assert combine([side_fail]) == UNSURE


def test_wilson_interval_is_scipys():
    from scipy.stats import binomtest
    for k, n in ((0, 10), (3, 10), (10, 10), (7, 12), (1, 5)):
        want = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson(k, n) == pytest.approx((want.low, want.high), abs=1e-9)


def test_steps_to_threshold_counts_censored_runs_past_the_budget():
    losses = [5.0] * 30 + [0.1] * 30
    assert steps_to(losses, 1.0, budget=60, smooth=5) == 35  # steps 31–35 all 0.1: first mean ≤ 1
    assert steps_to([5.0] * 60, 1.0, budget=60) == 61
    assert steps_to([5.0, math.nan], 1.0, budget=60) == 61  # diverged


# ---- the lean trainer's pieces against independent formulas ----
def test_lr_schedule_is_the_papers_shape_rescaled_to_its_peak():
    d_model, warmup, peak = 512, 400, 3e-3
    noam = lambda s: d_model ** -0.5 * min(s ** -0.5, s * warmup ** -1.5)  # the paper, eq. (3)
    for step in (1, 10, 200, 400, 401, 1000, 5000):
        assert lr_at(step, peak, warmup) == pytest.approx(peak * noam(step) / noam(warmup))
    assert lr_at(1, peak, 0, decay_from=warmup) == pytest.approx(peak)  # no warmup: the peak at once
    assert lr_at(1600, peak, 0, decay_from=warmup) == pytest.approx(peak * 0.5)


@pytest.mark.parametrize("rule", ["lag", "pair", "modsum", "first"])
def test_synthetic_targets_follow_their_rule(rule):
    task = TaggingTask(rule, n_symbols=5, min_len=4, max_len=9, a=1, b=3)
    ids, y = task.batch(16, torch.Generator().manual_seed(0))
    for row_ids, row_y in zip(ids.tolist(), y.tolist()):
        x = [t - 3 for t in row_ids if t != 0]
        n = len(x)
        assert all(t == 0 for t in row_ids[n:])  # right padding
        for t in range(len(row_ids)):
            if t >= n:
                want = None
            elif rule == "lag":
                want = x[t - 1] if t >= 1 else None
            elif rule == "pair":
                want = x[t - 1] * 5 + x[t - 3] if t >= 3 else None
            elif rule == "modsum":
                want = (x[t - 1] + x[t - 3]) % 5 if t >= 3 else None
            else:
                want = x[0] if t == n - 1 else None
            assert row_y[t] == (-100 if want is None else want + 3), (rule, t)


# ---- seed §3.1: without PE the encoder is permutation-equivariant ----
def test_no_pe_encoder_is_permutation_equivariant_like_torch():
    torch.manual_seed(0)
    cfg = ModelConfig(arch="encoder", vocab_size=10, d_model=16, n_heads=4, n_layers=2, d_ff=32, pe="none")
    model = build_model(cfg).eval()
    refs = [_torch_layer(layer, 16, 4, norm_first=False) for layer in model.enc]
    cat_chases_dog = torch.tensor([[4, 5, 6]])  # 猫 追 狗
    dog_chases_cat = torch.tensor([[6, 5, 4]])  # 狗 追 猫: rows 0 and 2 swapped
    perm = torch.tensor([2, 1, 0])
    with torch.no_grad():
        ours = [model(ids)[0] for ids in (cat_chases_dog, dog_chases_cat)]
        theirs = []
        for ids in (cat_chases_dog, dog_chases_cat):
            x = model.embed.W_E[ids]
            for ref in refs:
                x = ref(x)
            theirs.append(x[0])
    for o, t in zip(ours, theirs):
        torch.testing.assert_close(o, t, atol=1e-5, rtol=1e-5)  # glassformer == torch
    torch.testing.assert_close(ours[1], ours[0][perm], atol=1e-6, rtol=1e-6)  # P·Enc(X) = Enc(P·X)
    # with the sinusoidal encoding the reversal is no longer a permutation of the same rows
    pe_model = build_model(cfg.replace(pe="sinusoidal")).eval()
    with torch.no_grad():
        a, b = pe_model(cat_chases_dog)[0], pe_model(dog_chases_cat)[0]
    assert (b - a[perm]).abs().max() > 1e-2


def test_no_pe_translator_gives_a_sentence_and_its_reversal_the_same_output():
    """Cross-attention sums over the memory, so a permuted memory gives the same decoder logits."""
    torch.manual_seed(1)
    cfg = ModelConfig(arch="encoder-decoder", vocab_size=12, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                      pe="none", pad_id=0)
    model = build_model(cfg).eval()
    tgt = torch.tensor([[1, 7, 8, 9]])
    with torch.no_grad():
        a = model(torch.tensor([[4, 5, 6]]), tgt)
        b = model(torch.tensor([[6, 5, 4]]), tgt)
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-6)


# ---- every experiment under --quick, through the CLI ----
EXPECTED_KEYS = {"id", "claim", "seed_section", "variants", "verdict", "gate"}
VARIANT_KEYS = {"name", "metric", "values", "n_seeds", "mean", "std", "ci_low", "ci_high", "interval"}


@pytest.mark.parametrize("exp_id", list(EXPERIMENTS))
def test_quick_run_writes_a_well_formed_row(exp_id, tmp_path):
    out = tmp_path / "out"
    rows_path = tmp_path / "rows.json"
    result = CliRunner().invoke(app, ["ablate", exp_id, "--quick", "--out", str(out), "--json", str(rows_path)])
    assert result.exit_code == 0, result.output
    rows = json.loads(rows_path.read_text(encoding="utf-8"))
    assert json.loads((out / "results.json").read_text(encoding="utf-8")) == rows
    (row,) = rows
    assert EXPECTED_KEYS <= set(row) and row["id"] == exp_id
    assert row["verdict"] in VERDICTS
    assert row["claim"] and row["seed_section"].startswith("seed")
    names = [v["name"] for v in row["variants"]]
    assert len(names) == len(set(names)) >= 2
    exact = all(c["kind"] == "exact" for c in row["checks"])
    # a measurement the machine cannot make (rnn's GPU timing on a CPU) has no values, and every check
    # that reads it carries a failed gate of its own
    gated = {n for c in row["checks"] if (c.get("gate") or "").startswith("failed") for n in (c["better"], c["worse"])}
    for v in row["variants"]:
        assert set(v) == VARIANT_KEYS
        # --quick: 2 seeds; an exact check needs one
        assert len(v["values"]) == (1 if exact else 2) or (v["name"] in gated and v["values"] == [])
        finite = [x for x in v["values"] if x is not None]
        assert v["n_seeds"] == len(finite)
        if finite:
            assert v["mean"] == pytest.approx(statistics.mean(finite))
            assert v["ci_low"] <= v["mean"] + 1e-12 and v["mean"] <= v["ci_high"] + 1e-12
        else:
            assert v["mean"] is None
    # the verdict follows from the numbers: recompute it from the row's own values
    by_name = {v["name"]: v["values"] for v in row["variants"]}
    recomputed = []
    for c in row["checks"]:
        if c["kind"] == "exact":
            value = by_name[c["better"]][0]
            ok = value <= c["threshold"] if c["relation"] == "<=" else value >= c["threshold"]
            verdict = HOLDS if ok else FAILS
        else:
            verdict = decide(by_name[c["better"]], by_name[c["worse"]], c["higher_is_better"], c["min_effect"],
                             c["ceiling"], c["floor"], rate=c["kind"] == "rate difference")[0]
        if any((g or "").startswith("failed") for g in (row["gate"], c.get("gate"))):
            verdict = UNTESTED  # a failed quality gate, the row's or the check's: nothing is read (issue 28)
        assert verdict == c["verdict"]
        recomputed.append({"verdict": verdict, "main": c["main"]})
    assert combine(recomputed) == row["verdict"]
    if not exact:
        assert row["verdict"] in (UNSURE, UNTESTED)  # 2 seeds: too few for holds / does not hold
    report = (out / "REPORT.md").read_text(encoding="utf-8")
    assert f"## `{exp_id}`" in report and "Verdict rule" in report
    for file, _ in row["plots"]:
        assert (out / "claims" / file).stat().st_size > 1000
    # run.json: a call from an empty cache says so (its wall clock is a from-scratch time)
    run = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert (run["cached"], run["finished"], run["of"], run["jobs"]) == ([], 1, 1, 1) and run["seconds"] > 0
    # a second run finds the finished row in the cache instead of training again, and says so
    again = CliRunner().invoke(app, ["ablate", exp_id, "--quick", "--out", str(out), "--json", str(rows_path)])
    assert again.exit_code == 0 and "cached:" in again.output
    assert json.loads(rows_path.read_text(encoding="utf-8")) == rows
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["cached"] == [exp_id]


def test_ten_seed_run_reaches_a_verdict_that_the_raw_values_reproduce(tmp_path):
    """ln-gradients (Xiong et al. 2020) with 10 seeds: a real verdict, recomputed with SciPy's Welch test."""
    from scipy import stats

    from glassformer.experiments import run_one
    row = run_one("ln-gradients", True, list(range(10)), tmp_path)
    check, own = [c for c in row["checks"] if c["main"]]  # Post-LN against Pre-LN; Post-LN against a flat profile
    by_name = {v["name"]: v for v in row["variants"]}
    # Post-LN's own growth against the flat profile (all zeros): SciPy's one-sample t interval
    growth = by_name[own["better"]]["values"]
    one = stats.ttest_1samp(growth, 0.0).confidence_interval(0.95)
    assert by_name[own["worse"]]["values"] == [0.0] * 10
    assert (own["ci_low"], own["ci_high"]) == pytest.approx((one.low, one.high), rel=1e-9)
    post, pre = by_name[check["better"]]["values"], by_name[check["worse"]]["values"]
    assert len(post) == len(pre) == 10
    d = statistics.mean(post) - statistics.mean(pre)
    ci = stats.ttest_ind(post, pre, equal_var=False).confidence_interval(0.95)
    assert check["difference"] == pytest.approx(d)
    assert (check["ci_low"], check["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-9)
    lo, hi = ci.low, ci.high
    want = HOLDS if lo > 0 and d >= check["min_effect"] else FAILS if hi < check["min_effect"] else UNSURE
    assert want != UNSURE and check["verdict"] == want
    assert row["verdict"] == combine([check, own])
    # the per-arm interval is the t interval of the mean (the values are not declared rates)
    v = by_name[check["better"]]
    want = stats.t.interval(0.95, 9, loc=np.mean(post), scale=stats.sem(post))
    assert v["interval"] == "t" and (v["ci_low"], v["ci_high"]) == pytest.approx(want, rel=1e-9)


# ---- a user's mistakes stop with one line ----
@pytest.mark.parametrize("args, needle", [
    (["ablate", "nope", "--out", "x"], "unknown experiment 'nope'"),
    (["ablate", "heads", "--quick", "--seeds", "0", "--out", "x"], "--seeds 0 must be at least 1"),
    (["ablate", "heads", "--quick", "--jobs", "0", "--out", "x"], "--jobs 0 must be at least 1"),
])
def test_bad_arguments_stop_with_one_line(args, needle, tmp_path, monkeypatch, capsys):
    from glassformer import cli
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["glassformer", *args])
    with pytest.raises(SystemExit) as exit_:
        cli.main()  # the real entry point: GlassformerError -> one line, status 2
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0]
    assert not (tmp_path / "x").exists()  # nothing written
