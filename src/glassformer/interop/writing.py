"""Weight writing shared by the `to_hf` functions: the inverse of common.py and _seq2seq.py.

The seed writes y = x·W + b with W (in, out) and per-head W_Q (n_heads, d_model, d_k); an
nn.Linear stores (out, in), so every matrix is transposed on the way out and the heads are laid
side by side again: q.weight rows h·d_k … (h+1)·d_k − 1 are W_Q[h]ᵀ. GPT's Conv1D keeps (in, out).
A bias our model lacks is written as zeros where the Hugging Face layer always has one (the same
function); a non-zero bias with no place in the family stops the export.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import ModelConfig
from ..errors import InputError
from ._seq2seq import bart_like_layer_map  # the importer's layer table, read the other way

PLAIN_ACTS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu"}


def det(x: torch.Tensor | None) -> torch.Tensor | None:
    return None if x is None else x.detach()


@torch.no_grad()
def linear(lin: nn.Module, W: torch.Tensor, b: torch.Tensor | None, conv1d: bool = False) -> None:
    """Our y = x·W + b into an nn.Linear (weight (out, in)) or GPT's Conv1D (weight (in, out))."""
    lin.weight.copy_(W if conv1d else W.t())
    if getattr(lin, "bias", None) is not None:
        lin.bias.copy_(b if b is not None else torch.zeros_like(lin.bias))
    elif b is not None and bool(b.any()):
        raise InputError("cannot export: a bias the Hugging Face layer has no place for is not zero")


def heads(W: torch.Tensor) -> torch.Tensor:
    """W_Q (n_heads, d_model, d_k) -> (d_model, n_heads·d_k), heads side by side (x·W layout)."""
    H, d, dk = W.shape
    return W.permute(1, 0, 2).reshape(d, H * dk)


def head_bias(b: torch.Tensor | None) -> torch.Tensor | None:
    return None if b is None else b.reshape(-1)


def attention(attn, q, k, v, o) -> None:
    for sym, lin in zip("QKV", (q, k, v)):
        linear(lin, heads(det(getattr(attn, f"W_{sym}"))), head_bias(det(getattr(attn, f"b_{sym}"))))
    linear(o, det(attn.W_O), det(attn.b_O))


@torch.no_grad()
def norm(hf_norm, ours) -> None:
    hf_norm.weight.copy_(ours.gamma)
    if getattr(hf_norm, "bias", None) is not None:
        hf_norm.bias.copy_(ours.beta if getattr(ours, "beta", None) is not None else torch.zeros_like(hf_norm.bias))


def ffn(ours, w1, w2, gate=None) -> None:
    linear(w1, det(ours.W_1), det(ours.b_1))
    linear(w2, det(ours.W_2), det(ours.b_2))
    if gate is not None:
        linear(gate, det(ours.W_G), det(getattr(ours, "b_G", None)))


def gpt_block(ours, theirs) -> None:
    """One GPT-2 / OpenAI GPT block: c_attn holds W_Q | W_K | W_V side by side, Conv1D layout (in, out)."""
    a = ours.self_attn
    W = torch.cat([heads(det(a.W_Q)), heads(det(a.W_K)), heads(det(a.W_V))], dim=1)
    b = None if a.b_Q is None else torch.cat([det(a.b_Q).reshape(-1), det(a.b_K).reshape(-1), det(a.b_V).reshape(-1)])
    linear(theirs.attn.c_attn, W, b, conv1d=True)
    linear(theirs.attn.c_proj, det(a.W_O), det(a.b_O), conv1d=True)
    norm(theirs.ln_1, ours.norm1)
    norm(theirs.ln_2, ours.norm2)
    linear(theirs.mlp.c_fc, det(ours.ffn.W_1), det(ours.ffn.b_1), conv1d=True)
    linear(theirs.mlp.c_proj, det(ours.ffn.W_2), det(ours.ffn.b_2), conv1d=True)


def hf_ids(cfg: ModelConfig) -> dict:
    return {"pad_token_id": cfg.pad_id, "bos_token_id": cfg.bos_id, "eos_token_id": cfg.eos_id}


def dropouts(cfg: ModelConfig) -> tuple[float, float]:
    return float(cfg.dropout), float(cfg.attn_dropout_p)


@torch.no_grad()
def head(lm_head: nn.Linear, model) -> None:
    if model.head.W_U is not None:  # untied: our W_U (d_model, vocab) is lm_head.weight transposed
        lm_head.weight.copy_(model.head.W_U.t())


def bart_like_config(c: ModelConfig, tie: bool, **extra) -> dict:
    drop, adrop = dropouts(c)
    return dict(
        vocab_size=c.vocab_size, d_model=c.d_model, encoder_layers=c.n_layers, decoder_layers=c.dec_layers,
        encoder_attention_heads=c.n_heads, decoder_attention_heads=c.n_heads, encoder_ffn_dim=c.d_ff,
        decoder_ffn_dim=c.d_ff, activation_function=PLAIN_ACTS[c.activation], scale_embedding=c.embed_scale,
        dropout=drop, attention_dropout=adrop, activation_dropout=0.0, max_position_embeddings=c.max_len,
        decoder_start_token_id=c.start_id, forced_eos_token_id=None, attn_implementation="eager",
        tie_word_embeddings=tie, **hf_ids(c), **extra)


@torch.no_grad()
def bart_like_layers(model, enc, dec, pre_ln_final: bool) -> None:
    for kind, ours, theirs in bart_like_layer_map(model, enc, dec):
        if kind == "attention":
            attention(ours, *theirs)
        elif kind == "ffn":
            ffn(ours, *theirs)
        else:
            norm(theirs, ours)
    if pre_ln_final:
        norm(enc.layer_norm, model.enc_norm)
        norm(dec.layer_norm, model.dec_norm)


@torch.no_grad()
def tables_and_head(hf, model) -> None:
    """Token tables, lm_head (when untied) and final_logits_bias of a BART-like model."""
    base = hf.model
    enc_table = base.encoder.embed_tokens.weight
    enc_table.copy_(model.embed.W_E)
    dec_table = base.decoder.embed_tokens.weight
    if dec_table.data_ptr() != enc_table.data_ptr():
        dec_table.copy_(model.dec_embed.W_E)
    if hf.lm_head.weight.data_ptr() != dec_table.data_ptr():
        table = model.dec_embed.W_E if model.head.W_U is None else model.head.W_U.t()
        hf.lm_head.weight.copy_(table)
    hf.final_logits_bias.copy_(model.head.b_U.reshape(1, -1) if model.head.b_U is not None
                               else torch.zeros_like(hf.final_logits_bias))


def sinusoid_tables(base, model) -> None:
    """Marian/Pegasus recompute their half-split table at init; ours is written so the sums match bit for bit."""
    with torch.no_grad():
        for stack, pos in ((base.encoder, model.pos), (base.decoder, model.dec_pos)):
            table = stack.embed_positions.weight
            table.copy_(pos(torch.arange(table.shape[0])).to(table.dtype))
