"""Weights written by DDP's broadcast and by FSDP's sharded fused-AdamW steps are the weights every
evaluation after them reads (nn/prepared.py, issue 27); tests/prepared_distributed_worker.py runs
2 gloo workers under torchrun and compares each with a fresh model given the full state dict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "prepared_distributed_worker.py"


@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_evaluation_after_distributed_updates_reads_the_new_weights(mode, tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    out = tmp_path / "diffs.json"
    proc = subprocess.run(torchrun + [str(WORKER), mode, str(out)], env=env, capture_output=True, text=True,
                          timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    diffs = json.loads(out.read_text())
    assert len(diffs) == (2 * 2 + 2 + 2 * 2 if mode == "ddp" else 2)
    assert all(v == 0.0 for v in diffs.values()), diffs
