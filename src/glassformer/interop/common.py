"""Shared weight-copy helpers for the Hugging Face converters (used by hf_bert, hf_gpt2, hf_llama).

Every converter works on two plain things — the HF config as a dict and the HF state dict — so
the same code loads a live `transformers` model (`convert(hf_model)`) and a folder of files
without `transformers` installed (`glassformer.pretrained`). Hugging Face's `nn.Linear` stores
weights (out, in) and computes x·Wᵀ + b; the seed writes x·W + b with W (in, out), so linear
weights are transposed once here, and per-head projections are cut into (n_heads, d_model, d_k).
"""

from __future__ import annotations

from typing import Any, Mapping

import torch
from torch import nn

from ..errors import InputError


def require(ok: bool, message: str) -> None:
    """Stop with one line (InputError) when a checkpoint uses something glassformer cannot mirror."""
    if not ok:
        raise InputError(message)


def hf_parts(hf_model) -> tuple[dict[str, Any], dict[str, torch.Tensor]]:
    """(config dict, state dict) of a live Hugging Face model."""
    return hf_model.config.to_dict(), dict(hf_model.state_dict())


class Weights:
    """A state dict read under a prefix; a missing tensor stops with one line naming it.

    `prefixes` are tried in order ("bert." for BertForMaskedLM, "" for BertModel, ...), and the
    first one under which `probe` exists is kept.
    """

    def __init__(self, state: Mapping[str, torch.Tensor], prefixes: tuple[str, ...], probe: str):
        self.state = state
        found = [p for p in prefixes if p + probe in state]
        require(bool(found), f"no '{probe}' weight under any of the prefixes "
                             f"{', '.join(repr(p) for p in prefixes)}; is this the right model family?")
        self.prefix = found[0]

    def has(self, name: str) -> bool:
        return self.prefix + name in self.state

    def __call__(self, name: str) -> torch.Tensor:
        key = self.prefix + name
        require(key in self.state, f"the checkpoint has no weight '{key}'; it does not match its config")
        return self.state[key].detach()


def linear_in_out(weight: torch.Tensor) -> torch.Tensor:
    """nn.Linear weight (out, in) -> the seed's W (in, out)."""
    return weight.t()


def split_heads(W: torch.Tensor, n_heads: int, d_k: int) -> torch.Tensor:
    """W (d_model, n_heads·d_k), heads side by side as HF lays them -> (n_heads, d_model, d_k)."""
    return W.reshape(W.shape[0], n_heads, d_k).permute(1, 0, 2)


def split_head_bias(b: torch.Tensor | None, n_heads: int, d_k: int) -> torch.Tensor | None:
    return None if b is None else b.reshape(n_heads, d_k)


def put(param: nn.Parameter | None, value: torch.Tensor | None, name: str) -> None:
    """Copy `value` into `param` (shapes must agree; dtype follows the glassformer model)."""
    if param is None and value is None:
        return
    require(param is not None, f"the checkpoint has a '{name}' that the converted config has no place for")
    require(value is not None, f"the checkpoint lacks '{name}' that the converted config expects")
    require(tuple(param.shape) == tuple(value.shape),
            f"'{name}' has shape {tuple(value.shape)} but glassformer expects {tuple(param.shape)}")
    with torch.no_grad():
        param.copy_(value.to(param.dtype))


def set_attention(attn: nn.Module, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O) -> None:
    """Load one MultiHeadAttention from (in, out) matrices whose columns are heads side by side."""
    H, dk = attn.n_heads, attn.d_k
    for sym, W, b in (("Q", W_Q, b_Q), ("K", W_K, b_K), ("V", W_V, b_V)):
        put(getattr(attn, f"W_{sym}"), split_heads(W, H, dk), f"W_{sym}")
        put(getattr(attn, f"b_{sym}"), split_head_bias(b, H, dk), f"b_{sym}")
    put(attn.W_O, W_O, "W_O")
    put(attn.b_O, b_O, "b_O")


def set_ffn(ffn: nn.Module, W_1, b_1, W_2, b_2, W_G=None, b_G=None) -> None:
    """Load one FeedForward from (in, out) matrices: FFN(x) = φ(x·W_1 + b_1)·W_2 + b_2."""
    for name, value in (("W_1", W_1), ("b_1", b_1), ("W_2", W_2), ("b_2", b_2), ("W_G", W_G), ("b_G", b_G)):
        put(getattr(ffn, name, None), value, name)


def set_norm(norm: nn.Module, gamma: torch.Tensor, beta: torch.Tensor | None = None) -> None:
    """LayerNorm (gamma, beta) or RMSNorm (gamma only)."""
    put(norm.gamma, gamma, "gamma")
    put(getattr(norm, "beta", None), beta, "beta")


def token_id(value: Any, vocab_size: int) -> int | None:
    """A special-token id from an HF config, kept when it is a single id inside the vocabulary."""
    return value if isinstance(value, int) and 0 <= value < vocab_size else None
