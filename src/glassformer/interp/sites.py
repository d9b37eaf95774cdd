"""Where things are in a model: the residual stream a tool reads, its layers, sublayers and norms.

Every interpretability tool walks the same residual stream (seed 000 ch. 4: each sublayer adds
its output to it). This module names that walk once, with the hook names of `glassformer.trace`:

    {prefix}embed, {prefix}pos (absolute encodings) → {prefix}x0
    → {stack}.{l}: attention(s), then FFN, each joined by Add & Norm → {stack}.{l}.out
    → [final norm] → head → logits

`stack` is "enc" for encoder-only models and "dec" otherwise (the decoder of a translator reads
the source only through `cross_attn`). The frozen norms here are what makes Post-LN and the
final norm linear enough to split: each σ is read from the forward pass and then held fixed,
as TransformerLens does for `ln_final`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import InputError
from ..nn.model import DecoderLM, EncoderDecoder, EncoderModel
from ..nn.norms import BatchNorm, LayerNorm, NoNorm, RMSNorm


@dataclass(frozen=True)
class Sublayer:
    """One sublayer of layer `layer`: what it adds to the stream and the norm wrapped around it."""

    layer: int
    kind: str  # "attn" | "self_attn" | "cross_attn" | "ffn"
    module: nn.Module
    norm: nn.Module
    resid_hook: str  # the hook holding x + F(x) (Post-LN: the norm's input)
    norm_hook: str

    @property
    def is_attention(self) -> bool:
        return self.kind != "ffn"


@dataclass(frozen=True)
class Stream:
    """The residual stream of one stack of `model`."""

    model: nn.Module
    stack: str  # "enc" | "dec"
    prefix: str  # "" | "dec_": the input side's hook names
    layers: nn.ModuleList
    final_norm: nn.Module | None
    head: nn.Module | None

    @property
    def config(self):
        return self.model.config

    @property
    def pre_ln(self) -> bool:
        return self.config.norm_position == "pre"

    def layer_name(self, l: int) -> str:
        return f"{self.stack}.{l}"

    def sublayers(self, l: int) -> list[Sublayer]:
        """The sublayers of layer l in forward order, each with its norm and hook names."""
        layer, n = self.layers[l], self.layer_name(l)
        if self.stack == "enc":
            parts = [("attn", layer.attn, layer.norm1, "resid_mid", "norm1"),
                     ("ffn", layer.ffn, layer.norm2, "resid_post", "norm2")]
        else:
            parts = [("self_attn", layer.self_attn, layer.norm1, "resid_mid", "norm1")]
            if layer.has_cross:
                parts.append(("cross_attn", layer.cross_attn, layer.norm2, "resid_cross", "norm2"))
                parts.append(("ffn", layer.ffn, layer.norm3, "resid_post", "norm3"))
            else:
                parts.append(("ffn", layer.ffn, layer.norm2, "resid_post", "norm2"))
        return [Sublayer(l, k, m, nm, f"{n}.{r}", f"{n}.{nh}") for k, m, nm, r, nh in parts]

    def attention(self, l: int, kind: str | None = None) -> Sublayer:
        """The attention sublayer `kind` of layer l (default: the stack's self-attention)."""
        kind = kind or ("attn" if self.stack == "enc" else "self_attn")
        self.check_layer(l)
        for s in self.sublayers(l):
            if s.kind == kind:
                return s
        kinds = [s.kind for s in self.sublayers(l) if s.is_attention]
        raise InputError(f"layer {l} of the {self.stack} stack has no {kind!r}; it has {', '.join(kinds)}")

    def check_layer(self, l: int) -> None:
        if not (isinstance(l, int) and 0 <= l < len(self.layers)):
            raise InputError(f"layer {l!r} is outside the {self.stack} stack; layers are 0..{len(self.layers) - 1}")

    def check_head(self, l: int, h: int, kind: str | None = None) -> Sublayer:
        site = self.attention(l, kind)
        H = site.module.n_heads
        if not (isinstance(h, int) and 0 <= h < H):
            raise InputError(f"head {h!r} of layer {l} is outside the model; heads are 0..{H - 1}")
        return site


def stream_of(model: nn.Module, stack: str | None = None) -> Stream:
    """The residual stream a tool reads: the encoder of an encoder, else the decoder."""
    if isinstance(model, EncoderModel):
        default, allowed = "enc", ("enc",)
    elif isinstance(model, EncoderDecoder):
        default, allowed = "dec", ("enc", "dec")
    elif isinstance(model, DecoderLM):
        default, allowed = "dec", ("dec",)
    else:
        raise InputError(f"{type(model).__name__} is not a glassformer model; convert it with "
                         "glassformer.interop.from_hf or build it with glassformer.nn.build_model")
    stack = stack or default
    if stack not in allowed:
        raise InputError(f"stack={stack!r} is not in this {model.config.arch} model; use {' or '.join(allowed)}")
    if stack == "enc":
        return Stream(model, "enc", "", model.enc, getattr(model, "enc_norm", None), None)
    prefix = "dec_" if isinstance(model, EncoderDecoder) else ""
    return Stream(model, "dec", prefix, model.dec, getattr(model, "dec_norm", None), model.head)


def frozen_norm(norm: nn.Module, x: torch.Tensor):
    """(linear map, constant) with norm(y) = map(y) + constant for every y, σ frozen at input x.

    LayerNorm (§5.2): gamma·(y − mean y)/σ(x) + beta — centring is linear, only σ is frozen.
    RMSNorm: gamma·y/rms(x). Eval BatchNorm: already affine. At y = x the split is exact.
    """
    x = x.double()
    if isinstance(norm, LayerNorm):
        inv = torch.rsqrt(x.var(-1, unbiased=False, keepdim=True) + norm.eps)
        g = norm.gamma.double()
        return (lambda y: g * (y - y.mean(-1, keepdim=True)) * inv), norm.beta.double()
    if isinstance(norm, RMSNorm):
        inv = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + norm.eps)
        g = norm.gamma.double()
        return (lambda y: g * y * inv), None
    if isinstance(norm, BatchNorm):
        if norm.training:
            raise InputError("BatchNorm in training mode mixes the batch; call model.eval() first")
        s = norm.gamma.double() * torch.rsqrt(norm.running_var.double() + norm.eps)
        return (lambda y: y * s), norm.beta.double() - norm.running_mean.double() * s
    if isinstance(norm, NoNorm):
        return (lambda y: y), None
    raise InputError(f"cannot linearise a {type(norm).__name__}")


def head_rows(attn: nn.Module) -> torch.Tensor:
    """W_O split per head: (head, d_k, d_model); head h adds z_h · W_O[h] to the stream (§2.4)."""
    return attn.W_O.view(attn.n_heads, attn.d_k, attn.d_model)


def kv_groups(attn: nn.Module) -> list[list[int]]:
    """Query heads that share one K/V head (grouped-query attention), found from the weights.

    `interop.hf_llama` copies a K/V head to every query head it serves, so heads with identical
    W_K and W_V form one group; plain multi-head attention gives one group per head.
    """
    groups: list[list[int]] = []
    for h in range(attn.n_heads):
        for g in groups:
            r = g[0]
            if torch.equal(attn.W_K[h], attn.W_K[r]) and torch.equal(attn.W_V[h], attn.W_V[r]) and (
                    attn.b_K is None or (torch.equal(attn.b_K[h], attn.b_K[r]) and torch.equal(attn.b_V[h], attn.b_V[r]))):
                g.append(h)
                break
        else:
            groups.append([h])
    return groups
