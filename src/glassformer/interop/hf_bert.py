"""BERT (Devlin et al. 2019) as a glassformer encoder: the 2017 encoder with BERT's input side.

What BERT changes from the paper's encoder (seed 000 ch. 3–5, 7), mirrored by the config:
- learned absolute positions (pe="learned", one vector per position up to max_position_embeddings)
  instead of sinusoids (§3.5);
- a third embedding, the token type ("segment" A/B), added to word + position;
- a LayerNorm right after that sum (embed_norm=True), then Post-LN layers as in §4.3;
- GELU in the FFN (§6.1), LayerNorm eps 1e-12, no final norm (each Post-LN layer ends normalised).

`from_parts(config_dict, state_dict)` needs neither `transformers` nor a live model, so
`glassformer.pretrained` uses it on the files of a checkpoint folder. The pooler (tanh over
[CLS]) and BertForMaskedLM's prediction head are not part of the encoder and are dropped.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ..config import ModelConfig
from ..nn import EncoderModel, build_model
from .common import Weights, hf_parts, linear_in_out, put, require, set_attention, set_ffn, set_norm, token_id
from .writing import PLAIN_ACTS, attention, dropouts, ffn, norm

# hidden_act -> glassformer activation (gelu_new / gelu_pytorch_tanh are the tanh approximation §6.1)
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh",
               "relu": "relu", "silu": "silu", "swish": "silu"}
# BertConfig defaults, for old config.json files that omit a key
DEFAULTS = {"hidden_act": "gelu", "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
            "type_vocab_size": 2, "pad_token_id": 0, "hidden_dropout_prob": 0.1,
            "attention_probs_dropout_prob": 0.1, "position_embedding_type": "absolute",
            "is_decoder": False, "add_cross_attention": False}


def bert_config(cfg: Mapping[str, Any]) -> ModelConfig:
    """The ModelConfig of a BERT config dict (BertConfig.to_dict() or a config.json)."""
    get = lambda key: cfg.get(key, DEFAULTS.get(key))  # noqa: E731
    act = get("hidden_act")
    require(act in ACTIVATIONS, f"BERT hidden_act={act!r} is not supported; use one of {', '.join(ACTIVATIONS)}")
    require(get("position_embedding_type") == "absolute",
            f"BERT position_embedding_type={get('position_embedding_type')!r} is not supported; only 'absolute'")
    require(not get("is_decoder") and not get("add_cross_attention"),
            "BERT with is_decoder/add_cross_attention is not supported; convert an encoder-only BertModel")
    vocab = cfg["vocab_size"]
    return ModelConfig(
        arch="encoder", vocab_size=vocab, d_model=cfg["hidden_size"], n_heads=cfg["num_attention_heads"],
        n_layers=cfg["num_hidden_layers"], d_ff=cfg["intermediate_size"], activation=ACTIVATIONS[act],
        norm="layernorm", norm_eps=float(get("layer_norm_eps")), norm_position="post", final_norm=False,
        embed_norm=True, pe="learned", max_len=get("max_position_embeddings"),
        n_segments=get("type_vocab_size"), attn_bias=True, ffn_bias=True,
        dropout=float(get("hidden_dropout_prob")), attn_dropout=float(get("attention_probs_dropout_prob")),
        pad_id=token_id(get("pad_token_id"), vocab),
    )


def from_parts(cfg: Mapping[str, Any], state: Mapping[str, torch.Tensor]) -> EncoderModel:
    """An EncoderModel (eval mode) equal to the BERT described by a config dict and a state dict.

    pad_id is BERT's pad_token_id, so `model(ids)` masks [PAD] keys on its own; pass
    padding_mask to say otherwise. Positions count non-padding tokens, which equals BERT's
    0, 1, 2, ... for right-padded batches (the tokenizers' default).
    """
    config = bert_config(cfg)
    model = build_model(config)
    W = Weights(state, ("", "bert."), "embeddings.word_embeddings.weight")
    put(model.embed.W_E, W("embeddings.word_embeddings.weight"), "word_embeddings")
    put(model.pos.W_pos, W("embeddings.position_embeddings.weight"), "position_embeddings")
    if config.n_segments:
        put(model.segment.W_E, W("embeddings.token_type_embeddings.weight"), "token_type_embeddings")
    set_norm(model.embed_norm, W("embeddings.LayerNorm.weight"), W("embeddings.LayerNorm.bias"))
    for i, layer in enumerate(model.enc):
        p = f"encoder.layer.{i}."
        lin = lambda name: (linear_in_out(W(p + name + ".weight")), W(p + name + ".bias"))  # noqa: E731
        set_attention(layer.attn, *lin("attention.self.query"), *lin("attention.self.key"),
                      *lin("attention.self.value"), *lin("attention.output.dense"))
        set_norm(layer.norm1, W(p + "attention.output.LayerNorm.weight"), W(p + "attention.output.LayerNorm.bias"))
        set_ffn(layer.ffn, *lin("intermediate.dense"), *lin("output.dense"))
        set_norm(layer.norm2, W(p + "output.LayerNorm.weight"), W(p + "output.LayerNorm.bias"))
    return model.eval()


def convert(hf_model) -> EncoderModel:
    """glassformer EncoderModel equal to a Hugging Face BertModel (or BertForMaskedLM's encoder).

    Compare `model(ids, padding_mask=~attention_mask.bool(), segment_ids=token_type_ids)` with
    `hf_model(ids, attention_mask=..., token_type_ids=...).last_hidden_state`.
    """
    return from_parts(*hf_parts(hf_model))


# ---- the other way: glassformer -> Hugging Face (see export.py for how the family is chosen) ----

def to_hf(model):
    """The BertModel (no pooler) of an encoder in BERT's form (export.py chose the family)."""
    from transformers import BertConfig, BertModel
    c = model.config
    drop, adrop = dropouts(c)
    hf = BertModel(BertConfig(
        vocab_size=c.vocab_size, hidden_size=c.d_model, num_hidden_layers=c.n_layers,
        num_attention_heads=c.n_heads, intermediate_size=c.d_ff, hidden_act=PLAIN_ACTS[c.activation],
        hidden_dropout_prob=drop, attention_probs_dropout_prob=adrop, max_position_embeddings=c.max_len,
        type_vocab_size=max(1, c.n_segments), layer_norm_eps=c.norm_eps, pad_token_id=c.pad_id or 0,
        attn_implementation="eager"), add_pooling_layer=False)
    with torch.no_grad():
        e = hf.embeddings
        e.word_embeddings.weight.copy_(model.embed.W_E)
        e.position_embeddings.weight.copy_(model.pos.W_pos)
        if c.n_segments:
            e.token_type_embeddings.weight.copy_(model.segment.W_E)
        else:  # BERT always adds a token-type row: a zero row adds nothing
            e.token_type_embeddings.weight.zero_()
        norm(e.LayerNorm, model.embed_norm)
    for ours, theirs in zip(model.enc, hf.encoder.layer, strict=True):
        a = theirs.attention
        attention(ours.attn, a.self.query, a.self.key, a.self.value, a.output.dense)
        norm(a.output.LayerNorm, ours.norm1)
        ffn(ours.ffn, theirs.intermediate.dense, theirs.output.dense)
        norm(theirs.output.LayerNorm, ours.norm2)
    return hf
