"""Token embedding (seed 000 §7.2): a lookup table from token id to a d_model vector."""

from __future__ import annotations

import math

import torch
from torch import nn


class TokenEmbedding(nn.Module):
    """E = W_E[ids], optionally × sqrt(d_model) (the 2017 paper §3.4; Marian).

    The paper scales so that the embedding is not drowned by the unit-amplitude sinusoids.
    """

    traced = True

    def __init__(self, vocab_size: int, width: int, scale: bool = False, d_model: int | None = None):
        super().__init__()
        self.W_E = nn.Parameter(torch.randn(vocab_size, width) * width ** -0.5)
        self.scale = math.sqrt(d_model or width) if scale else 1.0

    @property
    def init_std(self) -> float:
        """The std of the vectors it returns at initialisation: width^-1/2 × the scale."""
        return self.W_E.shape[1] ** -0.5 * self.scale

    def forward(self, ids: torch.Tensor) -> torch.Tensor:  # (batch, seq) -> (batch, seq, width)
        e = self.W_E[ids]
        return e * self.scale if self.scale != 1.0 else e
