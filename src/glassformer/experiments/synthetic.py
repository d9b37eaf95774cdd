"""Synthetic tagging tasks the ablations train on, generated in memory (no data files).

A row is a random sequence of symbols; the *rule* gives the target at each position (or none).
Each rule needs a specific kind of attention, which is what makes it a test of a claim:

- `lag(k)`: y_t = x_{t−k} — attend to a fixed offset back (position information, §3).
- `pair(a, b)`: y_t = the ordered pair (x_{t−a}, x_{t−b}) — two patterns at once (multi-head, §2.1).
- `modsum(a, b)`: y_t = (x_{t−a} + x_{t−b}) mod V — gather two tokens, then a non-linear map (FFN, §6.1).
- `first`: at the last position, y = x_0 — a dependency across the whole sequence (§8.2).
- `where(a)`: y_t = ⌊a·t / n⌋, which of `a` equal parts of its row (of n tokens) position t sits in:
  the tokens carry no information, only global position does (句首、句中还是句末 with a = 3, §3.3).

Ids 0, 1, 2 are pad, bos, eos (unused here except pad); symbols start at 3. Rows have random
lengths in [min_len, max_len] and are right-padded, so every batch is a padded batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .runner import IGNORE, PAD

FIRST_SYMBOL = 3
RULES = ("lag", "pair", "modsum", "first", "where")


@dataclass(frozen=True)
class TaggingTask:
    rule: str
    n_symbols: int = 8
    min_len: int = 8
    max_len: int = 16
    a: int = 1
    b: int = 2
    zipf: float = 0.0  # > 0: symbol k drawn with probability ∝ 1/(k+1)^zipf, as word frequencies are

    @property
    def n_classes(self) -> int:
        if self.rule == "where":
            return self.a
        return self.n_symbols ** 2 if self.rule == "pair" else self.n_symbols

    @property
    def vocab_size(self) -> int:
        """Input symbols and target classes share one vocabulary (the model's output head)."""
        return FIRST_SYMBOL + max(self.n_symbols, self.n_classes)

    def batch(self, batch_size: int, gen: torch.Generator, length: int | None = None) -> tuple:
        """(ids, targets), both (batch, seq); a fixed `length` overrides the random lengths."""
        hi = length or self.max_len
        if self.zipf > 0:
            weights = 1.0 / torch.arange(1, self.n_symbols + 1, dtype=torch.float64) ** self.zipf
            x = torch.multinomial(weights, batch_size * hi, replacement=True, generator=gen).view(batch_size, hi)
        else:
            x = torch.randint(0, self.n_symbols, (batch_size, hi), generator=gen)
        if length is None:
            lens = torch.randint(self.min_len, self.max_len + 1, (batch_size,), generator=gen)
        else:
            lens = torch.full((batch_size,), length)
        pos = torch.arange(hi).unsqueeze(0)
        valid = pos < lens.unsqueeze(1)
        y = torch.full_like(x, IGNORE)
        if self.rule == "lag":
            y[:, self.a:] = x[:, :-self.a]
            y[:, :self.a] = IGNORE
        elif self.rule in ("pair", "modsum"):
            k = max(self.a, self.b)
            xa, xb = _shift(x, self.a), _shift(x, self.b)
            y = xa * self.n_symbols + xb if self.rule == "pair" else (xa + xb) % self.n_symbols
            y[:, :k] = IGNORE
        elif self.rule == "first":
            y[torch.arange(batch_size), lens - 1] = x[:, 0]
        elif self.rule == "where":
            y = self.a * pos // lens.unsqueeze(1)  # (batch, seq); padding is masked below
        else:
            raise ValueError(f"rule={self.rule!r} is not one of {', '.join(RULES)}")
        ids = torch.where(valid, x + FIRST_SYMBOL, torch.full_like(x, PAD))
        y = torch.where(valid & (y != IGNORE), y + FIRST_SYMBOL, torch.full_like(y, IGNORE))
        return ids, y

    def batches(self, n: int, batch_size: int, seed: int, length: int | None = None) -> list[tuple]:
        gen = torch.Generator().manual_seed(seed)
        return [self.batch(batch_size, gen, length) for _ in range(n)]

    def sampler(self, batch_size: int, seed: int):
        """next_batch(step) for `runner.train`: a fresh random batch every step."""
        gen = torch.Generator().manual_seed(seed)
        return lambda step: self.batch(batch_size, gen)

    @property
    def chance(self) -> float:
        return 1.0 / self.n_classes


def _shift(x: torch.Tensor, k: int) -> torch.Tensor:
    """x_{t−k} at position t (zeros where t < k; those targets are ignored)."""
    out = torch.zeros_like(x)
    out[:, k:] = x[:, :-k]
    return out
