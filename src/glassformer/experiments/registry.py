"""The experiment ids of `glassformer ablate` and how one outcome becomes one report row."""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import time
from pathlib import Path

import torch

from ..errors import InputError
from .base import Context, atomic_write
from .verdict import UNTESTED, combine

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
    # issue 12: Xiong's mechanism, and exact checks of the seeds' other claims (seconds each)
    "ln-gradients": "ln_gradients",
    "paper-norm": "paper_norm",
    "head-slices": "head_slices",
    "concat-wo": "concat_wo",
    "ffn-share": "ffn_share",
    "arange-pe": "arange_pe",
    "alibi-distance": "alibi_distance",
    "pe-linear": "pe_linear",
    # issue 12: tasks aimed at one claim each
    "ffn-capacity": "ffn_capacity",
    "khop": "khop",
    "recall-extrapolation": "recall_extrapolation",
    "attention-cost": "attention_cost",
    "representation-convergence": "representation_convergence",
    "attention-locality": "attention_locality",
    "dk-sweet-spot": "dk_sweet_spot",
    "no-layernorm": "no_layernorm",
    "pe-relative-use": "pe_relative_use",
    # issue 12 item 4: the same claims on real text (fortunes-en, next character)
    "real-heads": "real_heads",
    "real-pe": "real_pe",
    "real-norm": "real_norm",
    "real-ffn": "real_ffn",
    # issue 28 §5: cheap untested seed claims (seconds to a minute each)
    "ln-init-variance": "ln_init_variance",
    "batchnorm-padding": "batchnorm_padding",
    "tied-qk": "tied_qk",
    "head-pruning": "head_pruning",
    "ffn-memories": "ffn_memories",
    "pe-frequency-bands": "pe_frequency_bands",
}


# Seconds of one core per experiment in the from-scratch run of docs/claims.md (2-core AVX2 machine,
# --jobs 2; for the rows issue 28 re-measured or added, their CPU time, or their wall time on a shared
# AVX-512 machine where no CPU time was kept): only the order of `run_many` uses them. Longest first,
# so that two workers finish together instead of one starting the longest experiment when the other
# is nearly done (the LPT rule of scheduling). Rows not listed took under 10 s.
# ffn-capacity: estimated from its redesign's pilot (2026-12-03: ~780 s of runs per seed at 1 thread,
# 13 runs per arm with the 8-run sweep), not yet measured. dk-sweet-spot, real-heads, real-ffn at
# 5,000 steps (stop 54): 15 runs per arm of ~400 s (h = 8, 16) or ~270 s (h = 1, 2; no FFN, d_ff 1×),
# the arm they share counted in dk-sweet-spot only. real-pe at 5,000 steps: 61 runs, 31,377 s measured
# (stops 56–58); real-norm at d_model 128 × 4 layers, 3,000 steps: 54 runs, 27,758 s measured (stops 58–59).
COST_HINT = {
    "recall-extrapolation": 2543, "khop": 1947, "dk-sweet-spot": 12000, "real-norm": 27758, "norm-placement": 1650,
    "real-pe": 31377, "no-layernorm": 1096, "ffn-capacity": 10000, "real-heads": 6000, "representation-convergence": 640,
    "ffn": 557, "real-ffn": 8100, "pe-frequency-bands": 518, "norm-type": 261, "scaling": 243, "residual": 234,
    "pe-order": 211, "heads": 200, "rnn": 185, "tied-qk": 182, "head-pruning": 182, "pe-extrapolation": 146,
    "pe-add-concat": 92, "ffn-memories": 87, "pe-relative-use": 38,
}


MALLOC_ENV = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824"}


def resolve(which: str) -> list[str]:
    """`all` or one id -> the ids to run; anything else stops with one line."""
    if which == "all":
        return list(EXPERIMENTS)
    if which not in EXPERIMENTS:
        raise InputError(f"unknown experiment {which!r}; choose one of: all, {', '.join(EXPERIMENTS)}")
    return [which]


def module(exp_id: str):
    return importlib.import_module(f"{__package__}.{EXPERIMENTS[exp_id]}")


def default_seeds(exp_id: str, quick: bool) -> int:
    """Seeds per arm: 2 for --quick (proves the code runs), else the experiment's own `SEEDS`
    (10 where one run costs seconds, 5 elsewhere: the protocol of docs/claims.md)."""
    return 2 if quick else getattr(module(exp_id), "SEEDS", 5)


def cache_path(cache_dir: Path, exp_id: str, quick: bool, n_seeds: int) -> Path:
    return cache_dir / f"{exp_id}.{'quick' if quick else 'full'}.{n_seeds}seeds.json"


