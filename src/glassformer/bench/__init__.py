"""Benchmarks against Hugging Face and PyTorch on the same work (issue 7).

Each comparison is one module with `run(quick) -> dict`; `run_all` runs them in order and adds
the verdict of every target. Ratios, not absolute times, are the result: both sides of a
comparison are timed interleaved in one process (see `harness`).
"""

from __future__ import annotations

import platform
import time
from typing import Callable

import torch

SECTIONS = ("encoder", "training", "training_bf16", "generation", "peer", "trace", "memory", "compile")


def _runners() -> dict[str, Callable[[bool], dict]]:
    from . import compile_option, encoder, generation, memory, peer, trace_overhead, training
    return {
        "encoder": encoder.run,
        "training": lambda quick: training.run(quick, amp=False),
        "training_bf16": lambda quick: training.run(quick, amp=True),
        "generation": generation.run,
        "peer": peer.run,
        "trace": trace_overhead.run,
        "memory": memory.run,
        "compile": compile_option.run,
    }


def targets(results: dict) -> list[dict]:
    """Every target of issue 7 with the measured value and whether it is met."""
    rows = []

    def add(name, value, goal, met, where):
        rows.append({"target": name, "value": value, "goal": goal, "met": bool(met), "section": where})

    if "encoder" in results:
        r = results["encoder"]["ratio"]
        add("encoder forward vs HF BertModel", r, "≥ 1.0×", r >= 1.0, "encoder")
    if "training" in results:
        t = results["training"]
        add("training step vs nn.Transformer (fp32)", t["ratio"], "≥ 1.2×", t["ratio"] >= 1.2, "training")
        mfu = t["glassformer"]["mfu"]
        add("training fp32 MFU", mfu, "≥ 50 %", mfu >= 0.5, "training")
    if "generation" in results:
        g = results["generation"]
        if "bound" in g.get("batch_1", {}):
            b1 = g["batch_1"]
            # issue 29 raised issue 11's 70 % to 80 %
            add("greedy decoding batch 1 vs weight-streaming bound", b1["bound"]["fraction"], "≥ 80 %, same tokens",
                b1["bound"]["fraction"] >= 0.8 and b1["identical_tokens"], "generation")
        for key in [k for k in g if k.startswith("batch_") and not k.endswith("_1_thread") and k != "batch_1"]:
            r = g[key]
            add(f"greedy decoding vs HF GPT-2, {key.replace('_', ' ')}", r["ratio"], "≥ 2.5×, same tokens",
                r["ratio"] >= 2.5 and r["identical_tokens"], "generation")
        c = g["cache_vs_no_cache"]
        add("KV cache vs no cache", c["ratio"], "≥ 5×, same tokens", c["ratio"] >= 5 and c["identical_tokens"],
            "generation")
    for name, row in results.get("peer", {}).get("rows", {}).items():
        for side in ("fp32", "int8"):
            r = row[f"ratio_{side}"]
            same = row[f"tokens_{side}"]
            # int8: issue 29's "≥ 95 % of greedy tokens equal to our fp32", counted where both decoders had
            # the same prefix (peer.same_prefix_agreement). A beam row's best hypothesis is not a chain of
            # next-token choices: the issue asks it for speed only, and its agreement is reported, not gated
            agree = row["int8_vs_fp32"].get("same_prefix_agreement")
            if side == "fp32":
                goal, ok = "≥ 1.0×, tokens = CT2", same["rows_equal"] == same["rows"]
            elif agree is None:
                goal, ok = "≥ 1.0× (beam: agreement reported, not a goal)", True
            else:
                goal, ok = "≥ 1.0×, ≥ 95 % of next tokens = our fp32", agree >= 0.95
            add(f"{name} vs CTranslate2 {side}", r, goal, r >= 1.0 and ok, "peer")
    if "trace" in results:
        r = results["trace"]["ratio"]
        add("full trace vs fast path (slowdown)", r, "≤ 2.5×", r <= 2.5, "trace")
    if "memory" in results:
        e = results["memory"]["fast_growth_exponent"]
        add("fast-path memory growth exponent", e, "≈ 1 (linear)", e <= 1.25, "memory")
    return rows


CPU_FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16")  # the ones GEMM kernels choose by
ISA_ENV = ("ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "MKL_ENABLE_INSTRUCTIONS", "FBGEMM_ENABLE_INSTRUCTIONS",
           "CT2_FORCE_CPU_ISA", "GLASSFORMER_ONEDNN", "GLASSFORMER_GEMM")


def machine() -> dict:
    """The CPU, the instruction sets its kernels may use, and the caps this run was under."""
    import os

    from ..nn.routes import onednn_bf16
    cpu, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read().splitlines()
        cpu = next(line.split(":", 1)[1].strip() for line in info if line.startswith("model name"))
        flags = set(next(line.split(":", 1)[1] for line in info if line.startswith("flags")).split())
    except (OSError, StopIteration):
        pass
    return {"cpu": cpu, "cpu_flags": [f for f in CPU_FLAGS if f in flags],
            "aten_capability": torch.backends.cpu.get_cpu_capability(),
            "onednn_bf16": onednn_bf16(),
            "isa_env": {k: os.environ[k] for k in ISA_ENV if k in os.environ},
            "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
            "python": platform.python_version(), "load_average": os.getloadavg()[0]}


def run_all(quick: bool = False, only: list[str] | None = None, log: Callable[[str], None] = print) -> dict:
    runners = _runners()
    chosen = only or list(SECTIONS)
    results: dict = {"quick": quick, "machine": machine(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
    t0 = time.perf_counter()
    threads = torch.get_num_threads()
    if quick:  # only shows the harness works; one thread keeps it fast on a busy machine (CI)
        torch.set_num_threads(1)
    try:
        for name in chosen:
            t = time.perf_counter()
            log(f"bench {name} ...")
            results[name] = runners[name](quick)
            log(f"bench {name} done in {time.perf_counter() - t:.1f} s")
    finally:
        torch.set_num_threads(threads)
    results["seconds"] = time.perf_counter() - t0
    results["machine"]["load_average_end"] = __import__("os").getloadavg()[0]
    from ..nn.routes import TABLE
    results["gemm_routes"] = TABLE.rows()  # what each route took on every shape class measured
    from ..nn.decode_gemm import route_rows
    results["decode_routes"] = route_rows()  # the same for the decode step's GEMMs (three routes)
    from ..nn.precision import route_rows as int8_rows
    results["int8_routes"] = int8_rows()  # the int8 kernel measured per shape class (nn/precision.py)
    results["targets"] = targets(results)
    return results
