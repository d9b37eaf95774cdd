"""T5ForConditionalGeneration -> glassformer EncoderDecoder with equal logits.

T5 departs from the 2017 recipe in ways the seed discusses (000 §1.5, §3.5, §4.4, §5.2):
- scores are NOT divided by sqrt(d_k) (the scale is folded into initialisation): scale_scores=False;
- no absolute positions: a learned scalar per (head, distance bucket) is added to the scores.
  HF computes it in layer 0 and passes it to the other layers; ours is one module per stack
  (`pos`, bidirectional, for the encoder; `dec_pos`, causal, for the decoder) — the same sharing.
  Cross-attention gets no position bias;
- RMSNorm (eps = layer_norm_epsilon), Pre-LN with a final norm on each stack, no biases anywhere;
- d_kv need not be d_model / num_heads (our d_k);
- feed_forward_proj "relu" (wi, wo) or "gated-gelu" = wo(gelu_tanh(wi_0·x) ⊙ wi_1·x),
  i.e. our "geglu" with W_G = wi_0ᵀ, W_1 = wi_1ᵀ;
- with a tied head the decoder output is scaled by d_model^-0.5 first (tied_head_rescale);
- decoding starts from the pad token (id 0).
"""

from __future__ import annotations

import torch

from ..config import ModelConfig
from ..errors import InputError
from ..nn.model import build_model
from ._seq2seq import (activation, copy_attention, copy_embeddings_and_head, copy_ffn, copy_norm,
                       embedding_layout, special_ids)
from .writing import attention, ffn, hf_ids, norm

GATED = {"gelu_new": "geglu", "gelu_pytorch_tanh": "geglu", "silu": "swiglu", "swish": "swiglu",
         "relu": "reglu"}


def t5_activation(hf_config) -> str:
    act = hf_config.dense_act_fn
    if hf_config.is_gated_act:
        if act not in GATED:
            raise InputError(f"T5 feed_forward_proj={hf_config.feed_forward_proj!r} is not supported;"
                             " supported gated forms: gated-gelu, gated-silu, gated-relu")
        return GATED[act]
    return activation(act, "T5")


def _rescales(hf_config) -> bool:
    """Whether HF multiplies the decoder output by d_model^-0.5 before lm_head.

    transformers 5 keeps this in `scale_decoder_outputs`; older versions used `tie_word_embeddings`.
    """
    flag = getattr(hf_config, "scale_decoder_outputs", None)
    return bool(hf_config.tie_word_embeddings if flag is None else flag)


def t5_config(hf_config, layout: dict) -> ModelConfig:
    c = hf_config
    return ModelConfig(
        arch="encoder-decoder", vocab_size=c.vocab_size, d_model=c.d_model, n_heads=c.num_heads,
        d_k=c.d_kv, n_layers=c.num_layers, n_dec_layers=c.num_decoder_layers, d_ff=c.d_ff,
        activation=t5_activation(c), norm="rmsnorm", norm_eps=float(c.layer_norm_epsilon),
        norm_position="pre", final_norm=True, embed_norm=False, pe="relative",
        rel_buckets=c.relative_attention_num_buckets, rel_max_distance=c.relative_attention_max_distance,
        embed_scale=False, scale_scores=False, attn_bias=False, ffn_bias=False, head_bias=False,
        tied_head_rescale=layout["tie_embeddings"] and _rescales(c), **layout,
        dropout=float(c.dropout_rate), **special_ids(c, c.vocab_size),
    )


def _ffn(ffn_module):
    """(W_1 source, W_2 source, gate source) of T5DenseActDense / T5DenseGatedActDense."""
    d = ffn_module.DenseReluDense
    if hasattr(d, "wi_0"):
        return d.wi_1, d.wo, d.wi_0  # act(wi_0·x) ⊙ wi_1·x: the gate is wi_0
    return d.wi, d.wo, None


