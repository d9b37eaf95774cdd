"""LLaMA (Touvron et al. 2023) as a glassformer decoder-only language model.

LLaMA keeps the decoder-only shape of GPT and swaps three of the seed's components:
- RMSNorm instead of LayerNorm (seed 000 ch. 5: no centring, no beta), Pre-LN, final norm;
- RoPE instead of added positions (§3.5): Q and K rotated in (x_i, x_{i+d/2}) pairs — the same
  half-split layout as glassformer's RotaryEmbedding, so weights copy without permutation;
- SwiGLU (ch. 6): down(silu(gate(x)) ⊙ up(x)) is glassformer's φ(x·W_G) ⊙ (x·W_1)·W_2, so
  W_G = gate_proj, W_1 = up_proj, W_2 = down_proj.
Grouped-query attention (num_key_value_heads < num_attention_heads) shares one K/V head among
n_heads / n_kv query heads; copying that K/V head to each query head it serves is exact.
"""

from __future__ import annotations

import math

from typing import Any, Mapping

import torch

from ..config import ModelConfig
from ..nn import DecoderLM, build_model
from .common import Weights, hf_parts, linear_in_out, put, require, set_attention, set_ffn, set_norm, token_id
from .writing import det, ffn, head, head_bias, heads, hf_ids, linear, norm

GATES = {"silu": "swiglu", "swish": "swiglu", "relu": "reglu", "gelu_pytorch_tanh": "geglu", "gelu_new": "geglu"}


def rope_theta(cfg: Mapping[str, Any]) -> float:
    """RoPE base θ; scaled RoPE variants (linear, dynamic, YaRN, llama3) stop with one line."""
    params = cfg.get("rope_parameters") or {}  # transformers 5
    scaling = cfg.get("rope_scaling")  # transformers 4
    kind = params.get("rope_type", params.get("type", "default"))
    require(kind == "default" and not scaling,
            f"LLaMA rope scaling {scaling or params!r} is not supported; convert a model with rope_scaling=None")
    return float(params.get("rope_theta", cfg.get("rope_theta", 10000.0)))


def llama_config(cfg: Mapping[str, Any], tie: bool) -> ModelConfig:
    """The ModelConfig of a LLaMA config dict."""
    act = cfg.get("hidden_act", "silu")
    require(act in GATES, f"LLaMA hidden_act={act!r} is not supported; use one of {', '.join(GATES)}")
    n_heads, d_model = cfg["num_attention_heads"], cfg["hidden_size"]
    n_kv = cfg.get("num_key_value_heads") or n_heads
    require(n_heads % n_kv == 0, f"LLaMA num_attention_heads={n_heads} is not a multiple of "
                                 f"num_key_value_heads={n_kv}; give a divisor of it")
    vocab = cfg["vocab_size"]
    return ModelConfig(
        arch="decoder", vocab_size=vocab, d_model=d_model, n_heads=n_heads,
        d_k=cfg.get("head_dim") or d_model // n_heads, n_layers=cfg["num_hidden_layers"],
        d_ff=cfg["intermediate_size"], activation=GATES[act], norm="rmsnorm",
        norm_eps=float(cfg.get("rms_norm_eps", 1e-6)), norm_position="pre", final_norm=True,
        pe="rope", rope_theta=rope_theta(cfg), max_len=cfg.get("max_position_embeddings", 2048),
        attn_bias=bool(cfg.get("attention_bias", False)), ffn_bias=bool(cfg.get("mlp_bias", False)),
        tie_embeddings=tie, dropout=0.0, attn_dropout=float(cfg.get("attention_dropout", 0.0)),
        bos_id=token_id(cfg.get("bos_token_id"), vocab), eos_id=token_id(cfg.get("eos_token_id"), vocab),
    )


def repeat_kv(W: torch.Tensor, n_kv: int, n_rep: int, d_k: int) -> torch.Tensor:
    """(in, n_kv·d_k) -> (in, n_kv·n_rep·d_k): K/V head g serves query heads g·n_rep … g·n_rep+n_rep−1."""
    lead = W.shape[:-1]
    return W.reshape(*lead, n_kv, 1, d_k).expand(*lead, n_kv, n_rep, d_k).reshape(*lead, n_kv * n_rep * d_k)


