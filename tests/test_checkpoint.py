"""Checkpoints: round trip, tied tensors stored once, atomic writes under kill -9, clear errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from safetensors import safe_open

from glassformer.config import ModelConfig
from glassformer.errors import InputError
from glassformer.nn import build_model
from glassformer.tokenize import build_tokenizer
from glassformer.train.checkpoint import load_checkpoint, load_train_state, save_checkpoint

SMALL = dict(arch="encoder-decoder", vocab_size=12, d_model=16, n_heads=2, n_layers=1, d_ff=32,
             pad_id=0, bos_id=1, eos_id=2)


def _tokenizers():
    src = build_tokenizer("jieba", ["猫 吃 鱼", "你 爱 我"])
    tgt = build_tokenizer("word", ["the cat eats the fish", "you love me"])
    return {"src": src, "tgt": tgt}


def test_round_trip_gives_identical_outputs_and_tokenizers(tmp_path):
    torch.manual_seed(0)
    cfg = ModelConfig(**SMALL)
    model = build_model(cfg).eval()
    toks = _tokenizers()
    save_checkpoint(tmp_path / "ck", model, cfg, toks, meta={"task": "zh-en", "step": 7})
    ck = load_checkpoint(tmp_path / "ck")
    src, tgt = torch.tensor([[4, 5, 6, 7]]), torch.tensor([[1, 8, 9]])
    with torch.no_grad():
        assert torch.equal(ck.model(src, tgt), model(src, tgt))
    assert ck.config == cfg and not ck.model.training
    assert ck.meta["step"] == 7 and ck.meta["task"] == "zh-en"
    assert ck.src_tokenizer.encode("猫吃鱼") == toks["src"].encode("猫 吃 鱼")
    assert ck.tgt_tokenizer.decode(toks["tgt"].encode("you love me")) == "you love me"


def test_shared_embedding_is_stored_once_and_stays_shared(tmp_path):
    cfg = ModelConfig(**SMALL)  # share_embeddings and tie_embeddings: one table for three roles
    model = build_model(cfg)
    save_checkpoint(tmp_path / "ck", model, cfg)
    with safe_open(str(tmp_path / "ck" / "model.safetensors"), "pt") as f:
        names = set(f.keys())
    assert len({"embed.W_E", "dec_embed.W_E"} & names) == 1
    loaded = load_checkpoint(tmp_path / "ck").model
    assert loaded.embed.W_E is loaded.dec_embed.W_E  # still one Parameter after loading
    assert torch.equal(loaded.embed.W_E, model.embed.W_E)


def test_a_run_folder_resolves_to_best_then_checkpoint(tmp_path):
    cfg = ModelConfig(**SMALL)
    save_checkpoint(tmp_path / "run" / "checkpoint", build_model(cfg), cfg, meta={"step": 2})
    assert load_checkpoint(tmp_path / "run").meta["step"] == 2
    save_checkpoint(tmp_path / "run" / "best", build_model(cfg), cfg, meta={"step": 1})
    assert load_checkpoint(tmp_path / "run").meta["step"] == 1


@pytest.mark.parametrize("damage, words", [
    (lambda d: None, "does not exist"),
    (lambda d: d.mkdir(), "not a glassformer checkpoint"),
])
def test_missing_or_foreign_folder_is_one_line(tmp_path, damage, words):
    target = tmp_path / "x"
    damage(target)
    with pytest.raises(InputError) as e:
        load_checkpoint(target)
    assert words in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("name, content", [
    ("model.safetensors", b"\x00\x01garbage"),
    ("config.json", b"{not json"),
    ("config.json", json.dumps({"d_model": 10, "n_heads": 3}).encode()),
])
def test_corrupt_files_are_one_line(tmp_path, name, content):
    cfg = ModelConfig(**SMALL)
    save_checkpoint(tmp_path / "ck", build_model(cfg), cfg)
    (tmp_path / "ck" / name).write_bytes(content)
    with pytest.raises(InputError) as e:
        load_checkpoint(tmp_path / "ck")
    assert "\n" not in str(e.value) and str(tmp_path / "ck") in str(e.value)


def test_interrupted_swap_is_recovered(tmp_path):
    """A kill between 'rename old aside' and 'rename new in' leaves only .NAME.old: still loadable."""
    cfg = ModelConfig(**SMALL)
    save_checkpoint(tmp_path / "ck", build_model(cfg), cfg, meta={"step": 1})
    os.rename(tmp_path / "ck", tmp_path / ".ck.old")
    assert load_checkpoint(tmp_path / "ck").meta["step"] == 1
    save_checkpoint(tmp_path / "ck", build_model(cfg), cfg, meta={"step": 2})
    assert load_checkpoint(tmp_path / "ck").meta["step"] == 2
    assert not (tmp_path / ".ck.old").exists()


WRITER = r"""
import sys, torch
from glassformer.config import ModelConfig
from glassformer.nn import build_model
from glassformer.train.checkpoint import save_checkpoint
cfg = ModelConfig(arch="encoder-decoder", vocab_size=2000, d_model=128, n_heads=4, n_layers=2, d_ff=512)
model = build_model(cfg)
state = {"blob": torch.zeros(1_000_000)}
for version in range(1, 10**6):
    with torch.no_grad():
        for p in model.parameters():
            p.fill_(version)
    state["blob"].fill_(version)
    print("writing", version, flush=True)
    save_checkpoint(sys.argv[1], model, cfg, None, state, {"step": version})
"""


def test_kill_9_during_write_leaves_a_complete_checkpoint(tmp_path):
    """SIGKILL a process that rewrites a ~10 MB checkpoint in a loop; every survivor is consistent."""
    target = tmp_path / "ck"
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    mid_write = 0
    # a loaded machine can deliver the kill between two saves: try more delays until one lands inside
    for delay in (0.0, 0.03, 0.01, 0.06, 0.002, 0.1, 0.02, 0.15):
        if mid_write >= 2:
            break
        proc = subprocess.Popen([sys.executable, str(script), str(target)], stdout=subprocess.PIPE, text=True)
        try:
            while True:  # let at least one full save finish, then kill during the next one
                line = proc.stdout.readline()
                assert line, "writer died"
                if int(line.split()[1]) >= 2:
                    break
            time.sleep(delay)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait()
        mid_write += any(p.name.startswith(".ck.tmp-") for p in tmp_path.iterdir())
        ck = load_checkpoint(target)
        step = ck.meta["step"]
        assert step >= 1
        for p in ck.model.parameters():  # weights, meta and state all from the same save
            assert torch.all(p == step)
        assert torch.all(load_train_state(target)["blob"] == step)
    assert mid_write >= 1  # at least one kill landed inside a save
    save_checkpoint(target, build_model(ModelConfig(**SMALL)), ModelConfig(**SMALL), meta={"step": 0})
    assert load_checkpoint(target).meta["step"] == 0  # writable again after the kills
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck", "writer.py"]  # half-written folders cleared