@torch.no_grad()
def convert(hf_model):
    """A glassformer EncoderDecoder whose logits equal `hf_model`'s (T5ForConditionalGeneration)."""
    enc, dec = hf_model.encoder, hf_model.decoder
    enc_table, dec_table = enc.embed_tokens.weight, dec.embed_tokens.weight
    config = t5_config(hf_model.config, embedding_layout(enc_table, dec_table, hf_model.lm_head))
    model = build_model(config)
    # An untied head that HF still rescales: fold d_model^-0.5 into W_U (same product).
    scale = config.d_model ** -0.5 if (not config.tie_embeddings and _rescales(hf_model.config)) else 1.0
    copy_embeddings_and_head(model, enc_table, dec_table, hf_model.lm_head, None, head_scale=scale)
    model.pos.W_rel.copy_(enc.block[0].layer[0].SelfAttention.relative_attention_bias.weight)
    model.dec_pos.W_rel.copy_(dec.block[0].layer[0].SelfAttention.relative_attention_bias.weight)
    for ours, block in zip(model.enc, enc.block, strict=True):
        sa, ff = block.layer[0], block.layer[-1]
        a = sa.SelfAttention
        copy_attention(ours.attn, a.q, a.k, a.v, a.o)
        copy_norm(ours.norm1, sa.layer_norm)
        copy_ffn(ours.ffn, *_ffn(ff))
        copy_norm(ours.norm2, ff.layer_norm)
    for ours, block in zip(model.dec, dec.block, strict=True):
        sa, ca, ff = block.layer[0], block.layer[1], block.layer[-1]
        a, c = sa.SelfAttention, ca.EncDecAttention
        copy_attention(ours.self_attn, a.q, a.k, a.v, a.o)
        copy_norm(ours.norm1, sa.layer_norm)
        copy_attention(ours.cross_attn, c.q, c.k, c.v, c.o)
        copy_norm(ours.norm2, ca.layer_norm)
        copy_ffn(ours.ffn, *_ffn(ff))
        copy_norm(ours.norm3, ff.layer_norm)
    copy_norm(model.enc_norm, enc.final_layer_norm)
    copy_norm(model.dec_norm, dec.final_layer_norm)
    return model.eval()  # inference, like the other converters; .train() to fine-tune


# ---- the other way: glassformer -> Hugging Face (see export.py for how the family is chosen) ----

def to_hf(model):
    """The T5ForConditionalGeneration of an RMSNorm, relative-bias, unscaled-scores translator."""
    from transformers import T5Config, T5ForConditionalGeneration
    c = model.config
    proj = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu",
            "swiglu": "gated-silu", "geglu": "gated-gelu", "reglu": "gated-relu"}[c.activation]
    hf = T5ForConditionalGeneration(T5Config(
        vocab_size=c.vocab_size, d_model=c.d_model, d_kv=c.head_dim, d_ff=c.d_ff, num_layers=c.n_layers,
        num_decoder_layers=c.dec_layers, num_heads=c.n_heads, relative_attention_num_buckets=c.rel_buckets,
        relative_attention_max_distance=c.rel_max_distance, dropout_rate=float(c.dropout),
        layer_norm_epsilon=c.norm_eps, feed_forward_proj=proj, decoder_start_token_id=c.start_id,
        tie_word_embeddings=c.tied_head_rescale,  # transformers 5: this flag now only says "rescale"
        attn_implementation="eager", **hf_ids(c)))
    enc, dec = hf.encoder, hf.decoder
    with torch.no_grad():
        hf.shared.weight.copy_(model.embed.W_E)
        enc.block[0].layer[0].SelfAttention.relative_attention_bias.weight.copy_(model.pos.W_rel)
        dec.block[0].layer[0].SelfAttention.relative_attention_bias.weight.copy_(model.dec_pos.W_rel)

    def t5_ffn(ours, layer):
        d = layer.DenseReluDense
        if hasattr(d, "wi_0"):
            ffn(ours, d.wi_1, d.wo, d.wi_0)
        else:
            ffn(ours, d.wi, d.wo)

    for ours, block in zip(model.enc, enc.block, strict=True):
        a = block.layer[0].SelfAttention
        attention(ours.attn, a.q, a.k, a.v, a.o)
        norm(block.layer[0].layer_norm, ours.norm1)
        t5_ffn(ours.ffn, block.layer[-1])
        norm(block.layer[-1].layer_norm, ours.norm2)
    for ours, block in zip(model.dec, dec.block, strict=True):
        a, x = block.layer[0].SelfAttention, block.layer[1].EncDecAttention
        attention(ours.self_attn, a.q, a.k, a.v, a.o)
        norm(block.layer[0].layer_norm, ours.norm1)
        attention(ours.cross_attn, x.q, x.k, x.v, x.o)
        norm(block.layer[1].layer_norm, ours.norm2)
        t5_ffn(ours.ffn, block.layer[-1])
        norm(block.layer[-1].layer_norm, ours.norm3)
    norm(enc.final_layer_norm, model.enc_norm)
    norm(dec.final_layer_norm, model.dec_norm)
    return hf
