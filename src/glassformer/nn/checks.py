"""Input checks: a wrong tensor stops with one line that says what is wrong and what would be right."""

from __future__ import annotations

import torch

from ..errors import InputError


def check_ids(ids, vocab_size: int, name: str = "ids") -> None:
    if not isinstance(ids, torch.Tensor):
        raise InputError(f"{name} must be a torch.Tensor of token ids, got {type(ids).__name__}")
    if ids.dtype.is_floating_point or ids.dtype == torch.bool or ids.dtype.is_complex:
        raise InputError(f"{name} must be an integer tensor (torch.long), got {ids.dtype}")
    if ids.dim() != 2:
        hint = f"; add a batch dimension with {name}.unsqueeze(0)" if ids.dim() == 1 else ""
        raise InputError(f"{name} must have shape (batch, seq), got shape {tuple(ids.shape)}{hint}")
    if ids.numel() == 0:
        raise InputError(f"{name} is empty (shape {tuple(ids.shape)}); give at least one token")
    lo, hi = int(ids.min()), int(ids.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise InputError(f"token id {bad} in {name} is outside the vocabulary [0, {vocab_size})")


def check_padding_mask(mask, ids: torch.Tensor, name: str = "padding_mask") -> torch.Tensor:
    if not isinstance(mask, torch.Tensor):
        raise InputError(f"{name} must be a bool tensor, got {type(mask).__name__}")
    if mask.dtype != torch.bool:
        raise InputError(f"{name} must be a bool tensor (True at padding), got {mask.dtype}")
    if mask.shape != ids.shape:
        raise InputError(f"{name} has shape {tuple(mask.shape)} but the ids have shape {tuple(ids.shape)}")
    return mask
