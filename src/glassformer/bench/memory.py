"""Peak memory of one forward pass against sequence length, fast path vs explicit-math path.

Each point runs in a fresh process (`python -m glassformer.bench.memory SEQ IMPL`), so one
measurement's high-water mark cannot hide another's: peak RSS (VmHWM) minus the resident
size just before the forward. The math path materialises every (head, q, k) score, so its memory
grows with seq²; the fused kernel streams over keys, so the fast path should grow linearly.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import torch

FULL_SEQS = (512, 1024, 2048, 4096, 8192)
QUICK_SEQS = (64, 128)
MODEL = dict(arch="encoder", vocab_size=1000, d_model=256, n_heads=4, n_layers=2, d_ff=1024, pe="sinusoidal")


def _status_mib(field: str) -> float:
    """VmRSS (resident now) or VmHWM (its high-water mark) from /proc/self/status, in MiB.

    Not ru_maxrss: that one survives fork and exec, so a child would report its parent's peak.
    """
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"/proc/self/status has no {field} (memory points need Linux)")


def measure(seq: int, impl: str) -> dict:
    """In this process: one forward of batch 1 × seq tokens; peak and baseline RSS in MiB."""
    from ..config import ModelConfig
    from ..nn import build_model
    torch.manual_seed(0)
    model = build_model(ModelConfig(**MODEL, attn_impl=impl)).eval()
    ids = torch.randint(0, MODEL["vocab_size"], (1, seq))
    with torch.inference_mode():
        model(ids[:, :8])  # load kernels before the baseline is read
        base = _status_mib("VmRSS")
        model(ids)
    peak = _status_mib("VmHWM")
    return {"seq": seq, "impl": impl, "baseline_mib": base, "peak_mib": peak, "forward_mib": peak - base}


def run(quick: bool = False) -> dict:
    seqs = QUICK_SEQS if quick else FULL_SEQS
    env = dict(os.environ, OMP_NUM_THREADS=str(torch.get_num_threads()))
    jobs = [(seq, impl) for impl in ("fast", "math") for seq in seqs]

    def start(seq: int, impl: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "glassformer.bench.memory", str(seq), impl],
                                stdout=subprocess.PIPE, text=True, env=env)

    # RSS is per process, so the tiny quick points may run side by side; the real ones run alone
    procs = [start(*j) for j in jobs] if quick else None
    points = []
    for i, job in enumerate(jobs):
        proc = procs[i] if procs else start(*job)
        out, _ = proc.communicate()
        if proc.returncode != 0:
            raise RuntimeError(f"memory point {job} failed with exit status {proc.returncode}")
        points.append(json.loads(out.strip().splitlines()[-1]))
    return {"model": MODEL, "batch": 1, "points": points, **growth_exponents(points)}


def growth_exponents(points: list[dict]) -> dict:
    """Least-squares slope of log(memory) against log(seq) per path: ~1 linear, ~2 quadratic.

    A fit over every length, not the last two: the allocator keeps freed blocks, so any single
    point can sit a few MiB off its line.
    """
    import math
    out = {}
    for impl in ("fast", "math"):
        pts = [(math.log(p["seq"]), math.log(max(p["forward_mib"], 1e-3))) for p in points if p["impl"] == impl]
        mx, my = sum(x for x, _ in pts) / len(pts), sum(y for _, y in pts) / len(pts)
        out[f"{impl}_growth_exponent"] = (sum((x - mx) * (y - my) for x, y in pts)
                                          / sum((x - mx) ** 2 for x, _ in pts))
    return out


if __name__ == "__main__":
    print(json.dumps(measure(int(sys.argv[1]), sys.argv[2])))
