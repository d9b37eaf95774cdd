"""Weight copying shared by the encoder-decoder converters (Marian, BART, T5).

Hugging Face stores a linear layer as `nn.Linear.weight` of shape (out, in) and computes
x·Wᵀ + b; the seed writes y = x·W + b with W (in, out). So every matrix is transposed on the
way in, and the per-head projections are cut out of the (n_heads·d_k, d_model) weight:
head h owns rows h·d_k … (h+1)·d_k − 1, i.e. W_Q[h] = q.weight[h·d_k:(h+1)·d_k]ᵀ (seed §2.2).
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import InputError
from ..nn.attention import MultiHeadAttention
from ..nn.feedforward import FeedForward

# Hugging Face activation names (ACT2FN keys) -> ModelConfig.activation.
HF_ACTIVATIONS = {
    "relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu",
    "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
}


def activation(name: str, family: str) -> str:
    """ModelConfig.activation for a Hugging Face activation name, or a one-line InputError."""
    if name not in HF_ACTIVATIONS:
        raise InputError(f"{family} activation {name!r} is not supported; "
                         f"supported: {', '.join(sorted(HF_ACTIVATIONS))}")
    return HF_ACTIVATIONS[name]


def same(family: str, what: str, enc_value, dec_value) -> None:
    """glassformer uses one value for both stacks; stop with one line when the two differ."""
    if enc_value != dec_value:
        raise InputError(f"cannot convert this {family}: encoder {what}={enc_value} but decoder "
                         f"{what}={dec_value}; glassformer needs them equal")


def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two weights are one tensor (tied embeddings), however the module refers to it."""
    return a.shape == b.shape and a.data_ptr() == b.data_ptr()


def embedding_layout(enc_table: torch.Tensor, dec_table: torch.Tensor, lm_head: nn.Linear) -> dict:
    """share_embeddings / tie_embeddings / tgt_vocab_size as the weights actually are.

    Read from the tensors, not the config: transformers ties (or not) according to
    `tie_word_embeddings`, and with it off even the encoder and decoder tables are separate.
    """
    share = shares_storage(enc_table, dec_table)
    return {"share_embeddings": share, "tie_embeddings": shares_storage(lm_head.weight, dec_table),
            "tgt_vocab_size": None if share else dec_table.shape[0]}


@torch.no_grad()
def copy_attention(attn: MultiHeadAttention, q: nn.Linear, k: nn.Linear, v: nn.Linear, o: nn.Linear) -> None:
    """Per-head W_Q/W_K/W_V (n_heads, d_model, d_k) and W_O (n_heads·d_k, d_model) from four Linears."""
    H, dk = attn.n_heads, attn.d_k
    for name, lin in zip("QKV", (q, k, v)):
        W = lin.weight.detach()  # (H·d_k, d_model): head h is rows h·d_k … (h+1)·d_k − 1
        if W.shape != (H * dk, attn.d_model):
            raise InputError(f"attention weight has shape {tuple(W.shape)}, expected "
                             f"({H * dk}, {attn.d_model}) for {H} heads of d_k={dk}")
        getattr(attn, f"W_{name}").copy_(W.view(H, dk, attn.d_model).transpose(1, 2))
        _copy_bias(getattr(attn, f"b_{name}"), lin.bias, (H, dk))
    attn.W_O.copy_(o.weight.detach().T)  # concat(heads)·W_O, rows in head order (§2.4)
    _copy_bias(attn.b_O, o.bias, attn.W_O.shape[1:])


@torch.no_grad()
def copy_ffn(ffn: FeedForward, w1: nn.Linear, w2: nn.Linear, gate: nn.Linear | None = None) -> None:
    """FFN(x) = φ(x·W_1 + b_1)·W_2 + b_2; gated: (φ(x·W_G) ⊙ (x·W_1 + b_1))·W_2 + b_2."""
    ffn.W_1.copy_(w1.weight.detach().T)
    _copy_bias(ffn.b_1, w1.bias, ffn.W_1.shape[1:])
    ffn.W_2.copy_(w2.weight.detach().T)
    _copy_bias(ffn.b_2, w2.bias, ffn.W_2.shape[1:])
    if (gate is None) != (ffn.W_G is None):
        raise InputError("gated feed-forward mismatch between the Hugging Face model and the config")
    if gate is not None:
        ffn.W_G.copy_(gate.weight.detach().T)
        _copy_bias(getattr(ffn, "b_G", None), gate.bias, ffn.W_G.shape[1:])


