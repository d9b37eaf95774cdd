"""torch.compile as an option: the same encoder forward, eager vs compiled (Inductor, C++ on CPU).

Measured, not made the default: compiling costs time up front (reported here), and the fast path
already spends its time in oneDNN GEMMs and the fused attention kernel, which compiling keeps.
Skipped in --quick (compiling alone takes longer than the whole quick run).
"""

from __future__ import annotations

import time

import torch

from .harness import compare
from .trace_overhead import FULL, minilm_shaped



def run(quick: bool = False) -> dict:
    if quick:
        return {"skipped": "torch.compile is measured only in the full run"}
    p = FULL
    model, ids = minilm_shaped(p)
    try:
        compiled = torch.compile(model)
        with torch.no_grad():
            t = time.perf_counter()
            out = compiled(ids)
            compile_s = time.perf_counter() - t
            diff = (out - model(ids)).abs().max().item()
            res = compare(lambda: compiled(ids), lambda: model(ids), work=ids.numel(), repeats=p["repeats"],
                          warmup=1, names=("compiled", "eager"))
    except Exception as e:  # no C++ compiler, an unsupported op: report, do not fail the run
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    res.update(params={k: v for k, v in p.items() if k != "repeats"}, compile_s=compile_s, max_abs_diff=diff)
    return res