def from_parts(cfg: Mapping[str, Any], state: Mapping[str, torch.Tensor]) -> DecoderLM:
    """A DecoderLM (eval mode) equal to the LLaMA of a config dict and a state dict."""
    tied = bool(cfg.get("tie_word_embeddings", False)) or "lm_head.weight" not in state
    config = llama_config(cfg, tie=tied)
    model = build_model(config)
    W = Weights(state, ("model.", ""), "embed_tokens.weight")
    n_kv = cfg.get("num_key_value_heads") or config.n_heads
    rep, dk = config.n_heads // n_kv, config.head_dim

    def lin(name: str, bias: bool, kv: bool = False):
        w = linear_in_out(W(name + ".weight"))
        b = W(name + ".bias") if bias else None
        if kv:
            w, b = repeat_kv(w, n_kv, rep, dk), None if b is None else repeat_kv(b, n_kv, rep, dk)
        return w, b

    put(model.embed.W_E, W("embed_tokens.weight"), "embed_tokens")
    ab, fb = config.attn_bias, config.ffn_bias
    for i, layer in enumerate(model.dec):
        p = f"layers.{i}."
        set_attention(layer.self_attn, *lin(p + "self_attn.q_proj", ab), *lin(p + "self_attn.k_proj", ab, kv=True),
                      *lin(p + "self_attn.v_proj", ab, kv=True), *lin(p + "self_attn.o_proj", ab))
        set_norm(layer.norm1, W(p + "input_layernorm.weight"))
        set_norm(layer.norm2, W(p + "post_attention_layernorm.weight"))
        W_1, b_1 = lin(p + "mlp.up_proj", fb)
        W_G, b_G = lin(p + "mlp.gate_proj", fb)
        W_2, b_2 = lin(p + "mlp.down_proj", fb)
        set_ffn(layer.ffn, W_1, b_1, W_2, b_2, W_G, b_G)
    set_norm(model.dec_norm, W("norm.weight"))
    if not tied:
        put(model.head.W_U, linear_in_out(state["lm_head.weight"]), "lm_head")
    return model.eval()


def convert(hf_model) -> DecoderLM:
    """glassformer DecoderLM whose logits equal a LlamaForCausalLM's."""
    return from_parts(*hf_parts(hf_model))


# ---- the other way: glassformer -> Hugging Face (see export.py for how the family is chosen) ----

def kv_groups(attn) -> int:
    """How many K/V heads the repeated ones are: the fewest n_kv whose groups are bit-equal copies."""
    H = attn.n_heads
    for n_kv in range(1, H + 1):
        if H % n_kv:
            continue
        rep = H // n_kv
        ok = all(torch.equal(getattr(attn, name)[g * rep], getattr(attn, name)[g * rep + r])
                 for name in ("W_K", "W_V", "b_K", "b_V") if getattr(attn, name) is not None
                 for g in range(n_kv) for r in range(1, rep))
        if ok:
            return n_kv
    return H


def to_hf(model):
    """The LlamaForCausalLM of an RMSNorm/RoPE/gated decoder; grouped K/V heads written once (n_kv)."""
    from transformers import LlamaConfig, LlamaForCausalLM
    c = model.config
    # groups that repeat in every layer: the least common multiple of each layer's fewest (all divide n_heads)
    n_kv = math.lcm(*[kv_groups(layer.self_attn) for layer in model.dec])
    rep = c.n_heads // n_kv
    act = {"swiglu": "silu", "geglu": "gelu_pytorch_tanh", "reglu": "relu"}[c.activation]
    hf = LlamaForCausalLM(LlamaConfig(
        vocab_size=c.vocab_size, hidden_size=c.d_model, intermediate_size=c.d_ff, num_hidden_layers=c.n_layers,
        num_attention_heads=c.n_heads, num_key_value_heads=n_kv, head_dim=c.head_dim, hidden_act=act,
        max_position_embeddings=c.max_len, rms_norm_eps=c.norm_eps, tie_word_embeddings=c.tie_embeddings,
        rope_parameters={"rope_type": "default", "rope_theta": c.rope_theta}, attention_bias=c.attn_bias,
        mlp_bias=c.ffn_bias, attention_dropout=float(c.attn_dropout_p), attn_implementation="eager", **hf_ids(c)))
    m = hf.model
    with torch.no_grad():
        m.embed_tokens.weight.copy_(model.embed.W_E)
    for ours, theirs in zip(model.dec, m.layers, strict=True):
        a, s = ours.self_attn, theirs.self_attn
        linear(s.q_proj, heads(det(a.W_Q)), head_bias(det(a.b_Q)))
        for sym, lin in (("K", s.k_proj), ("V", s.v_proj)):  # one head per group: n_kv heads written, not repeated
            W, b = det(getattr(a, f"W_{sym}"))[::rep], det(getattr(a, f"b_{sym}"))
            linear(lin, heads(W), None if b is None else b[::rep].reshape(-1))
        linear(s.o_proj, det(a.W_O), det(a.b_O))
        norm(theirs.input_layernorm, ours.norm1)
        norm(theirs.post_attention_layernorm, ours.norm2)
        ffn(ours.ffn, theirs.mlp.up_proj, theirs.mlp.down_proj, theirs.mlp.gate_proj)
    norm(m.norm, model.dec_norm)
    head(hf.lm_head, model)
    return hf