def run_one(exp_id: str, quick: bool, seeds: list[int], out_dir: Path, log=print,
            cache_dir: Path | None = None, archive: Path | None = None, reverse: bool = False) -> dict:
    """Run one experiment and return its row: the issue's keys plus checks, setup, plots, notes.

    With `cache_dir`, a finished row is kept there and returned instead of rerunning (resumable
    full runs), and each experiment can keep its finished single runs there too (`Context.memo`).
    """
    mod = module(exp_id)
    if cache_dir is not None:
        done = cache_path(cache_dir, exp_id, quick, len(seeds))
        kept = cached_row(done)
        if kept is not None:
            log(f"cached: {done}")
            return kept
        if done.exists():  # a row finished by other code (a redesigned arm, a new check): decided again,
            # from its single runs where they are still the runs the code asks for (Context.memo's identities)
            log(f"the experiments' code changed since {done} was written: running the row again")
    torch.set_num_threads(1)  # tiny models: threads cost more than they give, and runs stay comparable
    ctx = Context(quick=quick, seeds=seeds, out_dir=out_dir, log=log,
                  memo_dir=None if cache_dir is None else cache_dir / "runs" / exp_id, archive=archive, reverse=reverse)
    start = time.perf_counter()
    outcome = mod.run(ctx)
    variants = {v.name: v for v in outcome.variants}
    checks = [c.evaluate(variants) for c in outcome.checks]
    if outcome.gate and outcome.gate.startswith("failed"):  # a failed quality gate: nothing is read
        for c in checks:
            c["verdict"] = UNTESTED
    row = {"id": exp_id, "claim": mod.CLAIM, "seed_section": mod.SECTION,
           "variants": [v.to_dict() for v in outcome.variants], "verdict": combine(checks),
           "checks": checks, "setup": outcome.setup, "plots": outcome.plots, "notes": outcome.notes,
           "quick": quick, "seeds": seeds, "seconds": time.perf_counter() - start,
           "extra": outcome.extra, "gate": outcome.gate}
    row = clean(row)
    if cache_dir is not None:
        atomic_write(cache_path(cache_dir, exp_id, quick, len(seeds)),
                     json.dumps({**row, "code": code_digest()}, ensure_ascii=False))
    return row


def cached_row(path: Path) -> dict | None:
    """The finished row kept at `path`, if the experiments' code that wrote it is the code now."""
    if not path.exists():
        return None
    kept = json.loads(path.read_text(encoding="utf-8"))
    return kept if kept.pop("code", None) == code_digest() else None


def code_digest() -> str:
    """A digest of the experiments package's source (every module of it): what a finished row's
    cache must match to be returned as it was."""
    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()[:20]


def _worker(args) -> dict:
    exp_id, quick, seeds, out_dir, cache_dir, archive, reverse = args
    return run_one(exp_id, quick, seeds, out_dir, log=lambda msg: print(f"[{exp_id}] {msg}", flush=True),
                   cache_dir=cache_dir, archive=archive, reverse=reverse)


def run_many(ids: list[str], quick: bool, n_seeds: int | None, out_dir: Path, jobs: int = 1, log=print,
             cache_dir: Path | None = None, archive: Path | None = None, reverse: bool = False):
    """Yield each experiment's row as it finishes; `jobs` > 1 runs experiments in parallel processes.

    `n_seeds` None gives each experiment its own default (`default_seeds`). `archive`: a folder of
    finished single runs (docs/claims/runs) taken before anything is trained (`Context.archive`)."""
    order = sorted(ids, key=lambda i: -COST_HINT.get(i, 0))  # stable: ties keep the registry order
    plan = [(i, quick, list(range(n_seeds or default_seeds(i, quick))), out_dir, cache_dir, archive, reverse)
            for i in order]
    if jobs <= 1 or len(ids) <= 1:
        for exp_id, _, seeds, *_ in plan:
            log(f"[{exp_id}] running ({'quick' if quick else 'full'}, {len(seeds)} seeds)")
            yield run_one(exp_id, quick, seeds, out_dir, log=lambda msg, e=exp_id: log(f"[{e}] {msg}"),
                          cache_dir=cache_dir, archive=archive, reverse=reverse)
        return
    import multiprocessing as mp
    import os
    # glibc serves blocks over 128 KiB with mmap and returns them at free, so every step of a small
    # model page-faults its activations in again (a 12-layer d_model-64 step ran 4–21% faster
    # without it, three paired runs). The workers read these at start-up, so they are set only
    # while the pool spawns them; a user's own setting wins.
    added = [name for name in MALLOC_ENV if name not in os.environ]
    os.environ.update({name: MALLOC_ENV[name] for name in added})
    ctx = mp.get_context("spawn")  # a fresh interpreter per worker: no forked torch thread pools
    try:
        pool = ctx.Pool(min(jobs, len(ids)))
    finally:
        for name in added:
            del os.environ[name]
    with pool:
        yield from pool.imap_unordered(_worker, plan)


def clean(obj):
    """JSON-safe copy: NaN/inf become None (a diverged run's loss has no finite value)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean(v) for v in obj]
    return obj
