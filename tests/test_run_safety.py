"""Nothing executed, nothing lost: the train state format, planted pickles, run folders, Ctrl-C."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import torch

from glassformer.errors import InputError
from glassformer.train.checkpoint import load_train_state, save_checkpoint
from glassformer.train.loop import build_optimizer, rng_state
from glassformer.train.train_state import read_state
from test_cli_misuse import _fake_run
from test_cli_train import TINY_FLAGS, run


class Payload:
    """What an attacker plants in a pickle: unpickling it would create `marker`."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _real_state():
    """A state as the loop writes it: AdamW moments (int keys), RNG states (numpy, tuples), numbers."""
    model = torch.nn.Linear(3, 2)
    opt = build_optimizer(model, type("C", (), {"weight_decay": 0.01, "beta1": 0.9, "beta2": 0.98, "eps": 1e-9}))
    model(torch.randn(4, 3)).sum().backward()
    opt.step()
    random.random(), np.random.rand()
    return {"optimizer": opt.state_dict(), "rng": rng_state(), "step": 7, "best_score": (0.5, -1.25),
            "best_metrics": {"loss": 1.5}, "stream": {"epoch": 1, "index": 3}, "nan": float("nan")}


def _same(a, b) -> bool:
    """Structural equality checked independently of the codec: types, tensors, arrays, NaN."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    return type(a) is type(b) and a == b


def test_state_round_trips_without_pickle(tmp_path):
    state = _real_state()
    save_checkpoint(tmp_path / "ck", torch.nn.Linear(1, 1), _tiny_config(), state=state)
    names = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert "train_state.pt" not in names and {"train_state.json", "train_state.safetensors"} <= set(names)
    back = load_train_state(tmp_path / "ck")
    assert _same(state, back)
    random.setstate(back["rng"]["python"])  # the restored RNG states are accepted by their libraries
    np.random.set_state(back["rng"]["numpy"])
    torch.set_rng_state(back["rng"]["torch"])


def _tiny_config():
    from glassformer import ModelConfig
    return ModelConfig(arch="encoder", vocab_size=8, d_model=4, n_heads=1, n_layers=1, d_ff=8)


def test_an_older_pickled_state_is_still_read(tmp_path):
    """train_state.pt as glassformer wrote it before (torch.save): read with weights_only=True."""
    folder = tmp_path / "old"
    folder.mkdir()
    state = _real_state()
    torch.save(state, folder / "train_state.pt")
    trusted = torch.load(folder / "train_state.pt", weights_only=False)  # the reference: our own file
    assert _same(trusted, read_state(folder))


def test_a_planted_pickle_payload_is_refused_and_never_runs(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "shared_run"
    _fake_run(run_dir, "encoder-decoder", "reverse")
    marker = tmp_path / "PWNED"
    torch.save({"step": 1, "optimizer": Payload(marker)}, run_dir / "checkpoint" / "train_state.pt")
    torch.load(run_dir / "checkpoint" / "train_state.pt", weights_only=False)  # the old way of reading...
    assert marker.exists()  # ...runs the payload: it is live
    marker.unlink()
    code, out, err = run(monkeypatch, capsys, "train", "--out", str(run_dir), "--resume")
    assert code == 2 and err.count("\n") == 1 and "asks to run code" in err and "(io.open)" in err, err
    assert not marker.exists()  # ...and nothing in it ran
    with pytest.raises(InputError, match="asks to run code"):
        load_train_state(run_dir / "checkpoint")
    assert not marker.exists()


def test_a_state_missing_keys_is_one_line(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "r"
    _fake_run(run_dir, "encoder-decoder", "reverse")
    save_checkpoint(run_dir / "checkpoint", *_model_and_config(run_dir), state={"step": 3},
                    meta=json.loads((run_dir / "checkpoint" / "meta.json").read_text()))
    code, _, err = run(monkeypatch, capsys, "train", "--out", str(run_dir), "--resume")
    assert code == 2 and err.count("\n") == 1 and "lacks optimizer" in err, err


def _model_and_config(run_dir):
    from glassformer.train.checkpoint import load_checkpoint
    ck = load_checkpoint(run_dir / "checkpoint")
    return ck.model, ck.config, {"src": ck.src_tokenizer, "tgt": ck.tgt_tokenizer}


def test_a_corrupt_state_json_is_one_line(tmp_path):
    save_checkpoint(tmp_path / "ck", torch.nn.Linear(1, 1), _tiny_config(), state={"step": torch.ones(2)})
    doc = json.loads((tmp_path / "ck" / "train_state.json").read_text())
    doc["state"]["step"] = {"__tensor__": "t99"}
    (tmp_path / "ck" / "train_state.json").write_text(json.dumps(doc))
    with pytest.raises(InputError, match="names tensor 't99'"):
        load_train_state(tmp_path / "ck")


# ---- run folders: never replaced without --force; --resume only by the same run ----
RUN = ["train", "--task", "reverse", "--max-steps", "4", "--eval-every", "4", "--eval-size", "8", *TINY_FLAGS]


def test_an_existing_run_is_refused_before_the_auto_recipe_probes(tmp_path, monkeypatch, capsys):
    """The refusal comes first: the recipe's speed probe and baselines are seconds a user would wait
    only to be told to add --force."""
    from glassformer.train import recipe
    out = tmp_path / "run"
    assert run(monkeypatch, capsys, *RUN, "--out", str(out))[0] == 0
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{i}\t{i + 1}\n" for i in range(40)), encoding="utf-8")
    probed = []
    monkeypatch.setattr(recipe, "measure_tokens_per_minute", lambda *a, **k: probed.append(1) or 1e6)
    code, _, err = run(monkeypatch, capsys, "train", "--task", "tsv", "--data", str(data), "--max-minutes", "1",
                       "--out", str(out))
    assert code == 2 and "already holds a training run" in err and probed == []


def test_an_existing_run_is_kept_unless_force(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    assert run(monkeypatch, capsys, *RUN, "--out", str(out))[0] == 0
    before = (out / "best" / "model.safetensors").read_bytes(), (out / "metrics.jsonl").read_text()
    code, _, err = run(monkeypatch, capsys, *RUN, "--out", str(out), "--seed", "9")
    assert code == 2 and "already holds a training run" in err and "--force" in err
    assert ((out / "best" / "model.safetensors").read_bytes(), (out / "metrics.jsonl").read_text()) == before
    code, _, err = run(monkeypatch, capsys, *RUN, "--out", str(out), "--seed", "9", "--force")
    assert code == 0, err
    assert (out / "best" / "model.safetensors").read_bytes() != before[0]  # replaced, as asked


def test_resume_refuses_changed_data(tmp_path, monkeypatch, capsys):
    data = tmp_path / "pairs.tsv"
    data.write_text("".join(f"{i} {i + 1}\t{i + 1} {i}\n" for i in range(40)), encoding="utf-8")
    out = tmp_path / "run"
    args = ["train", "--task", "tsv", "--data", str(data), "--tokenizer", "word", "--max-steps", "2",
            "--eval-every", "2", "--eval-size", "4", "--out", str(out), *TINY_FLAGS]
    assert run(monkeypatch, capsys, *args)[0] == 0
    data.write_text(data.read_text() + "9 9\t9 9\n", encoding="utf-8")
    code, _, err = run(monkeypatch, capsys, "train", "--out", str(out), "--resume", "--max-steps", "4")
    assert code == 2 and err.count("\n") == 1 and "has changed since" in err, err


INTERRUPTED = """
import sys
from glassformer.cli import main
sys.argv = ["glassformer", *sys.argv[1:]]
main()
"""


def test_ctrl_c_saves_and_prints_the_resume_command(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run"
    script = tmp_path / "cli.py"
    script.write_text(INTERRUPTED)
    args = ["train", "--task", "reverse", "--out", str(out), "--max-steps", "100000", "--eval-every", "100000",
            "--eval-size", "8", *TINY_FLAGS]
    proc = subprocess.Popen([sys.executable, str(script), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 120
        while not (out / "metrics.jsonl").exists() or not (out / "metrics.jsonl").read_text().strip():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("interrupted: stopped at step "), stderr
    command = lines[0].split("continue with: ")[1]
    assert command == f"glassformer train --task reverse --out {out} --resume"
    step = int(lines[0].split("step ")[1].split(";")[0])
    assert step >= 10 and load_train_state(out / "checkpoint")["step"] == step
    code, stdout, err = run(monkeypatch, capsys, *command.split()[1:], "--max-steps", str(step + 2), "--quiet")
    assert code == 0, err
    assert f"stopped after {step + 2} steps" in stdout


def test_nan_weights_are_refused_on_load(tmp_path):
    from glassformer.nn import build_model
    from glassformer.train.checkpoint import load_checkpoint
    cfg = _tiny_config()
    model = build_model(cfg)
    with torch.no_grad():
        model.enc[0].ffn.W_1[0, 0] = float("nan")
    save_checkpoint(tmp_path / "ck", model, cfg, meta={})
    with pytest.raises(InputError, match="NaN or infinite"):
        load_checkpoint(tmp_path / "ck")


def test_learned_positions_end_generation_instead_of_failing():
    """generate() with a 6-row learned table: a 2-token prompt gets at most 4 new tokens, no error."""
    from glassformer import ModelConfig
    from glassformer.generate import generate
    from glassformer.nn import build_model
    model = build_model(ModelConfig(arch="decoder", vocab_size=9, d_model=8, n_heads=2, n_layers=1, d_ff=16,
                                    pe="learned", max_len=6)).eval()
    out = generate(model, torch.tensor([[1, 2]]), max_new_tokens=50)
    assert out.shape == (1, 6)
    ref = torch.tensor([[1, 2]])
    for _ in range(4):  # the same tokens by full recompute, one argmax at a time
        ref = torch.cat([ref, model(ref)[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, ref)


def test_a_shape_mismatch_names_the_tensor(tmp_path):
    from glassformer.nn import build_model
    from glassformer.train.checkpoint import load_checkpoint
    cfg = _tiny_config()
    save_checkpoint(tmp_path / "ck", build_model(cfg), cfg, meta={})
    (tmp_path / "ck" / "config.json").write_text(cfg.replace(d_ff=12).to_json())
    with pytest.raises(InputError, match=r"W_1 has shape \[4, 8\] in the weights but \[4, 12\]"):
        load_checkpoint(tmp_path / "ck")


def test_sigterm_and_sigint_only_raise_the_flag_until_the_second():
    from glassformer.train.run_folder import GracefulInterrupt, TrainingInterrupted
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    for signum in (signal.SIGTERM, signal.SIGINT):
        with GracefulInterrupt() as stop:
            signal.raise_signal(signum)  # the process survives: only the flag goes up
            assert stop.requested and stop.signum == signum
            assert signal.getsignal(signum) == before[0 if signum == signal.SIGTERM else 1]  # a 2nd acts at once
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before
    assert TrainingInterrupted("x", signal.SIGTERM).exit_code == 143


def test_damaged_state_files_are_called_corrupt_not_malicious(tmp_path):
    """Random bytes, a truncated pickle, an empty file, a zip header with garbage: each is refused as
    corrupt in one line; only a pickle that names code is called an attempt to run code (issue 31)."""
    import os
    import pickle
    import random
    rng = random.Random(0)
    folder = tmp_path / "state"
    folder.mkdir()
    good = pickle.dumps({"step": 3, "rng": list(range(50))}, protocol=2)
    damaged = [b"", good[: len(good) // 2], b"PK\x03\x04" + os.urandom(500)]
    damaged += [bytes(rng.getrandbits(8) for _ in range(2_000)) for _ in range(20)]
    damaged += [b"\x80\x02" + bytes(rng.getrandbits(8) for _ in range(2_000)) for _ in range(20)]  # pickle-like
    for data in damaged:
        (folder / "train_state.pt").write_bytes(data)
        with pytest.raises(InputError) as e:
            read_state(folder)
        assert "corrupt" in str(e.value) and "run code" not in str(e.value) and "\n" not in str(e.value)
