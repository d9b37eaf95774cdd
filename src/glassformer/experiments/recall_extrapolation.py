"""§3.3, §3.5 and seed 003 §3 with tasks that need position at a distance: copy and associative recall,
trained on rows of ≤ 32 tokens and tested on rows of 64, 128 and 256.

`pe-extrapolation` uses `lag(1)`, which a causal model can solve with its mask alone. Here:
- *copy*: x_1 … x_p SEP x_1 … x_p; after SEP the target is the next token of the copy, so each
  position must find the token p places back (or the token after the previous occurrence);
- *associative recall* (multi-query, Arora et al. 2023): k_1 v_1 … k_p v_p then the p keys again
  in another order; the target at each repeated key is its value.
Arms: sinusoidal, learned (a table of 256 rows, rows ≥ 31 (copy), ≥ 30 (recall) never trained), ALiBi
and none (RoPE is in `real-pe`; it was cut here for time).

Two confounds of the first design (issue 28 §4) are removed as in `pe-extrapolation`, with its helpers:
- past L the metric is the token accuracy on the targets at positions t ≥ L only (`side_scores`), with
  the accuracy on the positions < L of the same rows beside it where there are any. On these tasks
  the first design mixed in little (copy at 64: 1 target of 31 sits before 32; recall: none), which the
  setup states from a count on the test rows, with how far back each target's source sits;
- the learned table is initialised at the token vectors' scale (`token_scale_positions`): at GPT-2's
  N(0, 0.02²) its untrained rows were ≈ 0 beside token vectors of norm ≈ 8, i.e. no PE past L.
The accuracy of whole rows at L is kept: the learned-at-training-length gate (`gates.learned_gate`)
reads the variants "<task> <encoding> @ 32".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Callable

import torch

from ..nn import build_model
from .base import Context, Outcome, best_lr, run_identity, run_tagging, seeded, tiny_config
from .pe_extrapolation import side_scores, token_scale_positions
from .report import line_plot
from .runner import IGNORE, PAD, TrainSpec, evaluate_tagging
from .verdict import Check, Variant, mean_std

ID = "recall-extrapolation"
SECTION = "seed 000 §3.3, §3.5; seed 003 §3"
CLAIM = ("sin/cos can encode positions never seen in training, so a model trained on short inputs still "
         "works on longer ones (perhaps slightly worse, not a complete failure); a learned table cannot "
         "extrapolate; ALiBi works better and supports longer sequences. (Tested on copy and recall.)")
SEEDS = 5
# RoPE was cut for time after the first full run (it fed side checks only; real-pe keeps it)
ENCODINGS = ("sinusoidal", "learned", "alibi", "none")
KINDS = ("copy", "recall")
TRAIN_LEN, TEST_LENS = 32, (64, 128, 256)
FIRST = 4  # 0 pad, 1 bos, 2 eos, 3 SEP


@dataclass(frozen=True)
class RecallTask:
    """`copy` or `recall` rows of at most `max_len` tokens (random size), right-padded."""

    kind: str = "copy"
    max_len: int = TRAIN_LEN
    n_keys: int = 96  # ≥ the pairs of a 256-token recall row: keys are distinct within a row
    n_values: int = 16
    n_symbols: int = 64  # copy's alphabet

    @property
    def n_classes(self) -> int:
        return self.n_symbols if self.kind == "copy" else self.n_values

    @property
    def vocab_size(self) -> int:
        return FIRST + (self.n_symbols if self.kind == "copy" else self.n_keys + self.n_values)

    @property
    def chance(self) -> float:
        return 1.0 / self.n_classes

    def _row(self, p: int, gen: torch.Generator) -> tuple[list[int], list[int]]:
        if self.kind == "copy":
            x = (FIRST + torch.randint(0, self.n_symbols, (p,), generator=gen)).tolist()
            ids = x + [3] + x
            targets = [IGNORE] * p + x + [IGNORE]  # at SEP: x_1; at the copy of x_i: x_{i+1}
            return ids, targets
        keys = (FIRST + torch.randperm(self.n_keys, generator=gen)[:p]).tolist()
        vals = (FIRST + self.n_keys + torch.randint(0, self.n_values, (p,), generator=gen)).tolist()
        order = torch.randperm(p, generator=gen).tolist()
        ids = [t for kv in zip(keys, vals) for t in kv] + [keys[i] for i in order]
        return ids, [IGNORE] * (2 * p) + [vals[i] for i in order]

    def _size(self, length: int) -> int:
        """The largest p whose row fits in `length` tokens."""
        return (length - 1) // 2 if self.kind == "copy" else length // 3

    def batch(self, batch_size: int, gen: torch.Generator, length: int | None = None) -> tuple:
        """(ids, targets) (batch, seq); a fixed `length` gives rows of exactly that many sizes' worth."""
        lo = 2
        hi = self._size(length or self.max_len)
        sizes = [hi] * batch_size if length else torch.randint(lo, hi + 1, (batch_size,), generator=gen).tolist()
        rows = [self._row(p, gen) for p in sizes]
        width = max(len(r[0]) for r in rows)
        ids = torch.tensor([r[0] + [PAD] * (width - len(r[0])) for r in rows])
        targets = torch.tensor([r[1] + [IGNORE] * (width - len(r[1])) for r in rows])
        return ids, targets

    def sampler(self, batch_size: int, seed: int):
        gen = torch.Generator().manual_seed(seed)
        return lambda step: self.batch(batch_size, gen)

    def batches(self, n: int, batch_size: int, seed: int, length: int | None = None) -> list[tuple]:
        gen = torch.Generator().manual_seed(seed)
        return [self.batch(batch_size, gen, length) for _ in range(n)]