@torch.no_grad()
def copy_norm(norm: nn.Module, hf_norm: nn.Module) -> None:
    """gamma (and beta for LayerNorm) from a LayerNorm / T5LayerNorm."""
    norm.gamma.copy_(hf_norm.weight.detach())
    _copy_bias(getattr(norm, "beta", None), getattr(hf_norm, "bias", None), norm.gamma.shape)


def _copy_bias(ours: torch.Tensor | None, theirs: torch.Tensor | None, shape) -> None:
    if ours is None and theirs is None:
        return
    if ours is None or theirs is None:
        raise InputError("bias mismatch: the Hugging Face layer has "
                         f"{'no' if theirs is None else 'a'} bias but the config says otherwise")
    ours.copy_(theirs.detach().reshape(shape))


def bart_like_layer_map(model, hf_encoder, hf_decoder):
    """Which of our modules is which Hugging Face module, layer by layer, in a BART-like model: one
    table read by the importer (`copy_bart_like_layers`) and the exporter (`writing.bart_like_layers`),
    so that the two directions cannot drift apart. Yields ("attention", ours, (q, k, v, out)),
    ("norm", ours, theirs) and ("ffn", ours, (fc1, fc2))."""
    for ours, theirs in zip(model.enc, hf_encoder.layers, strict=True):
        a = theirs.self_attn
        yield "attention", ours.attn, (a.q_proj, a.k_proj, a.v_proj, a.out_proj)
        yield "norm", ours.norm1, theirs.self_attn_layer_norm
        yield "ffn", ours.ffn, (theirs.fc1, theirs.fc2)
        yield "norm", ours.norm2, theirs.final_layer_norm
    for ours, theirs in zip(model.dec, hf_decoder.layers, strict=True):
        a, c = theirs.self_attn, theirs.encoder_attn
        yield "attention", ours.self_attn, (a.q_proj, a.k_proj, a.v_proj, a.out_proj)
        yield "norm", ours.norm1, theirs.self_attn_layer_norm
        yield "attention", ours.cross_attn, (c.q_proj, c.k_proj, c.v_proj, c.out_proj)
        yield "norm", ours.norm2, theirs.encoder_attn_layer_norm
        yield "ffn", ours.ffn, (theirs.fc1, theirs.fc2)
        yield "norm", ours.norm3, theirs.final_layer_norm


@torch.no_grad()
def copy_bart_like_layers(model, hf_encoder, hf_decoder) -> None:
    """Marian and BART share one layer layout (Post-LN, fc1/fc2, three decoder norms):

    encoder: self_attn → self_attn_layer_norm (norm1) → fc1/fc2 → final_layer_norm (norm2);
    decoder: self_attn → norm1, encoder_attn → encoder_attn_layer_norm (norm2), FFN → norm3.
    """
    for kind, ours, theirs in bart_like_layer_map(model, hf_encoder, hf_decoder):
        if kind == "attention":
            copy_attention(ours, *theirs)
        elif kind == "ffn":
            copy_ffn(ours, *theirs)
        else:
            copy_norm(ours, theirs)


@torch.no_grad()
def copy_embeddings_and_head(model, enc_embed: torch.Tensor, dec_embed: torch.Tensor,
                             lm_head: nn.Linear, head_bias: torch.Tensor | None = None,
                             head_scale: float = 1.0) -> None:
    """Token tables, the output projection (W_U = lm_head.weightᵀ unless tied) and b_U."""
    model.embed.W_E.copy_(enc_embed.detach())
    if not model.config.share_embeddings:
        model.dec_embed.W_E.copy_(dec_embed.detach())
    if model.head.W_U is not None:
        model.head.W_U.copy_(lm_head.weight.detach().T * head_scale)
    if head_bias is not None:
        model.head.b_U.copy_(head_bias.detach().reshape(-1))


def special_ids(hf_config, vocab: int) -> dict:
    """pad/bos/eos/decoder-start ids of a Hugging Face config that fit the vocabulary."""
    out = {}
    for ours, theirs in (("pad_id", "pad_token_id"), ("bos_id", "bos_token_id"),
                         ("eos_id", "eos_token_id"), ("decoder_start_id", "decoder_start_token_id")):
        value = getattr(hf_config, theirs, None)
        if isinstance(value, (list, tuple)):
            value = value[0] if value else None
        if isinstance(value, int) and 0 <= value < vocab:
            out[ours] = value
    return out
