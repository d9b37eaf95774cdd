"""Positional encodings (seed 000 ch. 3): the ways a Transformer learns word order.

Self-attention is permutation-equivariant (§3.1), so order must be injected:
- absolute encodings added to (or concatenated with) the embedding (§3.2, §3.4):
  `SinusoidalPE` (interleaved sin/cos as in §3.2; the half-split layout Marian uses), `LearnedPE`;
- encodings that act inside attention (§3.5): `RelativePositionBias` (T5 buckets),
  `RotaryEmbedding` (RoPE, rotates Q and K), `ALiBi` (a distance penalty on the scores).

Positions are always floating point before the division: the integer-`arange` bug of
seed 003 §3 (every angle rounds to zero) cannot happen here.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from ..errors import InputError


def sinusoid_angles(positions: torch.Tensor, width: int, base: float) -> torch.Tensor:
    """pos / base^(2i/width) for i in [0, width/2), computed in float64 (§3.2)."""
    i = torch.arange(0, width, 2, dtype=torch.float64, device=positions.device)
    inv_freq = 1.0 / (base ** (i / width))  # (width/2,)
    return positions.to(torch.float64).unsqueeze(-1) * inv_freq  # (..., width/2)


class SinusoidalPE(nn.Module):
    """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(same)  (§3.2).

    layout="interleaved" is the paper's and the seed's; layout="half" puts all sines first,
    then all cosines (Marian). No table limit: any position can be computed (§3.3).
    """

    traced = True
    absolute = True

    def __init__(self, width: int, base: float = 10000.0, layout: str = "interleaved"):
        super().__init__()
        self.width, self.base, self.layout = width, base, layout

    def forward(self, positions: torch.Tensor) -> torch.Tensor:  # (..., seq) -> (..., seq, width)
        angles = sinusoid_angles(positions, self.width, self.base)
        sin, cos = angles.sin(), angles.cos()
        if self.layout == "half":
            pe = torch.cat([sin, cos], dim=-1)
        else:
            pe = torch.stack([sin, cos], dim=-1).flatten(-2)  # sin, cos, sin, cos, ...
        return pe.to(torch.get_default_dtype())


class LearnedPE(nn.Module):
    """One trained vector per position (BERT, GPT-2): flexible, but no extrapolation (§3.5).

    `std` is the table's initial scale, with no default: a model passes the std of the token vectors
    the table is added to (`TokenEmbedding.init_std`, ≈ 1 with the √d_model scale), as plain PyTorch's
    nn.Embedding pair does: at GPT-2's 0.02 beside tokens of std 1 the positions start 50× weaker
    than the tokens and the model first learns as if it had no PE (num-en, 600 steps: 14% test exact
    match against 87% at the tokens' scale; docs/real-data.md, "the position table's scale").
    """

    traced = True
    absolute = True

    def __init__(self, max_len: int, width: int, std: float):
        super().__init__()
        self.max_len = max_len
        self.W_pos = nn.Parameter(torch.randn(max_len, width) * std)

    def forward(self, positions: torch.Tensor) -> torch.Tensor:
        top = int(positions.max()) if positions.numel() else 0
        if top >= self.max_len:
            raise InputError(f"position {top} is past the learned position table (max_len="
                             f"{self.max_len}); use a shorter input or pe='sinusoidal'/'rope'")
        return self.W_pos[positions]


def t5_bucket(relative: torch.Tensor, bidirectional: bool, n_buckets: int, max_distance: int) -> torch.Tensor:
    """Map key-minus-query distances to T5's log-spaced buckets (Raffel et al. 2020)."""
    bucket = torch.zeros_like(relative)
    if bidirectional:
        n_buckets //= 2
        bucket = bucket + (relative > 0).long() * n_buckets
        relative = relative.abs()
    else:
        relative = -torch.clamp(relative, max=0)
    max_exact = n_buckets // 2
    is_small = relative < max_exact
    rel_f = relative.float().clamp(min=1)  # log of 0 is never used: masked by is_small
    large = max_exact + (torch.log(rel_f / max_exact) / math.log(max_distance / max_exact)
                         * (n_buckets - max_exact)).long()
    large = torch.clamp(large, max=n_buckets - 1)
    return bucket + torch.where(is_small, relative, large)


class RelativePositionBias(nn.Module):
    """A learned scalar per (head, distance bucket), added to every layer's scores (T5, §3.5)."""

    traced = True
    absolute = False

    def __init__(self, n_heads: int, n_buckets: int, max_distance: int, bidirectional: bool):
        super().__init__()
        self.n_buckets, self.max_distance, self.bidirectional = n_buckets, max_distance, bidirectional
        self.W_rel = nn.Parameter(torch.zeros(n_buckets, n_heads))

    def forward(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        # q_pos (batch, q), k_pos (batch, k) -> bias (batch, head, q, k)
        relative = k_pos.unsqueeze(1) - q_pos.unsqueeze(2)
        buckets = t5_bucket(relative, self.bidirectional, self.n_buckets, self.max_distance)
        return self.W_rel[buckets].permute(0, 3, 1, 2)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """Head slopes m_h = 2^(-8h/n) (Press et al. 2022), interpolated when n is not a power of 2."""
    def power_of_2(n: int) -> list[float]:
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]
    if math.log2(n_heads).is_integer():
        return torch.tensor(power_of_2(n_heads))
    closest = 2 ** math.floor(math.log2(n_heads))
    extra = power_of_2(2 * closest)[0::2][: n_heads - closest]
    return torch.tensor(power_of_2(closest) + extra)


class ALiBi(nn.Module):
    """Attention with Linear Biases: score(i, j) -= m_h * |i - j|; no embedding added (seed 003 §3)."""

    traced = True
    absolute = False

    def __init__(self, n_heads: int):
        super().__init__()
        self.register_buffer("slopes", alibi_slopes(n_heads), persistent=False)

    def forward(self, q_pos: torch.Tensor, k_pos: torch.Tensor) -> torch.Tensor:
        distance = (k_pos.unsqueeze(1) - q_pos.unsqueeze(2)).abs().to(self.slopes.dtype)
        return -self.slopes.view(1, -1, 1, 1) * distance.unsqueeze(1)  # (batch, head, q, k)


class RotaryEmbedding(nn.Module):
    """RoPE (Su et al. 2021, §3.5 note 2): rotate each (x_i, x_{i+d/2}) pair of Q and K by pos·θ_i.

    The half-split pairing is LLaMA's / GPT-NeoX's; q·k then depends only on the offset.
    """

    traced = False
    absolute = False

    def __init__(self, d_k: int, theta: float = 10000.0):
        super().__init__()
        self.d_k, self.theta = d_k, theta

    def forward(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        angles = sinusoid_angles(positions, self.d_k, self.theta)  # (batch, seq, d_k/2)
        angles = torch.cat([angles, angles], dim=-1).unsqueeze(1)  # (batch, 1, seq, d_k)
        dtype = torch.get_default_dtype()
        return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (batch, head, seq, d_k) rotated pairwise: x·cos + rotate_half(x)·sin."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin
