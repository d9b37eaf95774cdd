"""GPT-2 (Radford et al. 2019) as a glassformer decoder-only language model.

GPT-2 is the 2017 decoder without cross-attention, with these changes mirrored by the config:
- Pre-LN layers (seed 000 §4.4: x + F(Norm(x))) and a final LayerNorm `ln_f` (final_norm=True);
- learned absolute positions (pe="learned", n_positions of them, §3.5);
- the tanh approximation of GELU ("gelu_new" -> "gelu_tanh", §6.1);
- the output projection tied to the token embedding (the paper's §3.4 weight sharing).

Its quirk: `Conv1D` layers store weights already (in, out) — the seed's orientation — so they are
not transposed, and `c_attn` holds W_Q | W_K | W_V side by side in one (d_model, 3·d_model) matrix.
"""

from __future__ import annotations

from typing import Any, Mapping

import torch

from ..config import ModelConfig
from ..nn import DecoderLM, build_model
from .common import Weights, hf_parts, linear_in_out, put, require, set_attention, set_ffn, set_norm, token_id
from .writing import PLAIN_ACTS, dropouts, gpt_block, head, hf_ids, norm

ACTIVATIONS = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu": "gelu",
               "relu": "relu", "silu": "silu", "swish": "silu"}
DEFAULTS = {"activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "n_inner": None,
            "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
            "reorder_and_upcast_attn": False, "add_cross_attention": False, "tie_word_embeddings": True,
            "resid_pdrop": 0.1, "attn_pdrop": 0.1}


def gpt2_config(cfg: Mapping[str, Any], tie: bool = True) -> ModelConfig:
    """The ModelConfig of a GPT-2 config dict; flags with no glassformer equivalent stop here."""
    get = lambda key: cfg.get(key, DEFAULTS.get(key))  # noqa: E731
    act = get("activation_function")
    require(act in ACTIVATIONS, f"GPT-2 activation_function={act!r} is not supported; use one of {', '.join(ACTIVATIONS)}")
    require(not get("scale_attn_by_inverse_layer_idx"),
            "GPT-2 scale_attn_by_inverse_layer_idx=True is not supported; convert a model with it False")
    require(not get("reorder_and_upcast_attn"),
            "GPT-2 reorder_and_upcast_attn=True is not supported; convert a model with it False")
    require(not get("add_cross_attention"),
            "GPT-2 add_cross_attention=True is not supported; convert a decoder-only GPT-2")
    vocab, d_model = cfg["vocab_size"], cfg["n_embd"]
    return ModelConfig(
        arch="decoder", vocab_size=vocab, d_model=d_model, n_heads=cfg["n_head"], n_layers=cfg["n_layer"],
        d_ff=get("n_inner") or 4 * d_model, activation=ACTIVATIONS[act], norm="layernorm",
        norm_eps=float(get("layer_norm_epsilon")), norm_position="pre", final_norm=True, pe="learned",
        max_len=cfg["n_positions"], scale_scores=bool(get("scale_attn_weights")), attn_bias=True,
        ffn_bias=True, tie_embeddings=tie, dropout=float(get("resid_pdrop")),
        attn_dropout=float(get("attn_pdrop")),
        bos_id=token_id(cfg.get("bos_token_id"), vocab), eos_id=token_id(cfg.get("eos_token_id"), vocab),
    )


def from_parts(cfg: Mapping[str, Any], state: Mapping[str, torch.Tensor]) -> DecoderLM:
    """A DecoderLM (eval mode) equal to the GPT-2 of a config dict and a state dict.

    With an untied `lm_head.weight` in the state dict (tie_word_embeddings=False) the head gets its
    own W_U; a bare GPT2Model (no head) gets the tied head, and HF's last_hidden_state is then the
    traced value `dec_norm`.
    """
    tied = bool(cfg.get("tie_word_embeddings", True)) or "lm_head.weight" not in state
    config = gpt2_config(cfg, tie=tied)
    model = build_model(config)
    W = Weights(state, ("transformer.", ""), "wte.weight")
    put(model.embed.W_E, W("wte.weight"), "wte")
    put(model.pos.W_pos, W("wpe.weight"), "wpe")
    read_gpt_blocks(model, W)
    set_norm(model.dec_norm, W("ln_f.weight"), W("ln_f.bias"))
    if not tied:
        put(model.head.W_U, linear_in_out(state["lm_head.weight"]), "lm_head")
    return model.eval()


def read_gpt_blocks(model, W: Weights) -> None:
    """The blocks `h.{i}` of GPT-2 or OpenAI GPT (the same names and Conv1D layout) into model.dec."""
    d = model.config.d_model
    for i, layer in enumerate(model.dec):
        p = f"h.{i}."
        W_qkv, b_qkv = W(p + "attn.c_attn.weight"), W(p + "attn.c_attn.bias")  # (d, 3d): Conv1D is (in, out)
        (W_Q, W_K, W_V), (b_Q, b_K, b_V) = W_qkv.split(d, dim=1), b_qkv.split(d)
        set_attention(layer.self_attn, W_Q, b_Q, W_K, b_K, W_V, b_V,
                      W(p + "attn.c_proj.weight"), W(p + "attn.c_proj.bias"))
        set_norm(layer.norm1, W(p + "ln_1.weight"), W(p + "ln_1.bias"))
        set_norm(layer.norm2, W(p + "ln_2.weight"), W(p + "ln_2.bias"))
        set_ffn(layer.ffn, W(p + "mlp.c_fc.weight"), W(p + "mlp.c_fc.bias"),
                W(p + "mlp.c_proj.weight"), W(p + "mlp.c_proj.bias"))


def convert(hf_model) -> DecoderLM:
    """glassformer DecoderLM whose logits equal a GPT2LMHeadModel's (or, via `dec_norm`, a GPT2Model's)."""
    return from_parts(*hf_parts(hf_model))


# ---- the other way: glassformer -> Hugging Face (see export.py for how the family is chosen) ----

def to_hf(model):
    """The GPT2LMHeadModel of a Pre-LN decoder with a learned table (export.py made it so)."""
    from transformers import GPT2Config, GPT2LMHeadModel
    c = model.config
    drop, adrop = dropouts(c)
    hf = GPT2LMHeadModel(GPT2Config(
        vocab_size=c.vocab_size, n_positions=c.max_len, n_embd=c.d_model, n_layer=c.n_layers, n_head=c.n_heads,
        n_inner=c.d_ff, activation_function=PLAIN_ACTS[c.activation], resid_pdrop=drop, embd_pdrop=drop,
        attn_pdrop=adrop, layer_norm_epsilon=c.norm_eps, scale_attn_weights=c.scale_scores,
        tie_word_embeddings=c.tie_embeddings, attn_implementation="eager", **hf_ids(c)))
    t = hf.transformer
    with torch.no_grad():
        t.wte.weight.copy_(model.embed.W_E)
        t.wpe.weight.copy_(model.pos.W_pos)
    for ours, theirs in zip(model.dec, t.h, strict=True):
        gpt_block(ours, theirs)
    norm(t.ln_f, model.dec_norm)
    head(hf.lm_head, model)
    return hf
