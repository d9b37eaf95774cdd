"""Shared by test_interop_{bert,gpt2,llama}.py: random HF weights and right-padded batches."""

from __future__ import annotations

import torch


def perturb(hf_model, seed: int = 1) -> None:
    """Move every HF parameter away from its init (norm gains off 1, biases off 0), so a wrong or
    missing mapping cannot hide behind a default value. Buffers (rotary inv_freq) are left alone."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in hf_model.named_parameters():  # tied tensors appear once
            r = torch.randn(p.shape, generator=g)
            if p.dim() == 1 and name.endswith("weight"):
                p.copy_(1 + 0.3 * r)  # LayerNorm / RMSNorm gain
            elif p.dim() == 1:
                p.copy_(0.3 * r)  # bias
            else:
                p.copy_(r * p.shape[-1] ** -0.5 * 1.5)


def right_padded(vocab: int, lengths=(9, 6, 3), low: int = 1, seed: int = 2):
    """(ids, padding_mask) with rows of the given lengths, padded on the right with id 0."""
    g = torch.Generator().manual_seed(seed)
    width = max(lengths)
    ids = torch.randint(low, vocab, (len(lengths), width), generator=g)
    pad = torch.arange(width)[None] >= torch.tensor(lengths)[:, None]
    return ids.masked_fill(pad, 0), pad


def max_diff(ours: torch.Tensor, theirs: torch.Tensor, pad: torch.Tensor | None = None) -> float:
    """Largest |ours - theirs| over the non-padding positions."""
    d = (ours - theirs).abs()
    return float((d if pad is None else d[~pad]).max())
