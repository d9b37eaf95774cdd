"""glassformer's EncoderLayer / DecoderLayer equal torch.nn.TransformerEncoderLayer / DecoderLayer.

Same weights copied in (torch's fused in_proj split into per-head W_Q, W_K, W_V), Post-LN and
Pre-LN (norm_first), ReLU and exact GELU, both our attention paths ("fast" SDPA and "math").
"""

import itertools

import pytest
import torch
from torch import nn

from glassformer.config import ModelConfig
from glassformer.nn.layers import DecoderLayer, EncoderLayer
from glassformer.nn.model import TransformerBase

pytestmark = pytest.mark.usefixtures("one_thread")

TOL = 1e-5

SHAPES = [(30, 5, 37), (24, 3, 40)]  # (d_model, n_heads, d_ff): d_k = 6 and 8
COMBOS = list(itertools.product(SHAPES, ("relu", "gelu"), (False, True), ("fast", "math")))
IDS = [f"d{s[0]}h{s[1]}-{act}-{'pre' if nf else 'post'}-{impl}" for s, act, nf, impl in COMBOS]


def our_config(d_model, n_heads, d_ff, act, norm_first, impl):
    return ModelConfig(d_model=d_model, n_heads=n_heads, d_ff=d_ff, activation=act,
                       norm_position="pre" if norm_first else "post", norm_eps=1e-5,
                       dropout=0.0, attn_impl=impl)


def randomize(module: nn.Module) -> None:
    """Random values everywhere (LayerNorm gains/biases and projection biases included)."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            r = torch.randn_like(p)
            if "norm" in name and name.endswith("weight"):
                p.copy_(1 + 0.3 * r)
            else:
                p.copy_(0.3 * r if p.dim() == 1 else r * p.shape[-1] ** -0.5)


@torch.no_grad()
def copy_mha(ours, mha: nn.MultiheadAttention) -> None:
    """in_proj_weight (3·d, d) = [W_q; W_k; W_v] as nn.Linear rows; head h = rows h·d_k … (h+1)·d_k."""
    d, H = mha.embed_dim, mha.num_heads
    dk = d // H
    for i, name in enumerate("QKV"):
        W = mha.in_proj_weight[i * d:(i + 1) * d]  # (H·d_k, d)
        getattr(ours, f"W_{name}").copy_(W.view(H, dk, d).transpose(1, 2))
        getattr(ours, f"b_{name}").copy_(mha.in_proj_bias[i * d:(i + 1) * d].view(H, dk))
    ours.W_O.copy_(mha.out_proj.weight.T)
    ours.b_O.copy_(mha.out_proj.bias)


@torch.no_grad()
def copy_common(ours, theirs, norms) -> None:
    ours.ffn.W_1.copy_(theirs.linear1.weight.T)
    ours.ffn.b_1.copy_(theirs.linear1.bias)
    ours.ffn.W_2.copy_(theirs.linear2.weight.T)
    ours.ffn.b_2.copy_(theirs.linear2.bias)
    for n in norms:
        getattr(ours, n).gamma.copy_(getattr(theirs, n).weight)
        getattr(ours, n).beta.copy_(getattr(theirs, n).bias)


def causal_mask(n):
    return torch.ones(n, n, dtype=torch.bool).triu(1)  # True: key j is in the future of query i


def key_padding(batch_lengths, seq):
    return torch.arange(seq)[None, :] >= torch.tensor(batch_lengths)[:, None]  # True at padding


@pytest.mark.parametrize("shape,act,norm_first,impl", COMBOS, ids=IDS)
def test_encoder_layer_equals_torch(shape, act, norm_first, impl):
    d_model, H, d_ff = shape
    theirs = nn.TransformerEncoderLayer(d_model, H, d_ff, dropout=0.0, activation=act,
                                        layer_norm_eps=1e-5, batch_first=True, norm_first=norm_first)
    randomize(theirs)
    theirs.eval()
    ours = EncoderLayer(our_config(d_model, H, d_ff, act, norm_first, impl)).eval()
    copy_mha(ours.attn, theirs.self_attn)
    copy_common(ours, theirs, ("norm1", "norm2"))
    x = torch.randn(3, 9, d_model)
    pad = key_padding([9, 6, 2], 9)
    # grad enabled: torch takes its reference (non-fused) path, which computes every position
    ref = theirs(x, src_key_padding_mask=pad)
    with torch.no_grad():
        out = ours(x, bias=TransformerBase._mask_bias(None, pad, x.dtype), padding_mask=pad)
    diff = (out - ref).abs().max().item()
    assert diff <= TOL, diff


@pytest.mark.parametrize("shape,act,norm_first,impl", COMBOS, ids=IDS)
def test_decoder_layer_equals_torch(shape, act, norm_first, impl):
    d_model, H, d_ff = shape
    theirs = nn.TransformerDecoderLayer(d_model, H, d_ff, dropout=0.0, activation=act,
                                        layer_norm_eps=1e-5, batch_first=True, norm_first=norm_first)
    randomize(theirs)
    theirs.eval()
    ours = DecoderLayer(our_config(d_model, H, d_ff, act, norm_first, impl)).eval()
    copy_mha(ours.self_attn, theirs.self_attn)
    copy_mha(ours.cross_attn, theirs.multihead_attn)  # norms: norm1 self, norm2 cross, norm3 FFN
    copy_common(ours, theirs, ("norm1", "norm2", "norm3"))
    tgt, memory = torch.randn(3, 7, d_model), torch.randn(3, 10, d_model)
    src_pad = key_padding([10, 4, 7], 10)
    causal = causal_mask(7)
    ref = theirs(tgt, memory, tgt_mask=causal, memory_key_padding_mask=src_pad, tgt_is_causal=True)
    with torch.no_grad():
        out = ours(tgt, memory, cross_bias=TransformerBase._mask_bias(None, src_pad, tgt.dtype))
    diff = (out - ref).abs().max().item()
    assert diff <= TOL, diff


@pytest.mark.parametrize("impl", ("fast", "math"))
def test_decoder_layer_with_target_padding_equals_torch(impl):
    """Right-padded targets: torch's tgt_key_padding_mask vs our additive self-attention bias."""
    d_model, H, d_ff = SHAPES[0]
    theirs = nn.TransformerDecoderLayer(d_model, H, d_ff, dropout=0.0, batch_first=True)
    randomize(theirs)
    theirs.eval()
    ours = DecoderLayer(our_config(d_model, H, d_ff, "relu", False, impl)).eval()
    copy_mha(ours.self_attn, theirs.self_attn)
    copy_mha(ours.cross_attn, theirs.multihead_attn)
    copy_common(ours, theirs, ("norm1", "norm2", "norm3"))
    tgt, memory = torch.randn(2, 6, d_model), torch.randn(2, 5, d_model)
    tgt_pad, src_pad = key_padding([6, 3], 6), key_padding([5, 2], 5)
    causal = causal_mask(6)
    ref = theirs(tgt, memory, tgt_mask=causal, tgt_key_padding_mask=tgt_pad,
                 memory_key_padding_mask=src_pad)
    with torch.no_grad():
        out = ours(tgt, memory, self_bias=TransformerBase._mask_bias(None, tgt_pad, tgt.dtype),
                   cross_bias=TransformerBase._mask_bias(None, src_pad, tgt.dtype))
    diff = (out - ref).abs().max().item()
    assert diff <= TOL, diff
