"""Real text as an ablation task: next-character prediction on Debian's English fortunes.

Issue 12 item 4 asks for the seeds' architectural claims on text no one here wrote. The corpus is
`glassformer.data.corpora`'s `fortunes-en` (15k quotations, 2.5M characters, shipped by a Debian
package; nothing downloads), split by document with the project's seeded split (10% held out).
Characters, not words: a vocabulary of ~110 symbols keeps the output head small enough that the
models of the synthetic experiments (d_model 64) train on it in seconds.

`CharTextTask` has the interface of `synthetic.TaggingTask` that `base.run_tagging` and
`base.best_lr` use (`sampler`, `batches`, `chance`, `vocab_size`), so every real-text arm goes
through the same trainer and learning-rate sweep as the synthetic ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from ..config import ModelConfig
from .runner import TrainSpec

FIRST_CHAR = 3  # ids 0, 1, 2: pad, bos, eos (runner.PAD, BOS, EOS)
CORPUS = "fortunes-en"
TUNE = 0.05  # the end of the training split kept for the learning-rate sweep's validation loss

# The text rows' model and budget (issue 28 §2: every arm below the character 4-gram of the split,
# 1.813 nats/char, before any comparison). At d_model 64 and 600 steps the rows stopped at 2.18–2.28
# (trigram level). Pilots (stop 53: one thread, this trainer, the paper's warmup + 1/√step) put
# d_model 128 below the gate within 5,000 steps (2 layers, h = 8: 1.785 at 4,000 at 3e-3; h = 16: 1.745
# at 5,000 at 1e-2) while d_model 64 was still above it at 8,000 (h = 16: 1.818). One width and one
# budget for every widened row, so that their common arm (8 heads, d_ff 4 × d_model, Post-LN,
# sinusoidal) is one set of runs that they share (base.run_identity), not one per row.
D_MODEL = 128
N_HEADS = 8
STEPS = 5000


def text_config(vocab_size: int, **changes) -> ModelConfig:
    """The widened text rows' model (base.tiny_config at D_MODEL, N_HEADS, d_ff 4 × D_MODEL), with `changes`."""
    from .base import tiny_config

    return tiny_config(vocab_size, **{"d_model": D_MODEL, "n_heads": N_HEADS, "d_ff": 4 * D_MODEL, **changes})


def text_spec(ctx, steps: int = STEPS) -> TrainSpec:
    """The text rows' training run: `steps` AdamW steps of 32 windows (--quick: 4 of 8), warmup 100."""
    return TrainSpec(steps=ctx.pick(4, steps), batch_size=ctx.pick(8, 32), lr=1e-3, warmup=ctx.pick(2, 100))


@lru_cache(maxsize=2)
def _streams(corpus: str) -> tuple[str, torch.Tensor, torch.Tensor]:
    """(alphabet, train ids, valid ids): documents joined by a blank line, one id per character."""
    from ..data.corpora import load_corpus, split_documents

    train_docs, valid_docs = split_documents(load_corpus(corpus), valid_fraction=0.1, seed=0)
    train_text, valid_text = "\n\n".join(train_docs), "\n\n".join(valid_docs)
    alphabet = "".join(sorted(set(train_text)))
    index = {c: FIRST_CHAR + i for i, c in enumerate(alphabet)}
    unknown = FIRST_CHAR + len(alphabet)  # a character the training split never shows
    encode = lambda text: torch.tensor([index.get(c, unknown) for c in text], dtype=torch.long)  # noqa: E731
    return alphabet, encode(train_text), encode(valid_text)


