"""What seeing every number costs: a full trace against the fast path, same model, same input.

The full trace takes the explicit-math attention path (the fused kernel never materialises the
pattern) and copies every hook point's value out; the fast path does neither. Same MiniLM-shaped
encoder (random weights) on both sides, inference mode.
"""

from __future__ import annotations

import torch

from ..config import ModelConfig
from ..nn import build_model
from ..trace import run_with_trace
from .harness import compare, top_ops

FULL = dict(d_model=384, n_heads=12, n_layers=6, d_ff=1536, vocab=30522, batch=8, seq=128, repeats=7)
QUICK = dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, vocab=100, batch=2, seq=8, repeats=2)


def minilm_shaped(p: dict):
    """A BERT-style encoder with random weights, and a batch of ids, sized by `p`."""
    torch.manual_seed(0)
    cfg = ModelConfig(arch="encoder", vocab_size=p["vocab"], d_model=p["d_model"], n_heads=p["n_heads"],
                      n_layers=p["n_layers"], d_ff=p["d_ff"], activation="gelu", pe="learned",
                      embed_norm=True, tie_embeddings=False)
    model = build_model(cfg).eval()
    ids = torch.randint(0, p["vocab"], (p["batch"], p["seq"]), generator=torch.Generator().manual_seed(1))
    return model, ids


def run(quick: bool = False) -> dict:
    p = QUICK if quick else FULL
    model, ids = minilm_shaped(p)
    with torch.inference_mode():
        out, trace = run_with_trace(model, ids)
        diff = (out - model(ids)).abs().max().item()
        res = compare(lambda: model(ids), lambda: run_with_trace(model, ids), work=ids.numel(),
                      repeats=p["repeats"], warmup=1, names=("fast path", "full trace"))
        profile = top_ops(lambda: run_with_trace(model, ids))
    # ratio = trace time / fast time: how many times slower seeing everything is
    res.update(params={k: v for k, v in p.items() if k != "repeats"}, traced_tensors=len(trace),
               traced_mib=sum(t.numel() * t.element_size() for t in trace.values()) / 2 ** 20,
               max_abs_diff=diff, profile=profile)
    return res
