"""Seed 000 §5.3: padding disturbs BatchNorm's statistics; a padding-aware BatchNorm does not.

"变长序列要填充——……那些填充位的值会干扰归一化的统计量". Measured exactly, without training: one
batch of variable-length sequences (token vectors ~ N(0, 1), [PAD] positions zero, as a zeroed
padding embedding gives), normalised in training mode; then the same sequences padded to twice
the length. A norm whose statistics ignore padding gives the real tokens the same outputs both
times. The naive reference is torch.nn.BatchNorm1d over every (sentence, position); glassformer's
BatchNorm takes the padding mask and keeps only real tokens in its statistics.
"""

from __future__ import annotations

import torch

from ..nn.norms import BatchNorm, LayerNorm
from .base import Context, Outcome
from .verdict import Exact, Variant

ID = "batchnorm-padding"
SECTION = "seed 000 §5.3"
CLAIM = ("Variable-length sequences must be padded, and the values at the [PAD] positions disturb the "
         "normalisation statistics (of BatchNorm, which pools over the batch).")
D = 64
SEEDS = 1  # exact: one deterministic batch


def batch(pad_to: int, lengths: list[int], gen_seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(x, padding mask): the same real tokens whatever the padded length."""
    g = torch.Generator().manual_seed(gen_seed)
    real = [torch.randn(n, D, generator=g, dtype=torch.float64) for n in lengths]
    x = torch.zeros(len(lengths), pad_to, D, dtype=torch.float64)
    mask = torch.ones(len(lengths), pad_to, dtype=torch.bool)  # True = padding
    for i, r in enumerate(real):
        x[i, :len(r)] = r
        mask[i, :len(r)] = False
    return x, mask


def _torch_naive(x: torch.Tensor) -> torch.Tensor:
    bn = torch.nn.BatchNorm1d(D, dtype=torch.float64).train()
    with torch.no_grad():
        return bn(x.reshape(-1, D)).reshape(x.shape)


def _change(norm, lengths: list[int], use_mask: bool) -> float:
    """max |Δ| of the real tokens' outputs between padding to max(lengths) and to 2·max(lengths)."""
    short, long_ = max(lengths), 2 * max(lengths)
    outs = []
    with torch.no_grad():
        return _max_change(norm, lengths, use_mask, short, long_, outs)


def _max_change(norm, lengths, use_mask, short, long_, outs) -> float:
    for pad_to in (short, long_):
        x, mask = batch(pad_to, lengths)
        y = norm(x, mask if use_mask else None) if norm is not None else _torch_naive(x)
        outs.append(y[:, :short][~mask[:, :short]])
    return float((outs[0] - outs[1]).abs().max())


def run(ctx: Context) -> Outcome:
    lengths = [3, 7, 12, 16]
    aware = BatchNorm(D).double().train()
    layer = LayerNorm(D).double()
    x, mask = batch(16, lengths)
    with torch.no_grad():
        ours_naive = BatchNorm(D).double().train()(x, None)
    variants = [
        Variant("naive BatchNorm (torch BatchNorm1d): max |Δ|", "max change of a real token's output",
                [_change(None, lengths, False)]),
        Variant("padding-aware BatchNorm (glassformer): max |Δ|", "max change of a real token's output",
                [_change(aware, lengths, True)]),
        Variant("LayerNorm: max |Δ|", "max change of a real token's output", [_change(layer, lengths, False)]),
        Variant("glassformer without a mask vs torch", "max |difference|",
                [float((ours_naive - _torch_naive(x)).abs().max())]),
    ]
    checks = [
        Exact("padding disturbs BatchNorm: the real tokens' outputs change when the batch is padded further "
              "(max |Δ| ≥ 0.01)", "naive BatchNorm (torch BatchNorm1d): max |Δ|", ">=", 0.01),
        Exact("(the fix) a padding-aware BatchNorm is unaffected (max |Δ| ≤ 1e-9)",
              "padding-aware BatchNorm (glassformer): max |Δ|", "<=", 1e-9, main=False),
        Exact("(contrast) LayerNorm normalises each token on its own: unaffected (max |Δ| ≤ 1e-9)",
              "LayerNorm: max |Δ|", "<=", 1e-9, main=False),
        Exact("(control) glassformer's BatchNorm without a mask is torch's BatchNorm1d",
              "glassformer without a mask vs torch", "<=", 1e-9, main=False),
    ]
    setup = (f"Float64; {len(lengths)} sequences of {lengths} tokens, d_model {D}, token vectors N(0, 1), [PAD] "
             f"vectors 0; training-mode statistics; padded to {max(lengths)} and to {2 * max(lengths)}.")
    return Outcome(variants, checks, setup)
