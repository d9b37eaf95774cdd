"""Length-bucketed, padded batches in a deterministic, resumable order.

Sentences of similar length go together so little compute is spent on padding (the 2017 paper
§5.1: "sentence pairs were batched together by approximate sequence length"). Each epoch:

1. shuffle all examples with a generator seeded by (seed, epoch);
2. cut the shuffled list into pools of `pool` batches, sort each pool by length (source length, then
   target length: `bucket_key`; each side is padded to its own longest);
3. cut pools into batches and shuffle the batch order with the same generator.

The order depends only on (seed, epoch), so a position is two integers — (epoch, index) — and
`--resume` continues exactly where the run stopped. With several workers (DistributedDataParallel)
each takes every `world`-th batch, starting at its `rank`.
"""

from __future__ import annotations

import random
from typing import Sequence

import torch

from ..tokenize import pad_batch


def epoch_batches(lengths: Sequence[int | tuple[int, ...]], batch_size: int, seed: int, epoch: int,
                  pool: int = 50) -> list[list[int]]:
    """Example indices of every batch of `epoch`, in training order; `lengths` are what a pool is
    sorted by (a length, or `bucket_key`'s lengths per side)."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    order = torch.randperm(len(lengths), generator=g).tolist()
    batches: list[list[int]] = []
    span = batch_size * pool
    for start in range(0, len(order), span):
        chunk = sorted(order[start:start + span], key=lambda i: lengths[i])  # stable: ties keep shuffle
        batches.extend(chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size))
    perm = torch.randperm(len(batches), generator=g).tolist()
    return [batches[i] for i in perm]


class BatchStream:
    """An endless stream of batches over epochs; `state_dict()` is the position to resume from."""

    def __init__(self, lengths: Sequence[int | tuple[int, ...]], batch_size: int, seed: int,
                 rank: int = 0, world: int = 1):
        if not lengths:
            raise ValueError("no training examples")
        self.lengths, self.batch_size, self.seed = list(lengths), batch_size, seed
        self.rank, self.world = rank, world
        self.epoch, self.index = 0, 0
        self._batches: list[list[int]] | None = None

    def _current(self) -> list[list[int]]:
        if self._batches is None:
            every = epoch_batches(self.lengths, self.batch_size, self.seed, self.epoch)
            usable = max(self.world, len(every) - len(every) % self.world)  # equal share per worker
            every = (every * self.world)[:usable] if len(every) < self.world else every[:usable]
            self._batches = every[self.rank::self.world]
        return self._batches

    def next(self) -> list[int]:
        batches = self._current()
        if self.index >= len(batches):
            self.epoch, self.index, self._batches = self.epoch + 1, 0, None
            batches = self._current()
        batch = batches[self.index]
        self.index += 1
        return batch

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "index": self.index}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.index, self._batches = int(state["epoch"]), int(state["index"]), None


def collate_seq2seq(examples: Sequence[tuple[list[int], list[int]]], bos: int, eos: int, pad: int) -> dict:
    """src (batch, src_len); tgt_in = <bos> y (teacher forcing); tgt_out = y <eos> (what to predict)."""
    return {
        "src": pad_batch([s for s, _ in examples], pad),
        "tgt_in": pad_batch([[bos, *t] for _, t in examples], pad),
        "tgt_out": pad_batch([[*t, eos] for _, t in examples], pad),
    }


class ScoredWindow(tuple):
    """A held-out LM window `(ids,)` whose first `skip` targets another window already scored
    (`windows(..., stride)`): they are read as context and not counted."""

    skip: int = 0


def windows(stream: Sequence[int], block_size: int, stride: int | None = None) -> list[tuple]:
    """`(ids,)` windows of block_size + 1 tokens (block_size targets each) over a token stream.

    Without `stride` they do not overlap (every target once, a window starts cold; training cuts its
    windows afresh every epoch: `ShiftingWindows`).
    With it they start every `stride` tokens and each scores only the targets no earlier window
    scored (`ScoredWindow.skip`): every target is still scored once, and all but the first
    window's read at least block_size − stride tokens before them — how held-out text is scored
    (a window that starts cold charges its first characters for context it was never shown; an
    n-gram baseline always has its n − 1)."""
    scored = stride is not None  # held-out windows say what they skip, even where it is 0
    stride = block_size if stride is None else stride
    if not 1 <= stride <= block_size:
        raise ValueError(f"stride {stride} must be in 1..block_size {block_size}")
    out: list[tuple] = []
    covered = 0  # targets 1..covered are scored (target j is stream[j], read after stream[:j])
    for start in range(0, max(len(stream) - 1, 0), stride):
        ids = list(stream[start:start + block_size + 1])
        if scored:
            w = ScoredWindow([ids])
            w.skip = max(covered - start, 0)
        else:
            w = tuple([ids])
        out.append(w)
        covered = start + len(ids) - 1
        if covered >= len(stream) - 1:
            break
    return out


class ShiftingWindows(Sequence):
    """A language model's training windows, cut afresh every epoch at an offset drawn from (seed, epoch).

    Cut once, a text's windows start at the same characters every pass, so a target is read after the
    same context each time and a window's first targets never get more: over the tens of passes a small
    text takes in a CPU budget, the model learns those exact windows. Moved by 0..block_size − 1 tokens
    each epoch (epoch 0 at 0), every target is read after a different stretch of the text each pass —
    as nanoGPT samples windows at random offsets, but resumable: the offset is a function of (seed,
    epoch), as `epoch_batches`' order is. Measured on development texts: docs/real-data.md, "Windows cut
    afresh every epoch". `at_epoch(e)` sets the cut; the count stays fixed, so a batch's indices (from
    `BatchStream`) name whole windows at every offset (the tokens before the offset, and after the last
    whole window, sit out that epoch)."""

    def __init__(self, stream: Sequence[int], block_size: int, seed: int):
        self.stream, self.block_size, self.seed = list(stream), block_size, seed
        whole = (len(self.stream) - 1) // block_size  # whole windows at offset 0
        self.count = max(1, whole - 1)  # whole windows at every offset (one, if the text holds no more)
        # the furthest the cut can move and keep `count` windows whole (less than a window on a short text)
        self.max_offset = min(block_size - 1, max(0, len(self.stream) - 1 - self.count * block_size))
        self.offset = 0

    def at_epoch(self, epoch: int) -> "ShiftingWindows":
        if epoch and self.max_offset:
            self.offset = random.Random(self.seed * 1_000_003 + epoch).randint(0, self.max_offset)
        else:
            self.offset = 0
        return self

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> tuple:
        if not 0 <= i < self.count:
            raise IndexError(i)
        start = self.offset + i * self.block_size
        return (self.stream[start:start + self.block_size + 1],)


def collate_lm(examples: Sequence[tuple[list[int]]], pad: int) -> dict:
    """A window of ids predicts itself shifted by one: inp = ids[:-1], out = ids[1:] (targets a
    `ScoredWindow` skips are set to `pad`, which every loss ignores)."""
    ids = pad_batch([e[0] for e in examples], pad)
    out = ids[:, 1:]
    skips = [getattr(e, "skip", 0) for e in examples]
    if any(skips):
        out = out.clone()  # a view of ids: inp must keep the tokens
        for row, k in enumerate(skips):
            out[row, :k] = pad
    return {"inp": ids[:, :-1], "out": out}


def example_length(example: tuple) -> int:
    return max(len(part) for part in example)


def bucket_key(example: tuple) -> tuple[int, ...]:
    """What a pool is sorted by: each side's length, source first.

    Each side is padded to its own longest, so sorting by the longer side alone left the other
    side's lengths mixed within a batch: 17% of the positions a step computed on kanji → kana
    pairs were padding, 9% on CMUdict; sorted by (source, target) the same pools leave 6% on both
    (bench/train_step.py; a whole epoch sorted would leave under 1%, at the price of less random
    batches). Padding never changes a loss (masked keys, ignored targets), only its cost.
    """
    return tuple(len(part) for part in example)
