"""bench/decode_overhead.py (issue 29 §2): the thin model keeps the benchmark's depth and vocabulary at
width 16, and the --quick run prints one row per model and thread count whose parts add up."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import decode_overhead  # noqa: E402

from glassformer.bench.peer import FULL  # noqa: E402


def test_thin_model_is_the_benchmark_model_at_width_16():
    mt, lm = decode_overhead.thin(FULL, "translator"), decode_overhead.thin(FULL, "lm")
    assert mt["marian"] == {"d_model": 16, "layers": 6, "heads": 2, "ffn": 64, "vocab": 8000}
    assert lm["gpt2"] == {"n_embd": 16, "n_layer": 6, "n_head": 2, "vocab": 8000}
    assert FULL["marian"]["d_model"] == 512 and FULL["gpt2"]["n_embd"] == 384  # the benchmark itself untouched


def test_quick_run_prints_a_row_per_model_and_thread_count():
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "decode_overhead.py"), "--quick", "--repeats", "1"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    rows = [line.strip("|").split("|") for line in out.splitlines() if line.startswith("| translator") or
            line.startswith("| lm")]
    assert [(r[0].strip(), int(r[1])) for r in rows] == [("translator", 1), ("translator", 2), ("lm", 1), ("lm", 2)]
    for r in rows:
        wall, gemm, rest, per = (float(x) for x in r[2:6])
        # wall and GEMM times come from separate timed runs: on a loaded machine either can be the
        # larger, so only the arithmetic is checked (no timing assertion)
        assert wall > 0 and gemm > 0 and abs(wall - gemm - rest) <= 0.0016  # each printed to 0.001
        layers = 1 if r[0].strip() == "translator" else 2  # QUICK: 1 decoder layer, 2 LM layers
        assert abs(rest / layers - per) <= 0.0011


def test_cpu_clock_and_least_disturbed_runs_on_a_shared_machine():
    """--clock cpu --stat min --threads 1: one row per model; outside = the least-disturbed timed run
    minus the least-disturbed GEMM time, every time in this process's CPU time."""
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "decode_overhead.py"), "--quick", "--repeats", "2",
                          "--threads", "1", "--clock", "cpu", "--stat", "min"],
                         capture_output=True, text=True, timeout=300, check=True).stdout
    rows = [line.strip("|").split("|") for line in out.splitlines() if line.startswith(("| translator", "| lm"))]
    assert [(r[0].strip(), int(r[1])) for r in rows] == [("translator", 1), ("lm", 1)]
    for r in rows:
        wall, gemm, rest = (float(x) for x in r[2:5])
        # wall and GEMM times come from separate timed runs: on a loaded machine either can be the
        # larger, so only the arithmetic is checked (no timing assertion)
        assert wall > 0 and gemm > 0 and abs(wall - gemm - rest) <= 0.0016  # each printed to 0.001
