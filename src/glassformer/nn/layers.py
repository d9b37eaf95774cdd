"""Encoder and decoder layers: sublayers joined by residual connections and norms (seed 000 ch. 4).

Each sublayer F (attention or FFN) is wrapped as

    Post-LN (the 2017 paper, §4.3):  out = Norm(x + F(x))
    Pre-LN  (GPT-2 onward, §4.4):    out = x + F(Norm(x))

and `residual=False` drops the `x +` (seed 003's deletion experiment). Hook names are fixed
whatever the placement: `norm1`/`norm2`(/`norm3`) are the outputs of the layer's norms in order,
`resid_mid` (after attention), `resid_cross` (after cross-attention), `resid_post` (after FFN).
"""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from ..config import ModelConfig
from ..trace import HookPoint
from .attention import KVCache, MultiHeadAttention
from .dropout import Dropout
from .feedforward import FeedForward
from .norms import make_norm


def _attention(cfg: ModelConfig, cross: bool, layer_index: int) -> MultiHeadAttention:
    return MultiHeadAttention(cfg.d_model, cfg.n_heads, cfg.head_dim, bias=cfg.attn_bias,
                              scale_scores=cfg.scale_scores, dropout=cfg.attn_dropout_p,
                              cross=cross, impl=cfg.attn_impl, layer_index=layer_index)


class _Layer(nn.Module):
    """What encoder and decoder layers share: the Add & Norm wrapping of a sublayer."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.pre_ln, self.residual = cfg.norm_position == "pre", cfg.residual
        self.drop = Dropout(cfg.dropout)
        self.ffn = FeedForward(cfg.d_model, cfg.d_ff, cfg.activation, cfg.ffn_bias, cfg.dropout)
        self.out = HookPoint()

    def add_norm(self, x: torch.Tensor, sublayer: Callable[[torch.Tensor], torch.Tensor],
                 norm: nn.Module, resid_hook: HookPoint, padding_mask: torch.Tensor | None) -> torch.Tensor:
        """Post-LN: Norm(x + F(x)).  Pre-LN: x + F(Norm(x)).  (§4.4)"""
        h = norm(x, padding_mask) if self.pre_ln else x
        y = sublayer(h)
        if self.training and self.drop.p > 0:  # skip the no-op module call when decoding (speed)
            y = self.drop(y)
        r = resid_hook(x + y if self.residual else y)
        return r if self.pre_ln else norm(r, padding_mask)


class EncoderLayer(_Layer):
    """Self-attention → Add & Norm → FFN → Add & Norm  (Figure 1, left; seed §7.3)."""

    def __init__(self, cfg: ModelConfig, index: int = 0):
        super().__init__(cfg)
        self.attn = _attention(cfg, cross=False, layer_index=index)
        self.norm1 = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps)
        self.norm2 = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps)
        self.resid_mid, self.resid_post = HookPoint(), HookPoint()

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None = None,
                rope: tuple | None = None, padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = self.add_norm(x, lambda h: self.attn(h, bias=bias, rope=rope),
                          self.norm1, self.resid_mid, padding_mask)
        x = self.add_norm(x, self.ffn, self.norm2, self.resid_post, padding_mask)
        return self.out(x)


class DecoderLayer(_Layer):
    """Masked self-attention → Add & Norm → [cross-attention → Add & Norm] → FFN → Add & Norm (§7.5).

    Without cross-attention (decoder-only LMs) it has the encoder layer's shape with a causal mask.
    """

    def __init__(self, cfg: ModelConfig, index: int = 0, cross: bool = True):
        super().__init__(cfg)
        self.has_cross = cross
        self.self_attn = _attention(cfg, cross=False, layer_index=index)
        self.norm1 = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps)
        self.resid_mid = HookPoint()
        if cross:
            self.cross_attn = _attention(cfg, cross=True, layer_index=index)
            self.resid_cross = HookPoint()
        self.norm2 = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps)
        if cross:
            self.norm3 = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps)
        self.resid_post = HookPoint()

    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                self_bias: torch.Tensor | None = None, cross_bias: torch.Tensor | None = None,
                rope: tuple | None = None, padding_mask: torch.Tensor | None = None,
                cache: KVCache | None = None) -> torch.Tensor:
        x = self.add_norm(x, lambda h: self.self_attn(h, bias=self_bias, causal=True, rope=rope, cache=cache),
                          self.norm1, self.resid_mid, padding_mask)
        ffn_norm = self.norm2
        if self.has_cross:
            x = self.add_norm(x, lambda h: self.cross_attn(h, memory, bias=cross_bias, cache=cache),
                              self.norm2, self.resid_cross, padding_mask)
            ffn_norm = self.norm3
        x = self.add_norm(x, self.ffn, ffn_norm, self.resid_post, padding_mask)
        return self.out(x)
