"""DistributedDataParallel via torchrun: 2 gloo workers follow the loss of 1 process (issue 7 §3).

Reference: one ordinary process training on the same global batch (2 × 8 sequences). The
workers split each global batch, DDP averages their gradients, and the logged loss — the mean over
all tokens of the global batch — must match the single process to 1e-5 relative at every step.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from glassformer.train.batching import BatchStream
from glassformer.train.distributed import ShardedBatchStream

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "ddp_worker.py"


def _train_losses(run: Path) -> list[float]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r["loss"] for r in rows if r["split"] == "train"]


def test_two_workers_follow_one_process(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    subprocess.run([sys.executable, str(WORKER), str(tmp_path / "one"), "16"], check=True, env=env,
                   capture_output=True, timeout=120)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    proc = subprocess.run(torchrun + [str(WORKER), str(tmp_path / "two"), "8"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    one, two = _train_losses(tmp_path / "one"), _train_losses(tmp_path / "two")
    assert len(one) == len(two) == 10  # rank 0 alone logs: one line per step, not two
    assert one[-1] < one[0] - 0.5  # it trained, so the check covers ten different updates
    for step, (a, b) in enumerate(zip(one, two), 1):
        assert abs(a - b) <= 1e-5 * abs(a), f"step {step}: 1 process {a}, 2 workers {b}"
    assert (tmp_path / "two" / "best" / "model.safetensors").is_file()  # rank 0 wrote the checkpoint


def test_workers_decide_dropout_together_from_the_global_rate(tmp_path):
    """The dropout rule (train/dropout_rule.py) under torchrun: both workers decide at the same step, on
    the examples of all workers (2 × 8 a step), and the run goes on to its end (no worker left waiting)."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"))
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
    proc = subprocess.run(torchrun + [str(WORKER), str(tmp_path / "two"), "8", "rule"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "two" / "metrics.jsonl").read_text().splitlines()]
    [d] = [r for r in rows if r["split"] == "dropout"]
    assert d["dropout"] == 0.1 and d["step"] >= 1
    assert d["examples_per_minute"] * d["seconds"] / 60 == pytest.approx(16 * d["step"])  # the global count
    from glassformer.train import load_checkpoint
    assert load_checkpoint(tmp_path / "two" / "checkpoint").config.dropout == 0.1


def test_workers_split_each_global_batch_without_overlap():
    lengths = [3 + (i * 7) % 11 for i in range(203)]
    whole = BatchStream(lengths, 12, seed=5)  # what one process draws with the global batch
    shards = [ShardedBatchStream(lengths, 4, seed=5, rank=r, world=3) for r in range(3)]
    for _ in range(40):  # past an epoch boundary (203 / 12 ≈ 17 batches per epoch)
        parts = [s.next() for s in shards]
        glob = whole.next()
        while len(glob) < 3:  # a tail batch too small to share is skipped by the workers
            glob = whole.next()
        assert sorted(i for p in parts for i in p) == sorted(glob)
        assert len({i for p in parts for i in p}) == len(glob)  # no example done twice
