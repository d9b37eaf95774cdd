"""OpenAI GPT (Radford et al. 2018) as the export target of a Post-LN decoder-only LM.

GPT-1 is the 2017 decoder without cross-attention, Post-LN (seed 000 §4.3: ln_1(x + attn(x)),
ln_2(n + mlp(n))), no final norm, learned positions, scores ÷ sqrt(d_k), an MLP of 4·d_model,
and its "gelu" is the tanh approximation. That is `glassformer train --task lm --recipe paper`
once export.py has stored the sinusoids as a learned table and folded the embedding scale.
Export only: `from_hf` does not read OpenAI GPT, and CTranslate2 has no converter for it.
"""

from __future__ import annotations

import torch

from .writing import dropouts, gpt_block, head, hf_ids


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
