"""The measuring rule every comparison follows: both sides in one process, interleaved, medians.

These machines drift 15–30 % between runs, so an absolute time says little; two programs timed
alternately in the same process see the same drift, and the ratio of their medians is what we
report. Each repeat runs A then B, the next B then A (ABBA), so a slow spell hits both sides.
One exception: CTranslate2 runs in a worker process of its own (bench/ct2_worker.py says why), still
called in the same alternation.
"""

from __future__ import annotations

import contextlib

import statistics
import time
from dataclasses import dataclass, field
from typing import Callable

import torch


@dataclass(frozen=True)
class SelfTimed:
    """A side's result with the seconds it measured itself (a side that runs in another process:
    its own clock around the call, without the round trip to it)."""

    value: object
    seconds: float


@dataclass
class Timing:
    """Seconds per call of one side, every repeat kept."""

    name: str
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    def to_dict(self) -> dict:
        return {"name": self.name, "median_s": self.median, "min_s": min(self.times),
                "max_s": max(self.times), "repeats": len(self.times)}


def interleaved(sides: dict[str, Callable[[], object]], repeats: int, warmup: int = 1,
                outputs: dict | None = None) -> dict[str, Timing]:
    """Time every side `repeats` times, alternating the order each round; warm-up calls untimed.

    `outputs`, when given, receives each side's last return value (to check both computed the same).
    A side that returns `SelfTimed` is timed by its own clock.
    """
    names = list(sides)
    for _ in range(warmup):
        for n in names:
            sides[n]()
    timings = {n: Timing(n) for n in names}
    for r in range(repeats):
        order = names if r % 2 == 0 else names[::-1]
        for n in order:
            t = time.perf_counter()
            out = sides[n]()
            seconds = time.perf_counter() - t
            if isinstance(out, SelfTimed):
                out, seconds = out.value, out.seconds
            timings[n].times.append(seconds)
            if outputs is not None:
                outputs[n] = out
    return timings


def compare(ours: Callable[[], object], theirs: Callable[[], object], work: float, repeats: int,
            warmup: int = 1, names: tuple[str, str] = ("glassformer", "reference"), unit: str = "tokens/s",
            outputs: dict | None = None) -> dict:
    """Interleaved A/B timing; `work` units per call (tokens). ratio = our rate / their rate."""
    t = interleaved({names[0]: ours, names[1]: theirs}, repeats, warmup, outputs)
    a, b = t[names[0]], t[names[1]]
    return {
        names[0]: {**a.to_dict(), "rate": work / a.median},
        names[1]: {**b.to_dict(), "rate": work / b.median},
        "unit": unit,
        "ratio": b.median / a.median,
    }


def onednn_linear_supports(dtype: torch.dtype) -> bool:
    """Whether oneDNN's private linear op exists here and has a kernel for `dtype` on this CPU.

    oneDNN has no bfloat16 inner product without native bf16 instructions (AVX512_BF16 / AMX):
    on an AVX2 machine the op raises instead of falling back, so bf16 is only asked where the CPU
    has it. float32 works on every ISA oneDNN supports.
    """
    if getattr(torch.ops.mkldnn, "_linear_pointwise", None) is None or not torch.backends.mkldnn.is_available():
        return False
    if dtype == torch.bfloat16:
        from ..nn.routes import onednn_bf16
        return onednn_bf16()
    return dtype == torch.float32


def matmul_peak(n: int = 1024, dtype: torch.dtype = torch.float32, repeats: int = 10) -> dict[str, float]:
    """The machine's matmul throughput (FLOP/s): the best of `repeats` n×n @ n×n (2n³ FLOPs) per library.

    torch.mm (MKL for float32) and oneDNN's linear are both measured, and the faster is the peak:
    MFU against a slow library's peak would flatter the model. Measured in the same run as what it
    is compared with, because the machine's speed drifts; the best call, not the median, because a
    peak is what the machine can do — on a shared VM a median taken in a slow spell put MFU at 102%.
    """
    a = torch.randn(n, n).to(dtype)
    b = torch.randn(n, n).to(dtype)
    sides = {"torch.mm": lambda: torch.mm(a, b)}
    if onednn_linear_supports(dtype):
        linear = torch.ops.mkldnn._linear_pointwise
        sides["oneDNN linear"] = lambda: linear(a, b.t(), None, "none", [], "")
    t = interleaved(sides, repeats, warmup=2)
    out = {name: 2 * n ** 3 / min(timing.times) for name, timing in t.items()}
    out["peak"] = max(out.values())
    return out


def step_weights(model: torch.nn.Module) -> list[torch.Tensor]:
    """The parameters one batch-1 decode step must read whole: all but the tables it reads one row
    of (the learned position table; the token table too when a separate head projects to the
    vocabulary). Tied weights count once (`parameters()`)."""
    cfg = getattr(model, "config", None)
    rows_only = {"pos."} | ({"embed."} if cfg is not None and not cfg.tie_embeddings else set())
    return [p for name, p in model.named_parameters() if not name.startswith(tuple(rows_only))]


def weight_stream(model: torch.nn.Module, width: int = 1024) -> tuple[str, Callable[[], torch.Tensor]]:
    """(kernel, call): one pass over the weights a decode step reads, the fastest way this machine has.

    A decode step at batch 1 must read every weight once (issue 11); on a model larger than the
    cache that read, not arithmetic, sets the time. Those weights (`step_weights`) are copied into
    one contiguous (P / width, width) fp32 matrix and read by each of: torch.mv (what this bound
    used alone until 2026-12-03), oneDNN's matrix-vector product, and a plain sum. The fastest of
    them (`routes.fastest`: best of 3, interleaved) is the bound: on the AVX-512 EPYC at 2 threads torch.mv read the GPT-2-size
    LM's 55 MB at 17 GB/s, the sum and oneDNN at 32–38 GB/s, so torch.mv's pass was no bound.
    """
    from ..nn.routes import fastest, onednn_available, onednn_linear

    flat = torch.cat([p.detach().reshape(-1).float() for p in step_weights(model)])
    flat = torch.nn.functional.pad(flat, (0, -flat.numel() % width)).view(-1, width)
    v = torch.randn(width)
    passes = {"torch.mv": lambda: torch.mv(flat, v), "sum": flat.sum}
    if onednn_available():
        passes["oneDNN matrix-vector"] = lambda: onednn_linear(v[None], flat, None)
    best = fastest(passes)
    name = min(best, key=best.get)
    return name, passes[name]


@contextlib.contextmanager
def _kineto_lines_dropped():
    """The profiler's C++ side (Kineto) writes `STAGE:` and `USDT: … profiler_start` lines straight
    to file descriptor 2, past Python and past KINETO_LOG_LEVEL. Catch fd 2 in a temporary file for the
    profiled call and hand every other line back to stderr."""
    import os
    import sys
    import tempfile

    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (an embedding host): nothing to catch
        yield
        return
    with tempfile.TemporaryFile() as caught:
        os.dup2(caught.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            for line in caught.read().decode("utf-8", "replace").splitlines(keepends=True):
                if not line.startswith(("USDT:", "STAGE:")):
                    sys.stderr.write(line)


def top_ops(fn: Callable[[], object], n: int = 8) -> list[dict]:
    """torch.profiler's heaviest operators (self CPU time) over one call of `fn`.

    Where a target is missed, this says where the time went.
    """
    from torch.profiler import ProfilerActivity, profile

    with _kineto_lines_dropped():
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    return [{"op": e.key, "self_ms": e.self_cpu_time_total / 1e3, "calls": e.count,
             "share": e.self_cpu_time_total / total} for e in events[:n]]