@dataclass(frozen=True)
class CharTextTask:
    """Windows of `seq_len` characters; the target at every position is the next character."""

    seq_len: int = 64
    corpus: str = CORPUS

    @property
    def vocab_size(self) -> int:
        return FIRST_CHAR + len(_streams(self.corpus)[0]) + 1

    @property
    def chance(self) -> float:
        return 1.0 / (self.vocab_size - FIRST_CHAR)

    def _windows(self, stream: torch.Tensor, batch_size: int, gen: torch.Generator, length: int) -> tuple:
        starts = torch.randint(0, stream.numel() - length - 1, (batch_size,), generator=gen)
        rows = torch.stack([stream[s:s + length + 1] for s in starts.tolist()])  # (batch, seq + 1)
        return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()

    def _fit_tune(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The training split less its last TUNE share (what the models train on), and that last
        share: the learning-rate sweep's validation text, held out from training and from the
        rows' test windows (which come from the valid split)."""
        train = _streams(self.corpus)[1]
        cut = int(train.numel() * (1 - TUNE))
        return train[:cut], train[cut:]

    def sampler(self, batch_size: int, seed: int):
        """next_batch(step): random training windows (the training split less its tuning tail)."""
        gen = torch.Generator().manual_seed(seed)
        fit = self._fit_tune()[0]
        return lambda step: self._windows(fit, batch_size, gen, self.seq_len)

    def sweep_batches(self, n: int, batch_size: int, seed: int) -> list[tuple]:
        """Fixed windows of the tuning tail, for base.best_lr to choose a rate on."""
        gen = torch.Generator().manual_seed(seed)
        tune = self._fit_tune()[1]
        return [self._windows(tune, batch_size, gen, self.seq_len) for _ in range(n)]

    def batches(self, n: int, batch_size: int, seed: int, length: int | None = None) -> list[tuple]:
        """Fixed held-out windows (the valid split), of `length` characters (default: seq_len)."""
        gen = torch.Generator().manual_seed(seed)
        valid = _streams(self.corpus)[2]
        return [self._windows(valid, batch_size, gen, length or self.seq_len) for _ in range(n)]



def run_arms(ctx, arms: dict, spec, lengths: tuple[int, ...], task: CharTextTask | None = None,
             beyond: bool = False) -> dict:
    """Train every arm on the text over ctx.seeds; {arm: {length: [held-out loss per seed]}}.

    `arms`: name -> (ModelConfig, make_model or None). Each arm takes its own best peak rate
    from `base.best_lr` (full protocol); each finished run is cached with `ctx.memo`, so an
    interrupted full run resumes where it stopped. The loss is nats per character on held-out
    windows of each length (the first length is the training length). With `beyond`, the loss at a
    longer length is taken on the positions t ≥ the training length only (`beyond_batches`).
    """
    from dataclasses import replace

    from .base import best_lr, run_identity, run_tagging, seeded

    task = task or CharTextTask()
    evals = {str(n): task.batches(ctx.pick(1, 4), ctx.pick(8, 32), seed=900 + n, length=n) for n in lengths}
    if beyond:
        evals = {n: beyond_batches(b, lengths[0]) if int(n) > lengths[0] else b for n, b in evals.items()}
    out = {}
    for name, (cfg, make) in ctx.order(arms.items()):
        key = name.replace(" ", "_").replace("/", "-")
        lr = ctx.rates[name] = best_lr(ctx, key, cfg, task, spec, make)

        def one(seed: int) -> dict:
            r = run_tagging(cfg, task, replace(spec, lr=lr), seed, evals, model=seeded(make, seed))
            return {n: m["loss"] for n, m in r.metrics.items()}

        def identity(seed: int) -> dict:
            return run_identity(cfg, task, replace(spec, lr=lr), seed, evals)
        # an arm built from its config alone is kept for other rows too (base.run_identity): the text
        # rows share their common arm, so that each row's own runs are only its other arms
        by_seed = {seed: ctx.memo(f"{key}.s{seed}", lambda s=seed: one(s), identity(seed), share=make is None)
                   for seed in ctx.order(ctx.seeds)}
        per_seed = [by_seed[seed] for seed in ctx.seeds]
        out[name] = {n: [p[str(n)] for p in per_seed] for n in lengths}
        ctx.log(f"{name} (lr {lr}): " + ", ".join(f"len {n}: {[round(x, 3) for x in out[name][n] if x]}"
                                                  for n in lengths))
    for name in arms:  # the arms' own order in the row and in its printed rates, whichever trained first
        ctx.rates[name] = ctx.rates.pop(name)
    return {name: out[name] for name in arms}


def beyond_batches(batches: list[tuple], trained: int) -> list[tuple]:
    """The same windows with every target at a position t < `trained` ignored (t from 0 in each
    window): the loss past the training length only (issue 28 §4). Averaged over a whole window of
    4L, the L in-range positions every encoding has trained on are a quarter of the targets and
    dilute any extrapolation effect (the confound `pe-extrapolation` removed for its synthetic task)."""
    from .runner import IGNORE

    out = []
    for ids, targets in batches:
        targets = targets.clone()
        targets[:, :trained] = IGNORE
        out.append((ids, targets))
    return out


def rates_words(ctx) -> str:
    """The peak rate each arm trained at (issue 28 §2: the chosen rate printed in the row)."""
    chosen = ", ".join(f"{name} {lr:g}" for name, lr in ctx.rates.items())
    return f"Chosen peak rates: {chosen}." if not ctx.quick else f"Peak rates (quick: no sweep): {chosen}."


def text_gate(losses: dict, train_len: int, left_out: dict[str, str] | None = None) -> str:
    """The quality gate of a text row (issue 28 §2): every arm's held-out loss at the training
    length below the character 4-gram of the same split; the 1–5-gram baselines are in the text.
    `left_out`: arms the gate does not require, each with the measured reason (said in the gate)."""
    from .ngram import finite_mean, gate_text, text_baselines

    left_out = left_out or {}
    text = gate_text({arm: by_len[train_len] for arm, by_len in losses.items() if arm not in left_out},
                     text_baselines(), left_out=len(left_out))["text"]
    means = {arm: finite_mean(losses[arm][train_len]) for arm in left_out}
    shown = {arm: f"{m:.3f}" if m < float("inf") else "no finite loss" for arm, m in means.items()}
    return text + "".join(f"; not required of `{arm}` ({shown[arm]} here): {why}" for arm, why in left_out.items())