def model_maker(cfg) -> Callable[[], torch.nn.Module] | None:
    """How an arm's model is built: the learned table at the token vectors' scale, the others as usual."""
    return (lambda: token_scale_positions(build_model(cfg))) if cfg.pe == "learned" else None


def targets_per_row(targets: torch.Tensor, L: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(batch,) counts of the scored targets at positions ≥ L and < L of each row."""
    scored = targets != IGNORE
    past = torch.arange(targets.shape[1]) >= L
    return (scored & past).sum(1), (scored & ~past).sum(1)


def source_distance(ids: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(batch, seq): how many places back the token each target names sits (0 where nothing is scored),
    found from the row's content: copy reads the token p places back (p = the SEP position), recall the
    value after the earlier occurrence of the query key (keys are distinct within a row). Each source is
    checked to hold the target, so the distance is measured, not assumed from the task's definition."""
    dist = torch.zeros_like(targets)
    for b, (row, ys) in enumerate(zip(ids.tolist(), targets.tolist())):
        sep = row.index(3) if 3 in row else None  # copy rows only: recall has no SEP
        for t, y in enumerate(ys):
            if y == IGNORE:
                continue
            src = t - sep if sep is not None else row.index(row[t]) + 1
            assert src < t and row[src] == y, f"row {b}, position {t}: target {y} is not at {src}"
            dist[b, t] = t - src
    return dist


def run(ctx: Context) -> Outcome:
    # 1500 steps (2000 in the first full report: cut for time, see docs/claims.md)
    spec = TrainSpec(steps=ctx.pick(3, 1500), batch_size=ctx.pick(8, 32), lr=1e-3, warmup=ctx.pick(2, 100))
    lengths = (TRAIN_LEN,) + TEST_LENS
    tasks = {kind: RecallTask(kind) for kind in KINDS}
    evals = {kind: {n: task.batches(ctx.pick(1, 4), ctx.pick(8, 32), seed=700 + n, length=n) for n in lengths}
             for kind, task in tasks.items()}
    lrs, results = {}, {}
    # `none` last over both tasks: it feeds side checks only, so a cut for time drops it first
    for pe in ENCODINGS:
        for kind, task in tasks.items():
            results[kind, pe] = _arm(ctx, task, pe, spec, evals[kind], lrs)
    variants, checks, series, facts = [], [], {}, []
    for kind, task in tasks.items():
        facts.append(_targets_past_L(kind, evals[kind]))
        for pe in ENCODINGS:
            per_seed = results[kind, pe]
            variants.append(Variant(f"{kind} {pe} @ {TRAIN_LEN}", "token accuracy at the training length",
                                    [p[str(TRAIN_LEN)] for p in per_seed]))
            for n in TEST_LENS:
                variants.append(Variant(f"{kind} {pe} @ {n}", f"token accuracy on positions ≥ {TRAIN_LEN} only",
                                        [p[str(n)] for p in per_seed]))
                if any(math.isfinite(p[f"within {n}"]) for p in per_seed):  # recall: no target < L past 32
                    variants.append(Variant(f"{kind} {pe} within L @ {n}",
                                            f"token accuracy on positions < {TRAIN_LEN} of the same rows",
                                            [p[f"within {n}"] for p in per_seed]))
            series[f"{kind}, {pe}"] = (TEST_LENS, [mean_std([p[str(n)] for p in per_seed])[0] for n in TEST_LENS])
        floor = task.chance + 0.02
        # δ as pre-registered before the first full run: the metric is still token accuracy (now on
        # the positions ≥ L only, issue 28 §4), so its units and the δ's meaning are unchanged
        checks += [
            Check(f"{kind}: sinusoidal extrapolates to 64 better than a learned table (token-scale init, rows ≥ L "
                  "untrained)", f"{kind} sinusoidal @ 64", f"{kind} learned @ 64", True, 0.1, ceiling=0.98,
                  floor=floor),
            Check(f"{kind}: ALiBi beats sinusoidal at 256 (8× the training length)", f"{kind} alibi @ 256",
                  f"{kind} sinusoidal @ 256", True, 0.05, ceiling=0.98, floor=floor,
                  published="Press et al. 2022: ALiBi trained at L extrapolates to ≫ L; sinusoidal does not"),
            Check(f"{kind}: no PE (causal mask only) beats sinusoidal at 256", f"{kind} none @ 256",
                  f"{kind} sinusoidal @ 256", True, 0.05, main=False, ceiling=0.98, floor=floor),
        ]
    line_plot(ctx.out_dir / "recall_extrapolation.png", series, f"test length (trained on ≤ {TRAIN_LEN})",
              f"token accuracy on positions ≥ {TRAIN_LEN}", "Copy and associative recall past the training length",
              logx=True)
    longest = {kind: evals[kind][TRAIN_LEN][0][0].shape[1] for kind in KINDS}  # rows of exactly L: the longest
    setup = (f"Decoder-only, 2 layers, d_model 64, 4 heads, d_ff 256, Post-LN, embed_scale on. Copy (64 symbols) "
             f"and multi-query associative recall (96 keys, 16 values), rows of 5–{longest['copy']} (copy) and "
             f"6–{longest['recall']} (recall) tokens; {spec.steps} steps, batch {spec.batch_size}, warmup "
             f"{spec.warmup}, peak rate per arm: {lrs}. Tested on rows of exactly {list(lengths)} tokens' worth "
             f"(copy 2p + 1, recall 3p tokens). Past {TRAIN_LEN} the metric is the token accuracy on the targets "
             f"at positions ≥ {TRAIN_LEN} only (counted from 0); at {TRAIN_LEN}, the accuracy of the whole row "
             f"(the learned-at-training-length gate). Scored targets per row, counted on the test rows: "
             f"{'; '.join(facts)}. So the first design's whole-row accuracy mixed in one target per copy row at 64 "
             f"and none elsewhere; that one (\"within L\") is the SEP target at position {longest['copy']}, itself "
             f"past the longest training row, so the in-range reference is the accuracy at {TRAIN_LEN}. The "
             f"learned table has {max(TEST_LENS)} rows, of which rows ≥ {longest['copy']} (copy) and ≥ "
             f"{longest['recall']} (recall) are never trained (the longest training rows); it is initialised at "
             "the token vectors' std (≈ 1 with the √d_model scale), not GPT-2's 0.02, so that past L it is a "
             "random position of the tokens' size, not no PE. δ as pre-registered (token accuracy; unchanged by "
             "the restriction to positions ≥ L).")
    return Outcome(variants, checks, setup,
                   plots=[("recall_extrapolation.png", f"Accuracy on positions ≥ {TRAIN_LEN} against test length, "
                                                       "per task and encoding")])


def _arm(ctx: Context, task: RecallTask, pe: str, spec: TrainSpec, evals: dict, lrs: dict) -> list[dict]:
    """One encoding on one task, per seed: accuracy at L; past L, accuracy beyond and within L."""
    cfg = tiny_config(task.vocab_size, pe=pe, max_len=max(TEST_LENS))
    make = model_maker(cfg)
    key = f"{task.kind}.{pe}"
    lrs[key] = best_lr(ctx, key, cfg, task, spec, make_model=make)

    def one(seed: int) -> dict:
        model = run_tagging(cfg, task, replace(spec, lr=lrs[key]), seed, model=seeded(make, seed)).model
        out = {str(TRAIN_LEN): evaluate_tagging(model, evals[TRAIN_LEN])["accuracy"]}
        for n in TEST_LENS:
            sides = side_scores(model, evals[n], TRAIN_LEN)
            out[str(n)], out[f"within {n}"] = sides["beyond"]["accuracy"], sides["within"]["accuracy"]
        return out
    scored = {str(n): batches for n, batches in evals.items()}
    per_seed = [ctx.memo(f"{key}.s{seed}", lambda s=seed: one(s),
                         run_identity(cfg, task, replace(spec, lr=lrs[key]), seed, scored), share=False)
                for seed in ctx.seeds]
    ctx.log(f"{key}: " + "; ".join(f"{n}: {[round(p[str(n)], 3) for p in per_seed]}"
                                   for n in (TRAIN_LEN,) + TEST_LENS))
    return per_seed


def _targets_past_L(kind: str, evals: dict) -> str:
    """'copy at 64: 30 of 31 beyond 32, source 31 back; …', counted on the rows of each length; the
    distances of the longest training rows (those of exactly L) bound what training ever asked for."""
    parts = []
    for n in (TRAIN_LEN,) + TEST_LENS:
        beyond, total, dists = set(), set(), []
        for ids, targets in evals[n]:
            scored = targets != IGNORE
            past = scored & (torch.arange(ids.shape[1]) >= TRAIN_LEN)  # (batch, seq)
            b, w = targets_per_row(targets, TRAIN_LEN)
            beyond |= set(b.tolist())
            total |= set((b + w).tolist())
            dists += source_distance(ids, targets)[past if n > TRAIN_LEN else scored].tolist()
        d = torch.tensor(dists, dtype=torch.float)
        span = _span({int(d.min()), int(d.max())})
        if n == TRAIN_LEN:
            parts.append(f"{kind} in training: source at most {int(d.max())} back")
        else:
            parts.append(f"at {n}: {_span(beyond)} of {_span(total)} beyond {TRAIN_LEN}, source {span} back"
                         + (f" (median {float(d.median()):g})" if d.min() < d.max() else ""))
    return ", ".join(parts)


def _span(values: set[int]) -> str:
    return str(min(values)) if min(values) == max(values) else f"{min(values)}–{max(values)}"
