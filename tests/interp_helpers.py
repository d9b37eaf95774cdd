"""Oracles for tests/test_interp_*.py: the same edits made inside Hugging Face models, by their own modules.

`edit_input(module, fn)` rewrites what enters a HF Linear/Conv1D (the concatenated heads entering
W_O: o_proj, c_proj, out_proj, attention.output.dense); `edit_output(module, fn)` rewrites what
leaves one (k_proj, v_proj, a whole block). Each returns the handle; remove it after the run.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch


@contextmanager
def edit_input(module, fn):
    h = module.register_forward_pre_hook(lambda _m, args: (fn(args[0].clone()),) + tuple(args[1:]))
    try:
        yield
    finally:
        h.remove()


@contextmanager
def edit_output(module, fn):
    def hook(_m, _args, out):
        if isinstance(out, tuple):
            return (fn(out[0].clone()),) + tuple(out[1:])
        return fn(out.clone())
    h = module.register_forward_hook(hook)
    try:
        yield
    finally:
        h.remove()


@contextmanager
def record_input(module, store: dict, key: str):
    h = module.register_forward_pre_hook(lambda _m, args: store.__setitem__(key, args[0].detach().clone()))
    try:
        yield
    finally:
        h.remove()


@contextmanager
def record_output(module, store: dict, key: str):
    def hook(_m, _args, out):
        store[key] = (out[0] if isinstance(out, tuple) else out).detach().clone()
    h = module.register_forward_hook(hook)
    try:
        yield
    finally:
        h.remove()


def head_cols(h: int, d_k: int) -> slice:
    """Features of head h in the concatenated heads (HF's layout and ours: head-major)."""
    return slice(h * d_k, (h + 1) * d_k)


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.detach().double() - b.detach().double()).abs().max())
