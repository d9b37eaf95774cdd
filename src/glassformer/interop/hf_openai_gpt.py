"""OpenAI GPT (Radford et al. 2018) as the export target of a Post-LN decoder-only LM.

GPT-1 is the 2017 decoder without cross-attention, Post-LN (seed 000 §4.3: ln_1(x + attn(x)),
ln_2(n + mlp(n))), no final norm, learned positions, scores ÷ sqrt(d_k), an MLP of 4·d_model,
and its "gelu" is the tanh approximation. That is `glassformer train --task lm --recipe paper`
once export.py has stored the sinusoids as a learned table and folded the embedding scale.
`from_hf` reads it back (the round trip is bit for bit); CTranslate2 has no converter for it.
"""

from __future__ import annotations

import torch

from ..config import ModelConfig
from ..nn import build_model
from .common import Weights, hf_parts, linear_in_out, put, require, token_id
from .hf_gpt2 import read_gpt_blocks
from .writing import dropouts, gpt_block, head, hf_ids

ACTIVATIONS = {"relu": "relu", "gelu": "gelu_tanh", "silu": "silu", "swish": "silu"}  # its "gelu" is tanh's


def convert(hf_model):
    """A glassformer DecoderLM (Post-LN, learned positions, no final norm) equal to an OpenAIGPTLMHeadModel."""
    cfg, state = hf_parts(hf_model)
    require(cfg["afn"] in ACTIVATIONS, f"OpenAI GPT afn={cfg['afn']!r} is not supported; use one of {', '.join(ACTIVATIONS)}")
    vocab, d = cfg["vocab_size"], cfg["n_embd"]
    tied = bool(cfg.get("tie_word_embeddings", True))
    config = ModelConfig(
        arch="decoder", vocab_size=vocab, d_model=d, n_heads=cfg["n_head"], n_layers=cfg["n_layer"], d_ff=4 * d,
        activation=ACTIVATIONS[cfg["afn"]], norm="layernorm", norm_eps=float(cfg["layer_norm_epsilon"]),
        norm_position="post", final_norm=False, pe="learned", max_len=cfg["n_positions"], scale_scores=True,
        attn_bias=True, ffn_bias=True, tie_embeddings=tied, dropout=float(cfg["resid_pdrop"]),
        attn_dropout=float(cfg["attn_pdrop"]), pad_id=token_id(cfg.get("pad_token_id"), vocab),
        bos_id=token_id(cfg.get("bos_token_id"), vocab), eos_id=token_id(cfg.get("eos_token_id"), vocab))
    model = build_model(config)
    W = Weights(state, ("transformer.",), "tokens_embed.weight")
    put(model.embed.W_E, W("tokens_embed.weight"), "tokens_embed")
    put(model.pos.W_pos, W("positions_embed.weight"), "positions_embed")
    read_gpt_blocks(model, W)
    if not tied:
        put(model.head.W_U, linear_in_out(state["lm_head.weight"]), "lm_head")
    return model.eval()


def to_hf(model):
    """The OpenAIGPTLMHeadModel of a Post-LN decoder with a learned table, d_ff = 4·d_model."""
    from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel
    c = model.config
    drop, adrop = dropouts(c)
    afn = {"relu": "relu", "gelu_tanh": "gelu", "silu": "silu"}[c.activation]  # its "gelu" is the tanh form
    hf = OpenAIGPTLMHeadModel(OpenAIGPTConfig(
        vocab_size=c.vocab_size, n_positions=c.max_len, n_embd=c.d_model, n_layer=c.n_layers, n_head=c.n_heads,
        afn=afn, resid_pdrop=drop, embd_pdrop=drop, attn_pdrop=adrop, layer_norm_epsilon=c.norm_eps,
        tie_word_embeddings=c.tie_embeddings, **hf_ids(c)))
    t = hf.transformer
    with torch.no_grad():
        t.tokens_embed.weight.copy_(model.embed.W_E)
        t.positions_embed.weight.copy_(model.pos.W_pos)
    for ours, theirs in zip(model.dec, t.h, strict=True):  # Post-LN: ln_1(x + attn(x)), ln_2(n + mlp(n))
        gpt_block(ours, theirs)
    head(hf.lm_head, model)
    return hf
