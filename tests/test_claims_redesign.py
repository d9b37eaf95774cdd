"""Issue 28 §3: the redesigned rows. `rnn` times on parallel hardware only and says so where there
is none; each of its retrieval arms trains at its own rate; a check's own failed gate makes it "not
tested" whatever its numbers say."""

from __future__ import annotations

import json

import pytest
import torch
from typer.testing import CliRunner

from glassformer.cli import app
from glassformer.experiments import rnn
from glassformer.experiments.verdict import HOLDS, UNTESTED, Check, Variant, decide


def test_a_checks_own_failed_gate_makes_it_not_tested_and_a_met_one_changes_nothing():
    a = Variant("A", "acc", [0.9, 0.92, 0.95, 0.91, 0.93])
    b = Variant("B", "acc", [0.1, 0.12, 0.15, 0.11, 0.13])
    variants = {"A": a, "B": b}
    plain = decide(a.values, b.values, True, 0.1)
    assert plain[0] == HOLDS  # the numbers alone would say holds
    failed = Check("A beats B", "A", "B", True, 0.1, gate="failed: no GPU").evaluate(variants)
    assert failed["verdict"] == UNTESTED and failed["gate"] == "failed: no GPU"
    assert failed["difference"] == pytest.approx(plain[1])  # the numbers are still shown
    met = Check("A beats B", "A", "B", True, 0.1, gate="met: timed on a GPU").evaluate(variants)
    assert met["verdict"] == HOLDS and (met["ci_low"], met["ci_high"]) == pytest.approx(plain[2:])


@pytest.mark.parametrize("kind", ["LSTM", "Transformer"])
def test_the_timing_step_trains_and_is_timed_on_the_given_device(kind):
    from glassformer.experiments.base import tiny_config
    from glassformer.nn import build_model

    torch.manual_seed(0)
    model = rnn.LSTMTagger(16, d_embed=8, hidden=8) if kind == "LSTM" else \
        build_model(tiny_config(16, d_model=8, n_heads=2, d_ff=16, max_len=32))
    before = [p.detach().clone() for p in model.parameters()]
    s = rnn.seconds_per_sequence(model, 16, length=32, batch=2, reps=2, device=torch.device("cpu"))
    assert 0 < s < 10
    assert any(not torch.equal(p0, p) for p0, p in zip(before, model.parameters()))  # AdamW stepped


def _quick_row(tmp_path, monkeypatch, device):
    monkeypatch.setattr(rnn, "timing_device", lambda: device)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["ablate", "rnn", "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (row,) = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return row


def test_without_a_gpu_nothing_is_timed_and_the_timing_checks_say_why(tmp_path, monkeypatch):
    row = _quick_row(tmp_path, monkeypatch, None)
    timing = [c for c in row["checks"] if "retrieval" not in c["claim"] and "long-range" not in c["claim"]]
    assert len(timing) == 4
    for c in timing:
        assert c["verdict"] == UNTESTED and c["gate"].startswith("failed") and "no CUDA device" in c["gate"]
    by_name = {v["name"]: v for v in row["variants"]}
    assert all(by_name[c["better"]]["values"] == [] for c in timing)
    (long_range,) = [c for c in row["checks"] if "long-range" in c["claim"]]
    assert long_range["gate"] is None and len(by_name[long_range["better"]]["values"]) == 2
    assert "no CUDA device" in row["setup"] and row["plots"] == []


def test_on_parallel_hardware_the_timing_checks_are_measured(tmp_path, monkeypatch):
    # the GPU path, run on the CPU device: every timing arm gets one value per seed and no gate
    row = _quick_row(tmp_path, monkeypatch, torch.device("cpu"))
    timing = [c for c in row["checks"] if "long-range" not in c["claim"]]
    by_name = {v["name"]: v for v in row["variants"]}
    for c in timing:
        assert c["gate"] is None and c["verdict"] != UNTESTED
        assert len(by_name[c["better"]]["values"]) == 2 and len(by_name[c["worse"]]["values"]) == 2
    assert {p[0] for p in row["plots"]} == {"rnn_time.png", "rnn_ratio.png"}
    # the rule, recomputed from the row's own values, gives the printed verdict
    for c in timing:
        want = decide(by_name[c["better"]]["values"], by_name[c["worse"]]["values"], c["higher_is_better"],
                      c["min_effect"])[0]
        assert c["verdict"] == want


def test_each_retrieval_arm_trains_at_its_own_swept_rate(tmp_path, monkeypatch):
    from glassformer.experiments import base

    seen = []
    real = base.best_lr

    def spy(ctx, key, cfg, task, spec, make_model=None):
        seen.append((key, make_model().__class__.__name__))
        return real(ctx, key, cfg, task, spec, make_model)
    monkeypatch.setattr(rnn, "best_lr", spy)
    _quick_row(tmp_path, monkeypatch, None)
    assert seen == [("first.LSTM", "LSTMTagger"), ("first.Transformer", "DecoderLM")]


def _old_page_checks(row_id: str) -> list[str]:
    """The check names of one row of the last full run's page (docs/claims_issue12.md), read by hand."""
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "claims_issue12.md").read_text(encoding="utf-8")
    block = text.split(f"## `{row_id}` — ", 1)[1].split("\n## `", 1)[0]
    names, in_checks = [], False
    for line in block.splitlines():
        if line.startswith("| check |"):
            in_checks = True
        elif in_checks and line.startswith("| ") and not line.startswith("|---"):
            names.append(line[2:].split(" | ")[0])
    return names


@pytest.mark.parametrize("row_id, old_checks", [("norm-placement", 3), ("rnn", 4)])
def test_the_old_designs_stay_withdrawn_and_the_redesigned_rows_are_not(row_id, old_checks):
    from glassformer.experiments.gates import design_gate
    from glassformer.experiments.registry import module

    names = _old_page_checks(row_id)
    assert len(names) == old_checks
    gated = [n for n in names if (design_gate(row_id, n) or "").startswith("failed: design")]
    # every old check of the withdrawn design, except rnn's retrieval check (hardware-free), stays withdrawn
    assert len(gated) == old_checks - (row_id == "rnn")
    # the redesigned module's checks carry no design gate: their names are new
    src = module(row_id).__file__
    text = open(src, encoding="utf-8").read()
    assert all(n not in text for n in gated)


@pytest.mark.parametrize("row_id", ["real-heads", "real-ffn", "real-norm", "real-pe", "dk-sweet-spot"])
def test_each_text_row_prints_the_rate_each_arm_trained_at(row_id, tmp_path, monkeypatch):
    """Issue 28 §2: "with the chosen rate printed in the row". Each arm gets a rate of its own from a
    stand-in sweep; the row's setup must name every arm with the rate it was given."""
    from glassformer.experiments import base

    given = {}

    def sweep(ctx, key, cfg, task, spec, make_model=None):
        given[key] = 1e-3 * (len(given) + 1)  # 0.001, 0.002, ...: a different rate per arm
        return given[key]
    monkeypatch.setattr(base, "best_lr", sweep)
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["ablate", row_id, "--quick", "--out", str(out)])
    assert result.exit_code == 0, result.output
    (row,) = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert len(given) >= 3
    for key, lr in given.items():
        name = next(v["name"].split(" @ ")[0] for v in row["variants"]
                    if v["name"].split(" @ ")[0].replace(" ", "_").replace("/", "-") == key)
        assert f"{name} {lr:g}" in row["setup"], (name, lr, row["setup"])
