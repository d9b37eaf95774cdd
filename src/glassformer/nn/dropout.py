"""Dropout (the paper's §5.4 "Residual Dropout"; Srivastava et al. 2014), with a cheaper mask on a CPU.

In training each element is zeroed with probability p and the rest are scaled by 1/(1 − p), so the
expected output is the input; in evaluation it is the identity. The model applies it to each
sublayer's output before the residual Add, to the sum of embeddings and positional encodings, and to
the FFN's hidden activations (nn/layers.py, nn/model.py, nn/feedforward.py).

Why not `nn.Dropout` on a CPU: PyTorch draws the mask with one Mersenne Twister number per element
(`bernoulli_`), and for the auto recipe's small character LM (d_model 128 × 4 layers, 32 windows of
64 characters) dropout 0.1 made the training step 0.67× as fast as none, mostly those draws; with
this mask 0.80× (one thread, bench/dropout_step.py; docs/real-data.md, "At 30 minutes: the
development datasets"; a translator's small tensors gained nothing measurable). Here one 64-bit
draw of the same generator (`random_` over the whole int64 range) gives four 16-bit integers u,
uniform on 0..65535; an element is kept where u ≥ round(p·65536).
So the rate dropped is p rounded to a multiple of 1/65536 (0.1 becomes 6,554/65,536 = 0.100006) and
the kept values are scaled by 1/(1 − that rate): the expectation is still exact. The mask comes from
torch's global generator, so `torch.manual_seed` fixes it as it fixes `nn.Dropout`'s (the two draw
different masks from the same seed). On other devices `F.dropout` is used: CUDA's is already fused.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

LEVELS = 1 << 16  # the mask's resolution: one 16-bit uniform integer per element
# False: `F.dropout` everywhere and SDPA's own dropout, as before this module (bench/dropout_step.py's
# before/after arms, in one process)
CHEAP_MASK = True


def uses_cheap_mask(device: torch.device) -> bool:
    """Whether dropout on `device` draws this module's mask (a CPU, unless CHEAP_MASK is off)."""
    return device.type == "cpu" and CHEAP_MASK


def quantised_rate(p: float) -> float:
    """The rate the mask drops: p rounded to a multiple of 1/65,536."""
    return round(p * LEVELS) / LEVELS


def keep_mask(shape: torch.Size, p: float, device: torch.device | str = "cpu") -> torch.Tensor:
    """A bool mask of `shape`, each element False with probability `quantised_rate(p)`: four 16-bit
    integers from each 64-bit draw of torch's generator, kept where u ≥ round(p·65536)."""
    n = math.prod(shape)
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(1 << 63), None)
    # int16 reads each 16-bit lane as -32768..32767: u ≥ t  ⇔  u − 32768 ≥ t − 32768
    lanes = words.view(torch.int16)[:n].view(shape)
    return lanes >= round(p * LEVELS) - (LEVELS >> 1)


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Inverted dropout: zero each element with probability p (on a CPU: p rounded to 1/65,536) and
    scale the rest by 1/(1 − p), in training; the identity otherwise."""
    if not training or p == 0.0:
        return x
    if not uses_cheap_mask(x.device) or p >= 1.0 or quantised_rate(p) == 0.0:
        return F.dropout(x, p, True)
    # the mask as the scale itself, 0 or 1/(1 − p'), in x's dtype: y = x·m and ∂L/∂x = ∂L/∂y·m are
    # then plain float products (a product with a bool tensor took 25× as long, measured)
    m = keep_mask(x.shape, p, x.device).to(x.dtype).mul_(1.0 / (1.0 - quantised_rate(p)))
    return x * m


class Dropout(nn.Module):
    """`nn.Dropout`'s interface (`p`, train/eval) over `dropout` above."""

    def __init__(self, p: float = 0.0):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
