"""BartForConditionalGeneration -> glassformer EncoderDecoder with equal logits.

BART keeps the 2017 layer (Post-LN, seed 000 §4.3) but changes the input side:
- learned positions (our pe="learned") read with HF's offset of 2: position p is row p + 2
  of `embed_positions.weight`, so our table is that weight without its first two rows;
- `layernorm_embedding` right after embedding + position, on both sides (our embed_norm,
  which builds `embed_norm` for the encoder and `dec_embed_norm` for the decoder);
- exact GELU, optional × sqrt(d_model) (`scale_embedding`), `final_logits_bias` (our b_U),
  one vocabulary shared by encoder, decoder and the tied output projection (separate tables
  when transformers was told tie_word_embeddings=False: then nothing is tied).
"""

from __future__ import annotations

import torch

from ..config import ModelConfig
from ..errors import InputError
from ..nn.model import build_model
from ._seq2seq import (activation, copy_bart_like_layers, copy_embeddings_and_head, copy_norm,
                       embedding_layout, same, special_ids)
from .writing import bart_like_config, bart_like_layers, norm, tables_and_head

POSITION_OFFSET = 2  # BartLearnedPositionalEmbedding: rows 0 and 1 are never read


def bart_config(hf_config, layout: dict) -> ModelConfig:
    c = hf_config
    same("BART", "attention_heads", c.encoder_attention_heads, c.decoder_attention_heads)
    same("BART", "ffn_dim", c.encoder_ffn_dim, c.decoder_ffn_dim)
    if c.d_model % c.encoder_attention_heads:
        raise InputError(f"BART d_model={c.d_model} is not divisible by {c.encoder_attention_heads} heads")
    return ModelConfig(
        arch="encoder-decoder", vocab_size=c.vocab_size, d_model=c.d_model,
        n_heads=c.encoder_attention_heads, n_layers=c.encoder_layers, n_dec_layers=c.decoder_layers,
        d_ff=c.encoder_ffn_dim, activation=activation(c.activation_function, "BART"),
        norm="layernorm", norm_eps=1e-5, norm_position="post", final_norm=False, embed_norm=True,
        pe="learned", max_len=c.max_position_embeddings,
        embed_scale=bool(c.scale_embedding), scale_scores=True, attn_bias=True, ffn_bias=True,
        head_bias=True, **layout,
        dropout=float(c.dropout), attn_dropout=float(c.attention_dropout),
        **special_ids(c, c.vocab_size),
    )


@torch.no_grad()
def convert(hf_model):
    """A glassformer EncoderDecoder whose logits equal `hf_model`'s (BartForConditionalGeneration)."""
    base = hf_model.model
    enc_table, dec_table = base.encoder.embed_tokens.weight, base.decoder.embed_tokens.weight
    config = bart_config(hf_model.config, embedding_layout(enc_table, dec_table, hf_model.lm_head))
    model = build_model(config)
    copy_embeddings_and_head(model, enc_table, dec_table, hf_model.lm_head, hf_model.final_logits_bias)
    for prefix, stack in (("", base.encoder), ("dec_", base.decoder)):
        table = stack.embed_positions.weight[POSITION_OFFSET:]
        getattr(model, f"{prefix}pos").W_pos.copy_(table)
        copy_norm(getattr(model, f"{prefix}embed_norm"), stack.layernorm_embedding)
    copy_bart_like_layers(model, base.encoder, base.decoder)
    return model.eval()  # inference, like the other converters; .train() to fine-tune


# ---- the other way: glassformer -> Hugging Face (see export.py for how the family is chosen) ----

def to_hf(model):
    """The BartForConditionalGeneration of a Post-LN translator with learned positions and embed_norm."""
    from transformers import BartConfig, BartForConditionalGeneration
    c = model.config
    hf = BartForConditionalGeneration(BartConfig(**bart_like_config(c, c.tie_embeddings and c.share_embeddings)))
    base = hf.model
    with torch.no_grad():
        for stack, prefix in ((base.encoder, ""), (base.decoder, "dec_")):
            stack.embed_positions.weight[2:].copy_(getattr(model, f"{prefix}pos").W_pos)  # BART's offset of 2
            stack.embed_positions.weight[:2].zero_()  # never read
            norm(stack.layernorm_embedding, getattr(model, f"{prefix}embed_norm"))
    tables_and_head(hf, model)
    bart_like_layers(model, base.encoder, base.decoder, pre_ln_final=False)
    return hf
