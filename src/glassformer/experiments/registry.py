"""The experiment ids of `glassformer ablate` and how one outcome becomes one report row."""

from __future__ import annotations

import importlib
import math
import time
from pathlib import Path

import torch

from ..errors import InputError
from .base import Context
from .verdict import combine

# id -> module (one module per seed claim)
EXPERIMENTS = {
    "pe-order": "pe_order",
    "scaling": "scaling",
    "residual": "residual",
    "norm-placement": "norm_placement",
    "norm-type": "norm_type",
    "pe-extrapolation": "pe_extrapolation",
    "pe-add-concat": "pe_add_concat",
    "heads": "heads",
    "ffn": "ffn",
    "rnn": "rnn",
}


def resolve(which: str) -> list[str]:
    """`all` or one id -> the ids to run; anything else stops with one line."""
    if which == "all":
        return list(EXPERIMENTS)
    if which not in EXPERIMENTS:
        raise InputError(f"unknown experiment {which!r}; choose one of: all, {', '.join(EXPERIMENTS)}")
    return [which]


def module(exp_id: str):
    return importlib.import_module(f"{__package__}.{EXPERIMENTS[exp_id]}")


def run_one(exp_id: str, quick: bool, seeds: list[int], out_dir: Path, log=print) -> dict:
    """Run one experiment and return its row: the issue's keys plus checks, setup, plots, notes."""
    mod = module(exp_id)
    torch.set_num_threads(1)  # tiny models: threads cost more than they give, and runs stay comparable
    ctx = Context(quick=quick, seeds=seeds, out_dir=out_dir, log=log)
    start = time.perf_counter()
    outcome = mod.run(ctx)
    variants = {v.name: v for v in outcome.variants}
    checks = [c.evaluate(variants) for c in outcome.checks]
    row = {"id": exp_id, "claim": mod.CLAIM, "seed_section": mod.SECTION,
           "variants": [v.to_dict() for v in outcome.variants], "verdict": combine(checks),
           "checks": checks, "setup": outcome.setup, "plots": outcome.plots, "notes": outcome.notes,
           "quick": quick, "seeds": seeds, "seconds": time.perf_counter() - start,
           "extra": outcome.extra}
    return clean(row)


def _worker(args) -> dict:
    exp_id, quick, seeds, out_dir = args
    return run_one(exp_id, quick, seeds, out_dir, log=lambda msg: print(f"[{exp_id}] {msg}", flush=True))


def run_many(ids: list[str], quick: bool, seeds: list[int], out_dir: Path, jobs: int = 1, log=print):
    """Yield each experiment's row as it finishes; `jobs` > 1 runs experiments in parallel processes."""
    if jobs <= 1 or len(ids) <= 1:
        for exp_id in ids:
            log(f"[{exp_id}] running ({'quick' if quick else 'full'}, {len(seeds)} seeds)")
            yield run_one(exp_id, quick, seeds, out_dir, log=lambda msg, e=exp_id: log(f"[{e}] {msg}"))
        return
    import multiprocessing as mp
    ctx = mp.get_context("spawn")  # a fresh interpreter per worker: no forked torch thread pools
    with ctx.Pool(min(jobs, len(ids))) as pool:
        yield from pool.imap_unordered(_worker, [(i, quick, seeds, out_dir) for i in ids])


def clean(obj):
    """JSON-safe copy: NaN/inf become None (a diverged run's loss has no finite value)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    return obj
