"""bench/batching_train.py, the A/B harness of docs/real-data.md ("Batches that mix lengths"): its
sort key mixes lengths within a multiple of Q and no further, and it still reaches the trainer."""

from __future__ import annotations

import importlib.util
import random
import subprocess
import sys
from pathlib import Path

from glassformer.train.batching import epoch_batches

HARNESS = Path(__file__).resolve().parents[1] / "bench" / "batching_train.py"
spec = importlib.util.spec_from_file_location("bench_batching_train", HARNESS)
harness = importlib.util.module_from_spec(spec)
spec.loader.exec_module(harness)


def test_a_quantum_mixes_lengths_within_one_multiple_and_no_further():
    rng = random.Random(0)
    pairs = [([5] * rng.randint(1, 20), [6] * rng.randint(1, 20)) for _ in range(4000)]
    q = 4
    batches = epoch_batches([harness.quantized_key(q)(e) for e in pairs], 32, seed=0, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(4000))
    mixed = 0
    for b in batches:
        src = {len(pairs[i][0]) for i in b}
        # a pool is sorted by (⌈src/q⌉, ⌈tgt/q⌉): a batch's sources may straddle a key boundary where
        # two keys meet inside it, so check by hand against the rounding rule: at most two multiples
        assert len({-(-n // q) for n in src}) <= 2
        mixed += len(src) > 1
    assert mixed > 0.9 * len(batches)  # within a multiple the lengths stay in shuffled order
    exact = epoch_batches([tuple(len(p) for p in e) for e in pairs], 32, seed=0, epoch=0)
    assert sum(len({len(pairs[i][0]) for i in b}) for b in exact) < \
        sum(len({len(pairs[i][0]) for i in b}) for b in batches)
    assert harness.quantized_key(1)(pairs[0]) == tuple(len(p) for p in pairs[0])  # Q = 1: bucket_key


def test_the_harness_refuses_a_bad_pool_in_one_line(tmp_path):
    r = subprocess.run([sys.executable, str(HARNESS), "--pool", "0", "train"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "--pool and --quantum are whole numbers >= 1" in r.stderr
    assert "Traceback" not in r.stderr and list(tmp_path.iterdir()) == []


def test_the_harness_still_reaches_the_trainer(tmp_path):
    """Its asserts on train/batching.py's pool default and train/loop.py's sort key hold (a change to
    either fails here, not silently in a benchmark), and a run trains with the patched batching."""
    rng = random.Random(1)
    lines = ["".join(rng.choice("abcdef") for _ in range(rng.randint(1, 9))) for _ in range(300)]
    data = tmp_path / "rev.tsv"
    data.write_text("".join(f"{w}\t{' '.join(reversed(w))}\n" for w in lines), encoding="utf-8")
    r = subprocess.run([sys.executable, str(HARNESS), "--quantum", "4", "train", "--task", "tsv", "--data",
                        str(data), "--out", str(tmp_path / "run"), "--max-steps", "3", "--threads", "1", "--quiet"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    assert "stopped after 3 steps" in r.stdout + r.stderr
    assert (tmp_path / "run" / "best" / "model.safetensors").is_file()
