"""MarianMTModel (Opus-MT translators) -> glassformer EncoderDecoder with equal logits.

Marian is the closest living relative of the 2017 paper's translator (seed 000 ch. 7):
Post-LN, fixed sinusoids, embeddings × sqrt(d_model), one shared vocabulary. Its quirks:
- the sinusoid table is in the half-split layout — all sines, then all cosines (our
  pe="sinusoidal_half"); angles pos / 10000^(2i/d_model), positions counted from 0;
- the activation is "swish" (SiLU) in the released checkpoints;
- a `final_logits_bias` buffer is added to the logits (our head b_U);
- one table for source, target and output, or (some checkpoints) a separate target vocabulary;
- decoding starts from the pad token (decoder_start_token_id = pad_token_id).
"""

from __future__ import annotations

import torch

from ..config import ModelConfig
from ..errors import InputError
from ..nn.model import build_model
from ..nn.positional import SinusoidalPE
from ._seq2seq import (activation, copy_bart_like_layers, copy_embeddings_and_head, copy_norm, embedding_layout,
                       same, special_ids)
from .writing import bart_like_config, bart_like_layers, sinusoid_tables, tables_and_head


def marian_config(hf_config, layout: dict, family: str = "Marian") -> ModelConfig:
    """Marian's ModelConfig; family "Pegasus" is the same with the norm first and a final norm per stack."""
    c = hf_config
    pre = family == "Pegasus"
    same(family, "attention_heads", c.encoder_attention_heads, c.decoder_attention_heads)
    same(family, "ffn_dim", c.encoder_ffn_dim, c.decoder_ffn_dim)
    if c.d_model % c.encoder_attention_heads:
        raise InputError(f"{family} d_model={c.d_model} is not divisible by "
                         f"{c.encoder_attention_heads} heads")
    tgt_vocab = layout["tgt_vocab_size"] or c.vocab_size
    return ModelConfig(
        arch="encoder-decoder", vocab_size=c.vocab_size,
        d_model=c.d_model, n_heads=c.encoder_attention_heads,
        n_layers=c.encoder_layers, n_dec_layers=c.decoder_layers, d_ff=c.encoder_ffn_dim,
        activation=activation(c.activation_function, family),
        norm="layernorm", norm_eps=1e-5, norm_position="pre" if pre else "post", final_norm=pre, embed_norm=False,
        pe="sinusoidal_half", max_len=c.max_position_embeddings,
        embed_scale=bool(c.scale_embedding), scale_scores=True, attn_bias=True, ffn_bias=True,
        head_bias=True, **layout,
        dropout=float(c.dropout), attn_dropout=float(c.attention_dropout),
        **special_ids(c, min(c.vocab_size, tgt_vocab)),
    )


def _check_sinusoids(table: torch.Tensor, name: str, family: str = "Marian") -> None:
    """Marian's position table is fixed, never trained: make sure it is the formula we compute."""
    n, width = table.shape
    ours = SinusoidalPE(width, 10000.0, "half")(torch.arange(n)).to(table.dtype)
    err = (ours - table.detach()).abs().max().item()
    if err > 1e-5:
        raise InputError(f"{family} {name} is not the half-split sinusoid table (max diff {err:.2e});"
                         " glassformer recomputes it, so it cannot carry trained positions")


def convert(hf_model, family: str = "Marian"):
    """A glassformer EncoderDecoder whose logits equal `hf_model`'s (MarianMTModel; with family
    "Pegasus", PegasusForConditionalGeneration: see hf_pegasus.py)."""
    base = hf_model.model
    enc_table, dec_table = base.encoder.embed_tokens.weight, base.decoder.embed_tokens.weight
    config = marian_config(hf_model.config, embedding_layout(enc_table, dec_table, hf_model.lm_head), family)
    for name, stack in (("encoder", base.encoder), ("decoder", base.decoder)):
        _check_sinusoids(stack.embed_positions.weight, f"{name}.embed_positions", family)
    model = build_model(config)
    copy_embeddings_and_head(model, enc_table, dec_table, hf_model.lm_head,
                             hf_model.final_logits_bias)
    copy_bart_like_layers(model, base.encoder, base.decoder)
    if config.final_norm:  # Pegasus: LayerNorm after each stack's last layer (Pre-LN, seed 000 §4.4)
        copy_norm(model.enc_norm, base.encoder.layer_norm)
        copy_norm(model.dec_norm, base.decoder.layer_norm)
    return model.eval()  # inference, like the other converters; .train() to fine-tune


# ---- the other way: glassformer -> Hugging Face (see export.py for how the family is chosen) ----

def to_hf(model):
    """The MarianMTModel of a Post-LN translator with half-split sinusoids."""
    from transformers import MarianConfig, MarianMTModel
    c = model.config
    share = c.share_embeddings
    hf = MarianMTModel(MarianConfig(**bart_like_config(
        c, c.tie_embeddings, decoder_vocab_size=c.out_vocab_size, share_encoder_decoder_embeddings=share)))
    sinusoid_tables(hf.model, model)
    tables_and_head(hf, model)
    bart_like_layers(model, hf.model.encoder, hf.model.decoder, pre_ln_final=False)
    return hf
