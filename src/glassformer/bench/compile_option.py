"""torch.compile as an option: the same encoder forward, eager vs compiled (Inductor, C++ on CPU).

Measured, not made the default: compiling costs time up front (reported here), and the fast path
already spends its time in oneDNN GEMMs and the fused attention kernel, which compiling keeps.
Skipped in --quick (compiling alone takes longer than the whole quick run).
"""

from __future__ import annotations

import time

import torch

from ..config import ModelConfig
from ..nn import build_model
from .harness import compare

FULL = dict(d_model=384, n_heads=12, n_layers=6, d_ff=1536, vocab=30522, batch=8, seq=128, repeats=7)


def run(quick: bool = False) -> dict:
    if quick:
        return {"skipped": "torch.compile is measured only in the full run"}
    p = FULL
    torch.manual_seed(0)
    cfg = ModelConfig(arch="encoder", vocab_size=p["vocab"], d_model=p["d_model"], n_heads=p["n_heads"],
                      n_layers=p["n_layers"], d_ff=p["d_ff"], activation="gelu", pe="learned",
                      embed_norm=True, tie_embeddings=False)
    model = build_model(cfg).eval()
    ids = torch.randint(0, p["vocab"], (p["batch"], p["seq"]), generator=torch.Generator().manual_seed(1))
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
