"""What every experiment module shares: its context, its outcome, and a standard tagging run.

An experiment module defines `ID`, `CLAIM` (the seed's words, translated), `SECTION`, and
`run(ctx) -> Outcome`. The registry turns an outcome into the report row.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from ..config import ModelConfig
from ..nn import build_model
from .runner import PAD, TrainResult, TrainSpec, evaluate_tagging, set_seed, tagging_loss, train
from .synthetic import TaggingTask
from .verdict import Check, Variant


@dataclass
class Context:
    quick: bool
    seeds: list[int]
    out_dir: Path  # plots go here
    log: Callable[[str], None] = print
    memo_dir: Path | None = None  # finished single runs, kept so that a long run can resume
    rates: dict[str, float] = field(default_factory=dict)  # each arm's chosen peak rate (issue 28 §2: printed)
    archive: Path | None = None  # finished runs to take before training (`ablate --runs`, docs/claims/runs)
    # train the runs in the opposite order (`ablate --reverse`): a second process on the same cache then starts
    # where the first will end, each skips what the other finished, and a long row takes two cores
    reverse: bool = False

    def order(self, items) -> list:
        """`items` in the order this process trains them (`reverse`); results are kept in the given order."""
        items = list(items)
        return items[::-1] if self.reverse else items

    def pick(self, quick, full):
        """The quick (CI) setting or the full one."""
        return quick if self.quick else full

    def memo(self, key: str, compute: Callable[[], dict], identity: dict | None = None, share: bool = True) -> dict:
        """`compute()` (a JSON-able dict of one run's numbers), or its cached result under `key`.

        With `identity` (everything that decides the run: `run_identity`), the run is kept under a
        digest of it, so that a changed config, spec, seed or test set trains again instead of
        reading a stale run kept under the same name (the row's own file carries the digest too),
        and in a cache that every row reads (`SHARED`): a run that two rows both need (the text
        rows' common arm: d_model 128, 8 heads, Post-LN, d_ff 512) trains once. `share=False`: the
        run has a builder of its own that the identity cannot see (real-ffn's FFN-less model), so
        its identity also names the row and key that built it, and no other row takes it."""
        if self.memo_dir is None:
            return compute()
        mode = "quick" if self.quick else "full"
        path = self.memo_dir / f"{mode}.{key}.json"
        shared = archived = seconds = None
        taken = None  # an archived run's file, kept whole (its time and row too) in this cache
        if identity is not None:
            if not share:
                identity = {**identity, "built_by": f"{self.memo_dir.name}/{key}"}
            digest = run_digest(identity)
            path = self.memo_dir / f"{mode}.{key}.{digest}.json"
            shared = self.memo_dir.parent / SHARED / f"{mode}.{digest}.json"
            archived = None if self.archive is None else self.archive / shared.name
        if path.exists():
            value = json.loads(path.read_text(encoding="utf-8"))
        elif shared is not None and shared.exists():
            value = json.loads(shared.read_text(encoding="utf-8"))["value"]
        elif archived is not None and archived.exists():
            taken = archived_run(archived, identity)
            value = taken["value"]
        else:
            start = time.perf_counter()
            value = compute()
            seconds = time.perf_counter() - start
            if shared is not None and shared.exists():  # another process (`--reverse`) finished it meanwhile:
                value, seconds = json.loads(shared.read_text(encoding="utf-8"))["value"], None  # its copy wins
        if not path.exists():
            atomic_write(path, json.dumps(value))
        if shared is not None and not shared.exists():  # with what it was, for a reader of the cache
            # a run from the archive keeps the time and row it trained with: a row resumed in a later
            # session from the archive still sums the runs it trained before (claims_merge_row.run_seconds)
            kept = {**(taken or {}), "identity": identity, "value": value}
            if seconds is not None:  # what the run cost, so that a row's time sums its runs (issue 28 §7)
                kept.update(seconds=round(seconds, 1), threads=torch.get_num_threads(), row=self.memo_dir.name)
            atomic_write(shared, json.dumps(kept))
        return value


SHARED = "shared"  # the folder, beside the rows' own (OUT/cache/runs/ROW), of runs any row may reuse


def run_digest(identity: dict) -> str:
    """The name a run is kept under (OUT/cache/runs/shared/MODE.DIGEST.json, docs/claims/runs/): a digest of
    everything that decided it."""
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]


def archived_run(path: Path, identity: dict) -> dict:
    """An archived run's file whole: its value, and the time and row it trained with (a file of
    `Context.archive`, named as the shared cache names it), once its own identity is the one asked for: a
    file renamed, edited or from another version of the code is refused with one line instead of standing
    in for a run it is not."""
    from ..errors import InputError

    try:
        kept = json.loads(path.read_text(encoding="utf-8"))
        same, value = kept["identity"] == json.loads(json.dumps(identity)), kept["value"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"--runs: {path} is not a finished run ({type(e).__name__}); the folder should hold "
                         "only files written by `glassformer ablate` in OUT/cache/runs/shared") from None
    if not same or not isinstance(value, dict):
        raise InputError(f"--runs: {path} holds another run than its name says (its identity differs); "
                         "remove it or take the folder from the same version of glassformer")
    return kept


def run_identity(cfg: ModelConfig, task, spec: TrainSpec, seed: int, evals: dict[str, list[tuple]]) -> dict:
    """What decides a `run_tagging` run built from `cfg` alone: every field of the config and the
    training spec, the task (its repr: a frozen dataclass), the seed, and a digest of the very
    tensors it is scored on (so that two rows share a run only where they score it on the same data)."""
    h = hashlib.sha256()
    for name in sorted(evals):
        h.update(name.encode())
        for batch in evals[name]:
            for t in batch:
                h.update(str(tuple(t.shape)).encode() + t.contiguous().numpy().tobytes())
    return {"config": dataclasses.asdict(cfg), "spec": dataclasses.asdict(spec), "task": repr(task), "seed": seed,
            "evals": h.hexdigest()}


def atomic_write(path: Path, text: str) -> None:
    """Write to a temporary file, then rename: an interrupted run never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f"{path.suffix}.{os.getpid()}.tmp")  # two processes may write one shared run
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


@dataclass
class Outcome:
    variants: list[Variant]
    checks: list[Check]
    setup: str  # what was trained, in one paragraph
    plots: list[tuple[str, str]] = field(default_factory=list)  # (file name, caption)
    notes: str = ""  # what might explain a result that did not reproduce
    extra: dict = field(default_factory=dict)  # curves etc., kept in the JSON
    # the row's quality gate: None, or a sentence starting "met:" or "failed:" (claims_doc); a failed
    # gate makes every check of the row "not tested"
    gate: str | None = None


def tiny_config(vocab_size: int, **changes) -> ModelConfig:
    """A small causal model (decoder-only) used unless an experiment changes a field."""
    # embed_scale: token vectors × sqrt(d_model) as in the paper (§3.4 of Vaswani et al.); without
    # it a token vector of norm ≈ 1 sits beside a sinusoid of norm ≈ sqrt(d_model / 2) and every
    # comparison that touches position or normalisation is biased.
    base = dict(arch="decoder", vocab_size=vocab_size, d_model=64, n_heads=4, n_layers=2, d_ff=256,
                pad_id=PAD, tie_embeddings=False, dropout=0.0, embed_scale=True)
    base.update(changes)
    return ModelConfig(**base)


@dataclass
class TaggingRun:
    result: TrainResult
    metrics: dict  # eval name -> {"accuracy", "exact", "loss"}
    model: torch.nn.Module
    params: int


def run_tagging(cfg: ModelConfig, task: TaggingTask, spec: TrainSpec, seed: int,
                evals: dict[str, list[tuple]] | None = None, model: torch.nn.Module | None = None,
                first_layer: Callable[[torch.nn.Module], torch.nn.Module] | None = None) -> TaggingRun:
    """Build (or take) a model, train it on `task` with `spec`, evaluate it on fixed batches."""
    set_seed(seed)
    if model is None:
        model = build_model(cfg)
    layer = first_layer(model) if first_layer else _first_layer(model)
    result = train(model, task.sampler(spec.batch_size, seed + 10_000), tagging_loss(spec.label_smoothing),
                   spec, first_layer=layer)
    metrics = {}
    for name, batches in (evals or {}).items():
        metrics[name] = evaluate_tagging(model, batches) if not result.diverged else \
            {"accuracy": task.chance, "exact": 0.0, "loss": float("inf")}
    return TaggingRun(result, metrics, model, sum(p.numel() for p in model.parameters()))


# The per-arm sweep of the fair-arms protocol (docs/claims.md; issue 28 §2: ≥ 4 rates over ≥ 2
# seeds, chosen on validation loss). The first protocol (3 rates, 1 seed, final training loss) chose
# 3e-3, the top of its grid, for nearly every arm: the best rate may have lain above it, so the
# grid now reaches 1e-2, and a choice at either end of it is said in the row's log and setup.
LR_GRID = (3e-4, 1e-3, 3e-3, 1e-2)
# Where the best rate is the grid's largest (or smallest), the grid grows that way one rate at a time
# until the best is inside it or these run out: the first full row run under this protocol (`heads`,
# 300 steps) chose 1e-2 at the top, its loss still falling (3.90, 3.23, 2.54, 2.11 nats).
LR_EXTEND_UP = (3e-2, 1e-1)
LR_EXTEND_DOWN = (1e-4,)
SWEEP_SEEDS = (1000, 1001)  # never one of the evaluation seeds (0, 1, …)
SWEEP_SEED = SWEEP_SEEDS[0]  # the seed of an arm's own sweep data (ffn-capacity's fact table)
SWEEP_VALID_SEED = 2000  # the validation batches: neither training data nor the rows' test batches
SWEEP_VALID_BATCHES = 4
DIVERGED = 1e30  # a diverged sweep run's validation loss (JSON has no inf)


SWEEP_WORDS = (f"peak rate per arm from a sweep over {', '.join(f'{r:g}' for r in LR_GRID)} (extended to "
               f"{', '.join(f'{r:g}' for r in LR_EXTEND_UP)} or {', '.join(f'{r:g}' for r in LR_EXTEND_DOWN)} while "
               f"the best is at the top or bottom) × {len(SWEEP_SEEDS)} seeds of its own, chosen on the mean "
               "validation loss")  # the rows' setup sentences


def validation_batches(task, batch_size: int) -> list[tuple]:
    """Held-out batches to choose a rate on: a text task's tuning tail (never the text its test
    windows come from), a synthetic task's own `batches` on a seed of their own (fresh draws of an
    unbounded task), or, for a memorisation task (ffn-capacity's facts, whose validation set is the
    table it learns), the whole table."""
    if hasattr(task, "sweep_batches"):
        return task.sweep_batches(SWEEP_VALID_BATCHES, batch_size, seed=SWEEP_VALID_SEED)
    if hasattr(task, "batches"):
        return task.batches(SWEEP_VALID_BATCHES, batch_size, seed=SWEEP_VALID_SEED)
    ids, targets = task.table()
    return [(ids[i:i + batch_size], targets[i:i + batch_size]) for i in range(0, len(ids), batch_size)]


def choose_lr(losses: dict[str, list[float]]) -> str:
    """The rate (a key of `losses`: rate -> validation loss per sweep seed) with the lowest mean
    validation loss; a rate at which any seed diverged loses to every rate at which none did. On a
    tie the lower rate."""
    def score(rate: str) -> tuple[bool, float, float]:
        values = losses[rate]
        return (any(not math.isfinite(v) or v >= DIVERGED for v in values), sum(values) / len(values), float(rate))
    return min(losses, key=score)


def best_lr(ctx: Context, key: str, cfg: ModelConfig | None, task: TaggingTask, spec: TrainSpec,
            make_model: Callable[[], torch.nn.Module] | None = None) -> float:
    """The peak learning rate of LR_GRID (extended while the best is at an end of it) with the
    lowest mean validation loss for one arm.

    One run per rate and SWEEP_SEEDS seed, each scored on `validation_batches` (held out from
    training and from the row's test batches), so that each arm is compared at its own best rate
    rather than at a rate tuned for another arm; --quick keeps `spec.lr` (the sweep would cost 8
    runs per arm)."""
    if ctx.quick:
        return spec.lr
    valid = {"valid": validation_batches(task, spec.batch_size)}

    def one(lr: float, seed: int) -> float:
        def compute() -> dict:
            run = run_tagging(cfg, task, dataclasses.replace(spec, lr=lr), seed, valid, model=seeded(make_model, seed))
            loss = run.metrics["valid"]["loss"]
            return {"loss": loss if math.isfinite(loss) and not run.result.diverged else DIVERGED}
        # each run kept as it finishes: a sweep of a long row (8+ runs of minutes each) that is
        # interrupted resumes at its next run, not at its first
        spec_lr = dataclasses.replace(spec, lr=lr)
        identity = None if cfg is None else run_identity(cfg, task, spec_lr, seed, valid)
        return ctx.memo(f"lr-sweep-valid.{key}.{lr:g}.s{seed}", compute, identity, share=make_model is None)["loss"]

    def sweep() -> dict:
        runs = {(lr, seed): one(lr, seed) for lr, seed in ctx.order((lr, s) for lr in LR_GRID for s in SWEEP_SEEDS)}
        losses = {str(lr): [runs[lr, seed] for seed in SWEEP_SEEDS] for lr in LR_GRID}
        for extension, end in ((LR_EXTEND_UP, max), (LR_EXTEND_DOWN, min)):
            for lr in extension:
                if float(choose_lr(losses)) != end(map(float, losses)):
                    break
                losses[str(lr)] = [one(lr, seed) for seed in SWEEP_SEEDS]
        return losses
    # the whole sweep, under what decides it (the arm's config, the spec but its rate, the validation
    # windows, the grid and the seeds): a changed arm sweeps again instead of reusing a stale choice
    identity = None if cfg is None else {
        "sweep_of": run_identity(cfg, task, dataclasses.replace(spec, lr=0.0), -1, valid),
        "grid": [LR_GRID, LR_EXTEND_UP, LR_EXTEND_DOWN], "seeds": list(SWEEP_SEEDS)}
    losses = ctx.memo(f"lr-sweep-valid.{key}", sweep, identity, share=make_model is None)
    best = choose_lr(losses)
    tried = sorted(map(float, losses))
    edge = "" if float(best) not in (tried[0], tried[-1]) else " (an end of the grid, after extending it)"
    ctx.log(f"{key}: lr sweep, mean validation loss "
            f"{ {lr: round(sum(v) / len(v), 4) for lr, v in losses.items()} } -> {best}{edge}")
    return float(best)


def seeded(make: Callable[[], torch.nn.Module] | None, seed: int) -> torch.nn.Module | None:
    """`make()` under `seed`: a model built outside `run_tagging` gets the initialisation of its
    seed, not whatever state the generator was left in (which made such arms irreproducible:
    the same seed gave another start depending on what had run before)."""
    if make is None:
        return None
    set_seed(seed)
    return make()


def _first_layer(model: torch.nn.Module) -> torch.nn.Module | None:
    for name in ("dec", "enc"):
        stack = getattr(model, name, None)
        if stack is not None and len(stack):
            return stack[0]
    return None
