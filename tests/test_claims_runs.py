"""docs/claims/runs/: the finished single runs behind the page's text rows, each filed under a digest of
everything that decided it (base.run_identity), so that a later session or a reader resumes or audits a
row from the repository instead of a machine's scratch folder (which does not outlive a session).

Three things could go stale and each test catches one: a file whose name is not the digest of its
identity (a hand-edited archive); a value on the page that no archived run gave (the page and the
archive disagree); and the code no longer describing the archived runs (a change to the text rows'
config, spec or test windows: the identity the code computes today finds no file)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from pathlib import Path

import pytest

from glassformer.experiments import base
from glassformer.experiments.text_task import D_MODEL, CharTextTask, text_config, text_spec

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "docs" / "claims" / "runs"
MEASURED = ROOT / "docs" / "claims" / "measured"


def _script(name: str):
    """scripts/NAME.py as a module (the claims scripts are not a package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the text rows whose runs are archived, and each arm's config from its name (the rows build them so)
def _heads_arm(vocab: int, arm: str):
    return text_config(vocab, n_heads=int(re.search(r"h=(\d+)", arm)[1]))


def _ffn_arm(vocab: int, arm: str):
    return text_config(vocab) if arm == "d_ff=4×" else text_config(vocab, d_ff=D_MODEL)  # no FFN: d_ff 1×'s config


def _pe_arm(vocab: int, arm: str):
    from glassformer.experiments.real_pe import pe_config

    return pe_config(vocab, arm, CharTextTask().seq_len)


def _norm_arm(vocab: int, arm: str):
    from glassformer.experiments.real_norm import DEPTH

    return text_config(vocab, n_layers=DEPTH, norm_position=arm.split("-LN")[0].lower())


ROWS = {"real-heads": _heads_arm, "dk-sweet-spot": _heads_arm, "real-ffn": _ffn_arm, "real-pe": _pe_arm,
        "real-norm": _norm_arm}


def _spec(row: str, ctx, arm: str):
    """The spec the row trains an arm with: the text rows' spec, except real-norm's (its own step count, and
    no warmup for the arms named so: the decay starts at the same step)."""
    if row != "real-norm":
        return text_spec(ctx)
    from glassformer.experiments.real_norm import spec

    s = spec(ctx)
    return dataclasses.replace(s, warmup=0, decay_from=s.warmup) if arm.endswith("no warmup") else s
# rows whose variants are an arm at one of several test lengths ("rope @ 256 (t ≥ 64)"), the longer windows
# scored past the training length only (text_task.beyond_batches)
BY_LENGTH = {"real-pe"}


def _arm_and_length(row: str, variant: str, L: int) -> tuple[str, str]:
    """The arm a published variant belongs to and the held-out length it was scored at."""
    if row not in BY_LENGTH:
        return variant, str(L)
    arm, length = variant.split(" @ ")
    return arm, length.split()[0]


def _evals(row: str, task) -> dict:
    """The row's held-out windows, built as text_task.run_arms builds them (the identity hashes them)."""
    from glassformer.experiments.text_task import beyond_batches

    L = task.seq_len
    evals = {str(L): task.batches(4, 32, seed=900 + L, length=L)}
    if row in BY_LENGTH:
        evals[str(4 * L)] = beyond_batches(task.batches(4, 32, seed=900 + 4 * L, length=4 * L), L)
    return evals
# an arm with a builder of its own (real-ffn's FFN-less model) is kept under an identity that also names the
# row and the run's key (Context.memo with share=False), so that no other row takes it for its config's run
OWN_BUILDER = {("real-ffn", "no FFN")}


def _identity(row: str, arm: str, identity: dict, key: str) -> dict:
    """`identity` as Context.memo keeps the run of `key` (the run's memo key) for this row and arm."""
    return {**identity, "built_by": f"{row}/{key}"} if (row, arm) in OWN_BUILDER else identity


def _digest(identity: dict) -> str:
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def _shared() -> dict[str, dict]:
    return {f.name: json.loads(f.read_text(encoding="utf-8")) for f in sorted(RUNS.glob("full.*.json"))}


def test_every_archived_run_is_filed_under_the_digest_of_its_identity():
    runs = _shared()
    assert runs, "docs/claims/runs/ holds no runs"
    for name, run in runs.items():
        assert name == f"full.{_digest(run['identity'])}.json", name
        numbers = [x for v in run["value"].values() for x in (v if isinstance(v, list) else [v])]
        assert numbers and all(isinstance(x, float) and math.isfinite(x) for x in numbers), name


def _chosen_rates(setup: str, arms: list[str]) -> dict[str, float]:
    """The peak rate the row printed for each arm ("Chosen peak rates: h=1 0.003, h=8 0.01, …")."""
    text = setup.split("Chosen peak rates:")[1].split(".\u0020")[0]
    return {arm: float(re.search(re.escape(arm) + r" ([0-9.e-]+)", text)[1].rstrip(".")) for arm in arms}


@pytest.mark.parametrize("row", [r for r in ROWS if (MEASURED / r / "results.json").exists()])
def test_each_published_value_is_the_archived_run_the_code_describes(row):
    """For every arm and seed on the page: the identity the code computes today (the row's config, the
    text rows' spec at the printed rate, the seed, the row's test windows) finds an archived run whose
    held-out loss is the published value, to the last digit; and where an arm's whole rate sweep is
    archived, base.choose_lr on those runs picks the printed rate."""
    [published] = json.loads((MEASURED / row / "results.json").read_text(encoding="utf-8"))
    task = CharTextTask()
    L = task.seq_len
    ctx = base.Context(quick=False, seeds=published["seeds"], out_dir=ROOT)
    evals = _evals(row, task)
    valid = {"valid": base.validation_batches(task, _spec(row, ctx, "").batch_size)}
    runs = _shared()
    arms = {v["name"]: _arm_and_length(row, v["name"], L) for v in published["variants"]}
    rates = _chosen_rates(published["setup"], sorted({arm for arm, _ in arms.values()}))
    swept = set()
    for variant in published["variants"]:
        arm, length = arms[variant["name"]]
        cfg = ROWS[row](task.vocab_size, arm)
        spec = _spec(row, ctx, arm)
        key = arm.replace(" ", "_")  # the arm's memo key (text_task.run_arms)
        for seed, value in zip(published["seeds"], variant["values"]):
            identity = base.run_identity(cfg, task, dataclasses.replace(spec, lr=rates[arm]), seed, evals)
            identity = _identity(row, arm, identity, f"{key}.s{seed}")
            run = runs.get(f"full.{_digest(identity)}.json")
            assert run is not None, f"{row} {arm} seed {seed}: no archived run has the identity the code computes"
            assert run["value"][length] == value, (row, variant["name"], seed)
        sweep = {}
        for lr in base.LR_GRID + base.LR_EXTEND_UP + base.LR_EXTEND_DOWN:
            identities = [_identity(row, arm, base.run_identity(cfg, task, dataclasses.replace(spec, lr=lr), s, valid),
                                    f"lr-sweep-valid.{key}.{lr:g}.s{s}") for s in base.SWEEP_SEEDS]
            found = [runs.get(f"full.{_digest(i)}.json") for i in identities]
            if all(found):
                sweep[str(lr)] = [r["value"]["loss"] for r in found]
        if all(str(lr) in sweep for lr in base.LR_GRID):
            swept.add(arm)
            assert float(base.choose_lr(sweep)) == rates[arm], (row, arm, sweep)
    if row in ("real-heads", "real-ffn", "real-pe", "real-norm"):  # measured with the archive: every arm's sweep is in it
        assert swept == {arm for arm, _ in arms.values()}


# ---- `glassformer ablate ROW --runs DIR`: a row rebuilt from archived runs trains nothing it finds there ----
def test_a_row_rebuilt_from_archived_runs_trains_none_of_them_and_equals_the_row_that_trained(tmp_path, monkeypatch):
    import shutil

    from typer.testing import CliRunner

    from glassformer.cli import app

    runner = CliRunner()
    trained, rebuilt, archive = tmp_path / "trained", tmp_path / "rebuilt", tmp_path / "archive"
    assert runner.invoke(app, ["ablate", "real-heads", "--quick", "--out", str(trained)]).exit_code == 0
    shutil.copytree(trained / "cache" / "runs" / base.SHARED, archive)

    def no_training(*args, **kwargs):
        raise AssertionError("a run in the archive was trained again")
    monkeypatch.setattr(base, "run_tagging", no_training)
    result = runner.invoke(app, ["ablate", "real-heads", "--quick", "--out", str(rebuilt), "--runs", str(archive)])
    assert result.exit_code == 0, result.output

    def values(out):
        [row] = json.loads((out / "results.json").read_text(encoding="utf-8"))
        return {v["name"]: v["values"] for v in row["variants"]}
    assert values(rebuilt) == values(trained)
    assert "--runs" in json.loads((rebuilt / "run.json").read_text(encoding="utf-8"))["command"]


@pytest.mark.parametrize("damage, needle", [
    ("identity", "holds another run than its name says"),
    ("truncate", "is not a finished run (JSONDecodeError)"),
    ("no-value", "is not a finished run (KeyError)"),
    ("missing-folder", "is not a folder; give one of finished runs"),
    ("empty-folder", "holds no finished runs (files named MODE.DIGEST.json"),
    ("other-files", "holds no finished runs (files named MODE.DIGEST.json"),
])
def test_a_damaged_archive_stops_with_one_line(damage, needle, tmp_path, monkeypatch, capsys):
    import shutil
    import sys

    from typer.testing import CliRunner

    from glassformer import cli
    from glassformer.cli import app

    archive = tmp_path / "archive"
    first = tmp_path / "first"
    assert CliRunner().invoke(app, ["ablate", "real-heads", "--quick", "--out", str(first)]).exit_code == 0
    shutil.copytree(first / "cache" / "runs" / base.SHARED, archive)
    victim = sorted(archive.iterdir())[0]
    kept = json.loads(victim.read_text(encoding="utf-8"))
    if damage == "identity":  # another run's numbers under this name
        kept["identity"]["seed"] += 1
        victim.write_text(json.dumps(kept), encoding="utf-8")
    elif damage == "truncate":
        victim.write_text(victim.read_text(encoding="utf-8")[:40], encoding="utf-8")
    elif damage == "no-value":
        victim.write_text(json.dumps({"identity": kept["identity"]}), encoding="utf-8")
    else:
        shutil.rmtree(archive)
        if damage != "missing-folder":  # a wrong path that exists: the row would train for hours unasked
            archive.mkdir()
            if damage == "other-files":
                (archive / "notes.txt").write_text("not a run", encoding="utf-8")
    monkeypatch.setattr(sys, "argv", ["glassformer", "ablate", "real-heads", "--quick", "--out",
                                      str(tmp_path / "again"), "--runs", str(archive)])
    with pytest.raises(SystemExit) as exit_:
        cli.main()
    assert exit_.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines[-1].startswith("error: ") and needle in lines[-1], lines


def test_a_finished_row_from_other_code_is_decided_again_from_its_still_valid_runs(tmp_path, monkeypatch):
    """The finished-row cache (OUT/cache/ROW.quick.2seeds.json) used to be returned whatever the code had
    become, so `make claims` after a row's redesign printed the old design. It is now kept with a digest
    of the experiments' code: other code decides the row again, from the single runs that are still the
    ones it asks for (here all of them: nothing trains)."""
    from typer.testing import CliRunner

    from glassformer.cli import app
    from glassformer.experiments import registry

    out = tmp_path / "out"
    runner = CliRunner()
    assert runner.invoke(app, ["ablate", "real-heads", "--quick", "--out", str(out)]).exit_code == 0
    again = runner.invoke(app, ["ablate", "real-heads", "--quick", "--out", str(out)])
    assert "cached:" in again.output

    def no_training(*args, **kwargs):
        raise AssertionError("a run whose identity did not change was trained again")
    monkeypatch.setattr(base, "run_tagging", no_training)
    monkeypatch.setattr(registry, "code_digest", lambda: "other code")
    third = runner.invoke(app, ["ablate", "real-heads", "--quick", "--out", str(out)])
    assert third.exit_code == 0, third.output
    assert "cached:" not in third.output and "code changed since" in third.output
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["cached"] == []


# ---- docs/claims/measured/ROW/run.json: the command's own record agrees with the seconds on the page ----
@pytest.mark.parametrize("row", sorted(p.parent.name for p in MEASURED.glob("*/run.json")))
def test_each_measured_folder_says_where_its_seconds_came_from(row):
    """The seconds a row shows on the page (results.json, summed into the page's budget) are the command's
    wall time in run.json, unless run.json says otherwise: the row came from a cache (`cached`, then the
    command's own seconds are only the assembly) or a note says how the row's seconds were summed from
    its runs (`seconds_note`, with the same seconds). A folder whose results were replaced and whose run.json
    was not (real-heads until 2026-12-06: 1,365 s of a d_model-64 run beside 7,204 s) fails."""
    run = json.loads((MEASURED / row / "run.json").read_text(encoding="utf-8"))
    [published] = json.loads((MEASURED / row / "results.json").read_text(encoding="utf-8"))
    if row in run.get("cached", []):
        return
    if "seconds_note" in run:
        assert run["seconds"] == published["seconds"] and len(run["seconds_note"]) > 40
        return
    assert run["seconds"] == pytest.approx(published["seconds"], abs=1.0), (run["seconds"], published["seconds"])
    assert row in run["command"]


def test_the_merge_script_writes_the_same_seconds_and_the_note_into_both_files(tmp_path):
    """scripts/claims_merge_row.py, the way a re-measured row reaches docs/claims/measured/: results.json and
    run.json both get the row's seconds and run.json the note (stop 55's hand-written merge built the note
    and never wrote run.json); an OUT folder of another row stops with one line."""
    import shutil

    script = _script("claims_merge_row")
    out = tmp_path / "out"
    shutil.copytree(MEASURED / "real-ffn", out)
    note = "one-core seconds of the runs only this row needs, summed from the cached runs' file times"
    folder = script.merge("real-ffn", out, 1234.0, note, tmp_path / "measured")
    [row] = json.loads((folder / "results.json").read_text(encoding="utf-8"))
    run = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    assert row["seconds"] == run["seconds"] == 1234.0 and run["seconds_note"] == note
    with pytest.raises(SystemExit, match="not the row 'real-pe'"):
        script.merge("real-pe", out, 1.0, note, tmp_path / "measured")


def test_ablate_reverse_keeps_the_rows_order_and_says_so_and_fresh_is_refused_beside_the_cache_flags(
        tmp_path):
    """`--reverse` changes only which run trains first: the row lists its arms in their own order, the
    command it was made by is in run.json, and with --fresh (no cache to share) it is refused, as --runs is
    (--fresh never reads it). `--jobs 2` on one row says that it keeps one core and how to use the second."""
    from typer.testing import CliRunner

    from glassformer.cli import app
    from glassformer.experiments import real_heads

    out = tmp_path / "out"
    runner = CliRunner()
    result = runner.invoke(app, ["ablate", "real-heads", "--quick", "--seeds", "2", "--out", str(out), "--reverse",
                                 "--jobs", "2"])
    assert result.exit_code == 0, result.output
    assert "is one row, trained one run at a time; for a second core start" in result.output
    [row] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert [v["name"] for v in row["variants"]] == [f"h={h}" for h in real_heads.HEADS]
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["command"].endswith("--reverse")
    refused = runner.invoke(app, ["ablate", "real-heads", "--quick", "--out", str(tmp_path / "b"), "--reverse",
                                  "--fresh"])
    # the app raises the user's error; cli.main prints it as one line with exit 2 (test_cli_arguments)
    assert refused.exit_code != 0 and "--reverse shares a row's runs" in str(refused.exception)
    assert not (tmp_path / "b").exists()
    # the same class: --runs with --fresh, whose cache-less runs never read the archive (trained every run)
    archive = out / "cache" / "runs" / "shared"
    refused = runner.invoke(app, ["ablate", "real-heads", "--quick", "--out", str(tmp_path / "c"), "--runs",
                                  str(archive), "--fresh"])
    assert refused.exit_code != 0 and "--runs takes finished runs" in str(refused.exception)
    assert not (tmp_path / "c").exists()


def test_the_merge_script_sums_the_seconds_the_rows_own_runs_kept(tmp_path, monkeypatch):
    """Without --seconds the merge sums each run's own time (Context.memo keeps it when the run trains): two
    runs trained here (3.5 s and 7.5 s on a faked clock) count, and one this row trained in an earlier session,
    taken back from the archive with its time (40 s); a run from the archive with no row or time, the sweep's
    summary file and a run another row trained into the same cache do not; a run that trained but kept no
    time (older code) asks for --seconds."""
    script = _script("claims_merge_row")
    clock = iter([0.0, 3.5, 10.0, 17.5, 20.0, 21.0, 30.0, 90.0])
    monkeypatch.setattr(base.time, "perf_counter", lambda: next(clock))
    archive = tmp_path / "archive"
    archive.mkdir()
    reused = {"identity": {"run": "archived"}, "value": {"loss": 2.0}}
    (archive / f"full.{_digest(reused['identity'])}.json").write_text(json.dumps(reused), encoding="utf-8")
    # a run this row trained in an earlier session (its process ended; the run was archived with its time)
    earlier = {"identity": {"run": "earlier"}, "value": {"loss": 1.5}, "seconds": 40.0, "threads": 1, "row": "real-pe"}
    (archive / f"full.{_digest(earlier['identity'])}.json").write_text(json.dumps(earlier), encoding="utf-8")
    out = tmp_path / "out"
    ctx = base.Context(quick=False, seeds=[0, 1], out_dir=out, log=lambda s: None,
                       memo_dir=out / "cache" / "runs" / "real-pe", archive=archive)
    ctx.memo("rope.s0", lambda: {"loss": 1.0}, {"run": 0})
    ctx.memo("lr-sweep-valid.rope.0.01.s1000", lambda: {"loss": 1.1}, {"run": 1})
    ctx.memo("rope.s1", lambda: pytest.fail("trained"), reused["identity"])
    ctx.memo("rope.s3", lambda: pytest.fail("trained"), earlier["identity"])
    ctx.memo("lr-sweep-valid.rope", lambda: {"0.01": [1.1]}, {"sweep": "rope"})  # a summary, not a run
    other = base.Context(quick=False, seeds=[0], out_dir=out, log=lambda s: None,
                         memo_dir=out / "cache" / "runs" / "real-heads")
    other.memo("h=8.s2", lambda: {"loss": 0.5}, {"run": 2})  # 60 s, trained by real-heads
    ctx.memo("sinusoidal.s2", lambda: pytest.fail("trained"), {"run": 2})
    seconds, note = script.run_seconds("real-pe", out, archive)
    assert seconds == 3.5 + 7.5 + 40.0  # the earlier session's run counts: it is this row's, and timed
    assert "the 3 runs this row trained" in note and "2 runs taken from the archive" in note
    for f in (out / "cache" / "runs" / "shared").glob("*.json"):  # as runs trained before times were kept
        kept = json.loads(f.read_text(encoding="utf-8"))
        kept.pop("seconds", None)
        f.write_text(json.dumps(kept), encoding="utf-8")
    (out / "cache" / "runs" / "shared" / f"full.{_digest({'run': 0})}.json").unlink()
    with pytest.raises(SystemExit, match="kept no time"):
        script.run_seconds("real-pe", out, archive)


def test_the_merge_script_counts_the_runs_of_a_whole_sweep_taken_from_the_archive(tmp_path):
    """A row resumed in a later session finds an arm's whole learning-rate sweep in the archive, as one
    summary file, and never opens that sweep's runs: their times are counted from the runs' own files
    (found from the summary's identity), not the summary's (one process's wall time), nor left out."""
    script = _script("claims_merge_row")
    archive = tmp_path / "archive"
    archive.mkdir()
    arm = {"config": {"n_layers": 4}, "spec": {"lr": 0.0, "steps": 30}, "task": "text", "seed": -1, "evals": "ab"}
    grid = {"0.001": [2.0, 2.1], "0.01": [1.8, 1.9]}
    summary = {"identity": {"sweep_of": arm, "grid": [[0.001, 0.01], [], []], "seeds": [1000, 1001]},
               "value": grid, "seconds": 999.0, "threads": 1, "row": "real-norm"}

    def file(kept):
        (archive / f"full.{_digest(kept['identity'])}.json").write_text(json.dumps(kept), encoding="utf-8")
    file(summary)
    own = [{**arm, "spec": {**arm["spec"], "lr": float(lr)}, "seed": s} for lr in grid for s in (1000, 1001)]
    for i, identity in enumerate(own):
        file({"identity": identity, "value": {"loss": 2.0}, "seconds": 10.0 * (i + 1), "threads": 1,
              "row": "real-norm"})
    out = tmp_path / "out"
    ctx = base.Context(quick=False, seeds=[0], out_dir=out, log=lambda s: None,
                       memo_dir=out / "cache" / "runs" / "real-norm", archive=archive)
    assert ctx.memo("lr-sweep-valid.Pre-LN", lambda: pytest.fail("swept"), summary["identity"]) == grid
    seconds, note = script.run_seconds("real-norm", out, archive)
    assert seconds == 10.0 + 20.0 + 30.0 + 40.0, note
    assert "the 4 runs this row trained" in note
    (archive / f"full.{_digest(own[0])}.json").unlink()  # a run of the sweep that the archive lacks
    with pytest.raises(SystemExit, match="kept no time"):
        script.run_seconds("real-norm", out, archive)


@pytest.mark.parametrize("gate, kept", [("met: under the 4-gram", False), ("failed: above the 4-gram", True)])
def test_the_status_stops_naming_a_row_under_its_old_design_once_it_meets_its_gate(gate, kept):
    """The page's status sentence "Still measured under the old designs …" loses a row re-measured past its
    gate, and goes whole when that row was the last it named (it outlived `real-norm`'s rerun once)."""
    script = _script("claims_redecide")
    sentence = (" Still measured under the old designs, and said so in their gates or notes: `real-norm` (the text "
                "rows: stopped above the character 4-gram, quality gate).")
    base_status = "## Status of this page\n\nRegenerated." + sentence
    row = {"id": "real-norm", "gate": gate, "setup": "peak rate per arm", "seconds": 10.0}
    status = script.swept_status(base_status, [row], {"real-norm"})
    assert (sentence in status) == kept
    assert status.startswith("## Status of this page\n\nRegenerated.")
