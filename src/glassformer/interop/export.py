"""glassformer model -> the Hugging Face family that computes the same function (the inverse of `from_hf`).

`to_hf(model)` first rewrites the model into an equivalent one that a family can hold, then copies
the weights the other way round from the converters of this package (W (in, out) -> nn.Linear
(out, in); per-head W_Q (n_heads, d_model, d_k) merged back into (n_heads·d_k, d_model)).
The rewrites change the parameters, never the function:

- an interleaved sinusoid table (sin, cos, sin, cos, ...) is the half-split one (all sines, then all
  cosines: Marian, Pegasus) read in a permuted d_model basis, so every weight that reads or writes
  the residual stream is permuted by σ = (0, 2, 4, ..., 1, 3, 5, ...) and the model reads pe="sinusoidal_half";
  LayerNorm and RMSNorm treat the features as a set, so they are unchanged by a permutation;
- a fixed sinusoid table is a learned table that holds the same values (BERT, GPT, BART), for the
  first `max_len` positions;
- × sqrt(d_model) on the embedding is folded into the token table, and an output head tied to it
  is untied first (it must keep the unscaled table);
- separate source and target vocabularies become two tables of one size (the larger) for families
  with one `vocab_size`; the target ids past the real vocabulary get a logit bias of -1e9, so they
  are never chosen (logits over the real vocabulary are unchanged).

A configuration no family can express stops with one line that names, per family tried, the field
that rules it out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from ..config import ModelConfig
from ..errors import InputError
from ..nn.model import build_model

NEG = -1e9  # logit bias of the padding ids of a padded target vocabulary: never chosen, still finite
ABSOLUTE = ("sinusoidal", "sinusoidal_half", "learned")
PLAIN_ACTS = {"relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_new", "silu": "silu"}


@dataclass
class Export:
    """What `plan` decided: the family, the equivalent model it holds, and the rewrites made."""

    family: str
    model: nn.Module
    notes: list[str] = field(default_factory=list)
    real_tgt_vocab: int | None = None  # logits past this index are padding of the target vocabulary


# ---------------------------------------------------------------- rewrites (same function) ----

def _rebuilt(model, config: ModelConfig, state: dict[str, torch.Tensor]):
    new = build_model(config)
    missing, unexpected = new.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    return new.eval()


def _residual_dim(name: str) -> int | None:
    """The dimension of a parameter that indexes the d_model residual basis (None: it has none)."""
    leaf = name.rsplit(".", 1)[-1]
    return {"W_E": 1, "W_pos": 1, "W_Q": 1, "W_K": 1, "W_V": 1, "W_O": 1, "W_2": 1,
            "b_O": 0, "b_2": 0, "gamma": 0, "beta": 0, "W_1": 0, "W_G": 0, "W_U": 0,
            "running_mean": 0, "running_var": 0}.get(leaf)


def half_split_basis(model):
    """An interleaved-sinusoid model as the equal pe='sinusoidal_half' model in the basis σ."""
    cfg = model.config
    d = cfg.d_model
    sigma = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])
    state = {}
    for name, t in model.state_dict().items():
        dim = _residual_dim(name)
        if dim is not None:
            assert t.shape[dim] == d, (name, t.shape)
            t = t.index_select(dim, sigma)
        state[name] = t.clone()
    return _rebuilt(model, cfg.replace(pe="sinusoidal_half"), state)


@torch.no_grad()
def learned_table(model, rows: int):
    """A fixed-sinusoid model as the equal pe='learned' model whose table holds the sinusoids."""
    cfg = model.config
    state = {k: v.clone() for k, v in model.state_dict().items()}
    positions = torch.arange(rows)
    for prefix in ("", "dec_"):
        pos = getattr(model, f"{prefix}pos", None)
        if pos is not None:
            state[f"{prefix}pos.W_pos"] = pos(positions).to(model.embed.W_E.dtype)
    return _rebuilt(model, cfg.replace(pe="learned", max_len=rows), state)


@torch.no_grad()
def fold_embed_scale(model):
    """× sqrt(d_model) moved into the token tables; a head tied to a table keeps the unscaled one."""
    cfg = model.config
    state = {k: v.clone() for k, v in model.state_dict().items()}
    scale = model.embed.scale
    if cfg.arch != "encoder" and cfg.tie_embeddings:
        table = model.dec_embed.W_E if cfg.arch == "encoder-decoder" else model.embed.W_E
        state["head.W_U"] = table.detach().t().contiguous()
    for name in ("embed.W_E", "dec_embed.W_E"):
        if name in state:
            state[name] = state[name] * scale
    tie = False if cfg.arch != "encoder" else cfg.tie_embeddings
    return _rebuilt(model, cfg.replace(embed_scale=False, tie_embeddings=tie), state)


@torch.no_grad()
def one_vocab_size(model):
    """Separate source and target vocabularies as two tables of the larger size (padding rows zero)."""
    cfg = model.config
    V = max(cfg.vocab_size, cfg.out_vocab_size)
    state = {k: v.clone() for k, v in model.state_dict().items()}

    def pad_rows(t, n, value=0.0):
        extra = t.new_full((n - t.shape[0], *t.shape[1:]), value)
        return torch.cat([t, extra])

    state["embed.W_E"] = pad_rows(model.embed.W_E, V)
    state["dec_embed.W_E"] = pad_rows(model.dec_embed.W_E, V)
    if model.head.W_U is not None:
        state["head.W_U"] = pad_rows(model.head.W_U.t(), V).t().contiguous()
    b = model.head.b_U if model.head.b_U is not None else torch.zeros(cfg.out_vocab_size)
    state["head.b_U"] = pad_rows(b, V, NEG)
    new_cfg = cfg.replace(vocab_size=V, tgt_vocab_size=None, share_embeddings=False, head_bias=True)
    return _rebuilt(model, new_cfg, state)


# ---------------------------------------------------------------- which family fits ----

def _blockers(cfg: ModelConfig, family: str) -> list[str]:
    """Fields (with their value) that rule `family` out; empty: the family computes this model."""
    out: list[str] = []

    def need(ok: bool, text: str) -> None:
        if not ok:
            out.append(text)

    need(cfg.residual, "residual=False")
    need(cfg.pe_combine == "add", f"pe_combine={cfg.pe_combine!r}")
    gated = cfg.activation in ("swiglu", "geglu", "reglu")
    equal_heads = cfg.head_dim * cfg.n_heads == cfg.d_model
    arch = {"bert": "encoder", "gpt2": "decoder", "openai-gpt": "decoder", "llama": "decoder",
            "marian": "encoder-decoder", "bart": "encoder-decoder", "pegasus": "encoder-decoder",
            "t5": "encoder-decoder"}[family]
    need(cfg.arch == arch, f"arch={cfg.arch!r}")
    if out:
        return out
    if family in ("bert", "gpt2", "openai-gpt", "marian", "bart", "pegasus"):
        need(cfg.norm == "layernorm", f"norm={cfg.norm!r}")
        need(not gated, f"activation={cfg.activation!r}")
        need(equal_heads, f"d_k={cfg.head_dim} (needs d_model/n_heads={cfg.d_model // cfg.n_heads})")
        need(cfg.scale_scores or family == "gpt2", "scale_scores=False")
        post = family in ("bert", "openai-gpt", "marian", "bart")
        need(cfg.norm_position == ("post" if post else "pre"), f"norm_position={cfg.norm_position!r}")
        need(cfg.use_final_norm == (not post), f"final_norm={cfg.use_final_norm}")
        need(cfg.embed_norm == (family in ("bert", "bart")), f"embed_norm={cfg.embed_norm}")
        if family in ("marian", "pegasus"):
            need(cfg.pe in ("sinusoidal", "sinusoidal_half") and cfg.pe_base == 10000.0,
                 f"pe={cfg.pe!r}" + ("" if cfg.pe_base == 10000.0 else f", pe_base={cfg.pe_base}"))
        else:
            need(cfg.pe in ABSOLUTE, f"pe={cfg.pe!r}")
        if family in ("marian", "bart", "pegasus"):
            need(cfg.norm_eps == 1e-5, f"norm_eps={cfg.norm_eps} (torch.nn.LayerNorm's 1e-5)")
        if family == "openai-gpt":
            need(cfg.d_ff == 4 * cfg.d_model, f"d_ff={cfg.d_ff} (OpenAI GPT has 4·d_model={4 * cfg.d_model})")
            need(cfg.activation in ("relu", "gelu_tanh", "silu"), f"activation={cfg.activation!r}")
        if family in ("bert", "gpt2", "openai-gpt"):
            need(not cfg.head_bias, "head_bias=True")
    elif family == "llama":
        need(cfg.norm == "rmsnorm", f"norm={cfg.norm!r}")
        need(gated, f"activation={cfg.activation!r} (LLaMA's MLP is gated)")
        need(cfg.norm_position == "pre" and cfg.use_final_norm, f"norm_position={cfg.norm_position!r}")
        need(cfg.pe == "rope", f"pe={cfg.pe!r}")
        need(cfg.scale_scores, "scale_scores=False")
        need(not cfg.embed_norm, "embed_norm=True")
        need(not cfg.head_bias, "head_bias=True")
    elif family == "t5":
        need(cfg.norm == "rmsnorm", f"norm={cfg.norm!r}")
        need(cfg.norm_position == "pre" and cfg.use_final_norm, f"norm_position={cfg.norm_position!r}")
        need(cfg.pe == "relative", f"pe={cfg.pe!r}")
        need(not cfg.scale_scores, "scale_scores=True (T5 does not divide by sqrt(d_k))")
        need(not cfg.attn_bias and not cfg.ffn_bias, "attn_bias/ffn_bias=True (T5 has no biases)")
        need(not cfg.embed_norm and not cfg.head_bias, "embed_norm/head_bias=True")
        need(not cfg.embed_scale, "embed_scale=True")
        need(cfg.tie_embeddings, "tie_embeddings=False (transformers 5 always ties T5's head)")
        need(cfg.tgt_vocab_size in (None, cfg.vocab_size), f"tgt_vocab_size={cfg.tgt_vocab_size}")
    return out


# closest first: where two fit (an absolute-PE Pre-LN LM is GPT-2 and, with a sinusoid, nothing else), the first
FAMILIES = {"encoder": ("bert",), "decoder": ("gpt2", "llama", "openai-gpt"),
            "encoder-decoder": ("marian", "pegasus", "bart", "t5")}
HF_NAMES = {"bert": "BERT", "gpt2": "GPT-2", "openai-gpt": "OpenAI GPT", "llama": "LLaMA",
            "marian": "Marian", "pegasus": "Pegasus", "bart": "BART", "t5": "T5"}


def _check_weights(model) -> None:
    bad = next((k for k, t in model.state_dict().items() if t.is_floating_point() and not t.isfinite().all()), None)
    if bad is not None:
        raise InputError(f"cannot export: {bad} holds NaN or infinite values; export a checkpoint with finite "
                         "weights (best/ or an earlier one)")


def plan(model) -> Export:
    """The family for `model` and the equivalent model in the form that family holds."""
    cfg = model.config
    _check_weights(model)
    if cfg.norm == "batchnorm" or cfg.norm == "none":
        families_tried = ", ".join(HF_NAMES[f] for f in FAMILIES[cfg.arch])
        raise InputError(f"cannot export: norm={cfg.norm!r} is in no Hugging Face family (tried {families_tried}); "
                         "train with --norm layernorm or rmsnorm")
    reasons = {}
    for family in FAMILIES[cfg.arch]:
        blockers = _blockers(cfg, family)
        if not blockers:
            return _prepare(model, family)
        reasons[family] = blockers[0]
    tried = "; ".join(f"{HF_NAMES[f]}: {why}" for f, why in reasons.items())
    raise InputError(f"cannot export this {cfg.arch}: no Hugging Face family computes it ({tried})")


def _prepare(model, family: str) -> Export:
    cfg = model.config
    ex = Export(family, model)
    if family in ("marian", "pegasus") and cfg.pe == "sinusoidal":
        ex.model = half_split_basis(ex.model)
        ex.notes.append("interleaved sinusoids written as the half-split table: d_model basis permuted by σ")
    if family in ("bert", "gpt2", "openai-gpt", "bart") and cfg.pe != "learned":
        ex.model = learned_table(ex.model, cfg.max_len)
        ex.notes.append(f"sinusoid table stored as {cfg.max_len} learned positions (max_len)")
    if cfg.embed_scale and family not in ("marian", "pegasus", "bart"):
        ex.model = fold_embed_scale(ex.model)
        ex.notes.append("× sqrt(d_model) folded into the token table (head untied to keep the unscaled one)")
    c = ex.model.config
    if family in ("pegasus", "bart") and (not c.share_embeddings and c.out_vocab_size != c.vocab_size):
        ex.real_tgt_vocab = c.out_vocab_size
        ex.model = one_vocab_size(ex.model)
        ex.notes.append(f"source {c.vocab_size} / target {c.out_vocab_size} tokens as two tables of "
                        f"{max(c.vocab_size, c.out_vocab_size)}; target ids ≥ {c.out_vocab_size} get logit bias -1e9")
    return ex


# ---------------------------------------------------------------- weight writing ----

def _t(x: torch.Tensor | None) -> torch.Tensor | None:
    return None if x is None else x.detach()


@torch.no_grad()
def _linear(lin: nn.Module, W: torch.Tensor, b: torch.Tensor | None, conv1d: bool = False) -> None:
    """Our y = x·W + b into an nn.Linear (weight (out, in)) or GPT's Conv1D (weight (in, out))."""
    lin.weight.copy_(W if conv1d else W.t())
    if getattr(lin, "bias", None) is not None:
        lin.bias.copy_(b if b is not None else torch.zeros_like(lin.bias))
    elif b is not None and bool(b.any()):
        raise InputError("cannot export: a bias the Hugging Face layer has no place for is not zero")


def _heads(W: torch.Tensor) -> torch.Tensor:
    """W_Q (n_heads, d_model, d_k) -> (d_model, n_heads·d_k), heads side by side (x·W layout)."""
    H, d, dk = W.shape
    return W.permute(1, 0, 2).reshape(d, H * dk)


def _head_bias(b: torch.Tensor | None) -> torch.Tensor | None:
    return None if b is None else b.reshape(-1)


def _attention(attn, q, k, v, o) -> None:
    for sym, lin in zip("QKV", (q, k, v)):
        _linear(lin, _heads(_t(getattr(attn, f"W_{sym}"))), _head_bias(_t(getattr(attn, f"b_{sym}"))))
    _linear(o, _t(attn.W_O), _t(attn.b_O))


@torch.no_grad()
def _norm(hf_norm, norm) -> None:
    hf_norm.weight.copy_(norm.gamma)
    if getattr(hf_norm, "bias", None) is not None:
        hf_norm.bias.copy_(norm.beta if getattr(norm, "beta", None) is not None else torch.zeros_like(hf_norm.bias))


def _ffn(ffn, w1, w2, gate=None) -> None:
    _linear(w1, _t(ffn.W_1), _t(ffn.b_1))
    _linear(w2, _t(ffn.W_2), _t(ffn.b_2))
    if gate is not None:
        _linear(gate, _t(ffn.W_G), _t(getattr(ffn, "b_G", None)))


def _ids(cfg: ModelConfig) -> dict:
    return {"pad_token_id": cfg.pad_id, "bos_token_id": cfg.bos_id, "eos_token_id": cfg.eos_id}


def _dropouts(cfg: ModelConfig) -> tuple[float, float]:
    return float(cfg.dropout), float(cfg.attn_dropout_p)


def _bert(model):
    from transformers import BertConfig, BertModel
    c = model.config
    drop, adrop = _dropouts(c)
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
        _norm(e.LayerNorm, model.embed_norm)
    for ours, theirs in zip(model.enc, hf.encoder.layer, strict=True):
        a = theirs.attention
        _attention(ours.attn, a.self.query, a.self.key, a.self.value, a.output.dense)
        _norm(a.output.LayerNorm, ours.norm1)
        _ffn(ours.ffn, theirs.intermediate.dense, theirs.output.dense)
        _norm(theirs.output.LayerNorm, ours.norm2)
    return hf


def _gpt2(model):
    from transformers import GPT2Config, GPT2LMHeadModel
    c = model.config
    drop, adrop = _dropouts(c)
    hf = GPT2LMHeadModel(GPT2Config(
        vocab_size=c.vocab_size, n_positions=c.max_len, n_embd=c.d_model, n_layer=c.n_layers, n_head=c.n_heads,
        n_inner=c.d_ff, activation_function=PLAIN_ACTS[c.activation], resid_pdrop=drop, embd_pdrop=drop,
        attn_pdrop=adrop, layer_norm_epsilon=c.norm_eps, scale_attn_weights=c.scale_scores,
        tie_word_embeddings=c.tie_embeddings, attn_implementation="eager", **_ids(c)))
    t = hf.transformer
    with torch.no_grad():
        t.wte.weight.copy_(model.embed.W_E)
        t.wpe.weight.copy_(model.pos.W_pos)
    for ours, theirs in zip(model.dec, t.h, strict=True):
        a = ours.self_attn
        W = torch.cat([_heads(_t(a.W_Q)), _heads(_t(a.W_K)), _heads(_t(a.W_V))], dim=1)  # Conv1D: (in, out)
        b = None if a.b_Q is None else torch.cat([_t(a.b_Q).reshape(-1), _t(a.b_K).reshape(-1), _t(a.b_V).reshape(-1)])
        _linear(theirs.attn.c_attn, W, b, conv1d=True)
        _linear(theirs.attn.c_proj, _t(a.W_O), _t(a.b_O), conv1d=True)
        _norm(theirs.ln_1, ours.norm1)
        _norm(theirs.ln_2, ours.norm2)
        _linear(theirs.mlp.c_fc, _t(ours.ffn.W_1), _t(ours.ffn.b_1), conv1d=True)
        _linear(theirs.mlp.c_proj, _t(ours.ffn.W_2), _t(ours.ffn.b_2), conv1d=True)
    _norm(t.ln_f, model.dec_norm)
    _head(hf.lm_head, model)
    return hf


def _openai_gpt(model):
    from transformers import OpenAIGPTConfig, OpenAIGPTLMHeadModel
    c = model.config
    drop, adrop = _dropouts(c)
    afn = {"relu": "relu", "gelu_tanh": "gelu", "silu": "silu"}[c.activation]  # its "gelu" is the tanh form
    hf = OpenAIGPTLMHeadModel(OpenAIGPTConfig(
        vocab_size=c.vocab_size, n_positions=c.max_len, n_embd=c.d_model, n_layer=c.n_layers, n_head=c.n_heads,
        afn=afn, resid_pdrop=drop, embd_pdrop=drop, attn_pdrop=adrop, layer_norm_epsilon=c.norm_eps,
        tie_word_embeddings=c.tie_embeddings, **_ids(c)))
    t = hf.transformer
    with torch.no_grad():
        t.tokens_embed.weight.copy_(model.embed.W_E)
        t.positions_embed.weight.copy_(model.pos.W_pos)
    for ours, theirs in zip(model.dec, t.h, strict=True):  # Post-LN: ln_1(x + attn(x)), ln_2(n + mlp(n))
        a = ours.self_attn
        W = torch.cat([_heads(_t(a.W_Q)), _heads(_t(a.W_K)), _heads(_t(a.W_V))], dim=1)
        b = None if a.b_Q is None else torch.cat([_t(a.b_Q).reshape(-1), _t(a.b_K).reshape(-1), _t(a.b_V).reshape(-1)])
        _linear(theirs.attn.c_attn, W, b, conv1d=True)
        _linear(theirs.attn.c_proj, _t(a.W_O), _t(a.b_O), conv1d=True)
        _norm(theirs.ln_1, ours.norm1)
        _norm(theirs.ln_2, ours.norm2)
        _linear(theirs.mlp.c_fc, _t(ours.ffn.W_1), _t(ours.ffn.b_1), conv1d=True)
        _linear(theirs.mlp.c_proj, _t(ours.ffn.W_2), _t(ours.ffn.b_2), conv1d=True)
    _head(hf.lm_head, model)
    return hf


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


def _llama(model):
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
        mlp_bias=c.ffn_bias, attention_dropout=float(c.attn_dropout_p), attn_implementation="eager", **_ids(c)))
    m = hf.model
    with torch.no_grad():
        m.embed_tokens.weight.copy_(model.embed.W_E)
    for ours, theirs in zip(model.dec, m.layers, strict=True):
        a, s = ours.self_attn, theirs.self_attn
        _linear(s.q_proj, _heads(_t(a.W_Q)), _head_bias(_t(a.b_Q)))
        for sym, lin in (("K", s.k_proj), ("V", s.v_proj)):  # one head per group: n_kv heads written, not repeated
            W, b = _t(getattr(a, f"W_{sym}"))[::rep], _t(getattr(a, f"b_{sym}"))
            _linear(lin, _heads(W), None if b is None else b[::rep].reshape(-1))
        _linear(s.o_proj, _t(a.W_O), _t(a.b_O))
        _norm(theirs.input_layernorm, ours.norm1)
        _norm(theirs.post_attention_layernorm, ours.norm2)
        _ffn(ours.ffn, theirs.mlp.up_proj, theirs.mlp.down_proj, theirs.mlp.gate_proj)
    _norm(m.norm, model.dec_norm)
    _head(hf.lm_head, model)
    return hf


@torch.no_grad()
def _head(lm_head: nn.Linear, model) -> None:
    if model.head.W_U is not None:  # untied: our W_U (d_model, vocab) is lm_head.weight transposed
        lm_head.weight.copy_(model.head.W_U.t())


def _bart_like_config(c: ModelConfig, tie: bool, **extra) -> dict:
    drop, adrop = _dropouts(c)
    return dict(
        vocab_size=c.vocab_size, d_model=c.d_model, encoder_layers=c.n_layers, decoder_layers=c.dec_layers,
        encoder_attention_heads=c.n_heads, decoder_attention_heads=c.n_heads, encoder_ffn_dim=c.d_ff,
        decoder_ffn_dim=c.d_ff, activation_function=PLAIN_ACTS[c.activation], scale_embedding=c.embed_scale,
        dropout=drop, attention_dropout=adrop, activation_dropout=0.0, max_position_embeddings=c.max_len,
        decoder_start_token_id=c.start_id, forced_eos_token_id=None, attn_implementation="eager",
        tie_word_embeddings=tie, **_ids(c), **extra)


@torch.no_grad()
def _bart_like_layers(model, enc, dec, pre_ln_final: bool) -> None:
    for ours, theirs in zip(model.enc, enc.layers, strict=True):
        a = theirs.self_attn
        _attention(ours.attn, a.q_proj, a.k_proj, a.v_proj, a.out_proj)
        _norm(theirs.self_attn_layer_norm, ours.norm1)
        _ffn(ours.ffn, theirs.fc1, theirs.fc2)
        _norm(theirs.final_layer_norm, ours.norm2)
    for ours, theirs in zip(model.dec, dec.layers, strict=True):
        a, x = theirs.self_attn, theirs.encoder_attn
        _attention(ours.self_attn, a.q_proj, a.k_proj, a.v_proj, a.out_proj)
        _norm(theirs.self_attn_layer_norm, ours.norm1)
        _attention(ours.cross_attn, x.q_proj, x.k_proj, x.v_proj, x.out_proj)
        _norm(theirs.encoder_attn_layer_norm, ours.norm2)
        _ffn(ours.ffn, theirs.fc1, theirs.fc2)
        _norm(theirs.final_layer_norm, ours.norm3)
    if pre_ln_final:
        _norm(enc.layer_norm, model.enc_norm)
        _norm(dec.layer_norm, model.dec_norm)


@torch.no_grad()
def _tables_and_head(hf, model) -> None:
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


def _sinusoid_tables(base, model) -> None:
    """Marian/Pegasus recompute their half-split table at init; ours is written so the sums match bit for bit."""
    with torch.no_grad():
        for stack, pos in ((base.encoder, model.pos), (base.decoder, model.dec_pos)):
            table = stack.embed_positions.weight
            table.copy_(pos(torch.arange(table.shape[0])).to(table.dtype))


def _marian(model):
    from transformers import MarianConfig, MarianMTModel
    c = model.config
    share = c.share_embeddings
    hf = MarianMTModel(MarianConfig(**_bart_like_config(
        c, c.tie_embeddings, decoder_vocab_size=c.out_vocab_size, share_encoder_decoder_embeddings=share)))
    _sinusoid_tables(hf.model, model)
    _tables_and_head(hf, model)
    _bart_like_layers(model, hf.model.encoder, hf.model.decoder, pre_ln_final=False)
    return hf


def _pegasus(model):
    from transformers import PegasusConfig, PegasusForConditionalGeneration
    c = model.config
    hf = PegasusForConditionalGeneration(PegasusConfig(**_bart_like_config(c, c.tie_embeddings and c.share_embeddings)))
    _sinusoid_tables(hf.model, model)
    _tables_and_head(hf, model)
    _bart_like_layers(model, hf.model.encoder, hf.model.decoder, pre_ln_final=True)
    return hf


def _bart(model):
    from transformers import BartConfig, BartForConditionalGeneration
    c = model.config
    hf = BartForConditionalGeneration(BartConfig(**_bart_like_config(c, c.tie_embeddings and c.share_embeddings)))
    base = hf.model
    with torch.no_grad():
        for stack, prefix in ((base.encoder, ""), (base.decoder, "dec_")):
            stack.embed_positions.weight[2:].copy_(getattr(model, f"{prefix}pos").W_pos)  # BART's offset of 2
            stack.embed_positions.weight[:2].zero_()  # never read
            _norm(stack.layernorm_embedding, getattr(model, f"{prefix}embed_norm"))
    _tables_and_head(hf, model)
    _bart_like_layers(model, base.encoder, base.decoder, pre_ln_final=False)
    return hf


def _t5(model):
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
        attn_implementation="eager", **_ids(c)))
    enc, dec = hf.encoder, hf.decoder
    with torch.no_grad():
        hf.shared.weight.copy_(model.embed.W_E)
        enc.block[0].layer[0].SelfAttention.relative_attention_bias.weight.copy_(model.pos.W_rel)
        dec.block[0].layer[0].SelfAttention.relative_attention_bias.weight.copy_(model.dec_pos.W_rel)

    def ffn(ours, layer):
        d = layer.DenseReluDense
        if hasattr(d, "wi_0"):
            _ffn(ours, d.wi_1, d.wo, d.wi_0)
        else:
            _ffn(ours, d.wi, d.wo)

    for ours, block in zip(model.enc, enc.block, strict=True):
        a = block.layer[0].SelfAttention
        _attention(ours.attn, a.q, a.k, a.v, a.o)
        _norm(block.layer[0].layer_norm, ours.norm1)
        ffn(ours.ffn, block.layer[-1])
        _norm(block.layer[-1].layer_norm, ours.norm2)
    for ours, block in zip(model.dec, dec.block, strict=True):
        a, x = block.layer[0].SelfAttention, block.layer[1].EncDecAttention
        _attention(ours.self_attn, a.q, a.k, a.v, a.o)
        _norm(block.layer[0].layer_norm, ours.norm1)
        _attention(ours.cross_attn, x.q, x.k, x.v, x.o)
        _norm(block.layer[1].layer_norm, ours.norm2)
        ffn(ours.ffn, block.layer[-1])
        _norm(block.layer[-1].layer_norm, ours.norm3)
    _norm(enc.final_layer_norm, model.enc_norm)
    _norm(dec.final_layer_norm, model.dec_norm)
    return hf


WRITERS: dict[str, Callable] = {"bert": _bert, "gpt2": _gpt2, "openai-gpt": _openai_gpt, "llama": _llama,
                                "marian": _marian, "pegasus": _pegasus, "bart": _bart, "t5": _t5}


def generation_defaults(hf, cfg: ModelConfig) -> None:
    """What glassformer's greedy `generate` does, as the HF model's generation config: pad is never
    generated, decoding starts from our start token and stops at eos, no forced or minimum tokens."""
    g = hf.generation_config
    g.do_sample, g.num_beams, g.min_length = False, 1, 0
    g.pad_token_id, g.eos_token_id, g.bos_token_id = cfg.pad_id, cfg.eos_id, cfg.bos_id
    g.forced_eos_token_id = g.forced_bos_token_id = None
    g.no_repeat_ngram_size, g.length_penalty = 0, 1.0
    g.bad_words_ids = [[cfg.pad_id]] if cfg.pad_id is not None and cfg.pad_id != cfg.eos_id else None
    if cfg.arch == "encoder-decoder":
        g.decoder_start_token_id = cfg.start_id
    g.max_new_tokens = 32  # our generate's default


def to_hf(model, tokenizers=None):
    """The `transformers` model (eval mode) of the family that computes `model`'s function.

    `tokenizers` (a glassformer Tokenizer, or a dict with 'src'/'tgt'/'lm'), when given, is checked
    against the vocabulary sizes. The chosen family and the rewrites made are in
    `hf_model.glassformer_export` (an `Export`).
    """
    if not hasattr(model, "config") or not isinstance(model.config, ModelConfig):
        raise InputError(f"to_hf takes a glassformer model, got {type(model).__name__}")
    _check_tokenizers(model.config, tokenizers)
    ex = plan(model)
    hf = WRITERS[ex.family](ex.model.eval())
    if model.config.arch != "encoder":
        generation_defaults(hf, ex.model.config)
    hf.glassformer_export = Export(ex.family, model, ex.notes, ex.real_tgt_vocab)
    return hf.eval()


def _check_tokenizers(cfg: ModelConfig, tokenizers) -> None:
    if tokenizers is None:
        return
    toks = tokenizers if isinstance(tokenizers, dict) else {"lm": tokenizers}
    want = {"src": cfg.vocab_size, "lm": cfg.vocab_size, "tgt": cfg.out_vocab_size}
    for role, tok in toks.items():
        if tok is not None and role in want and tok.vocab_size != want[role]:
            raise InputError(f"the {role} tokenizer has {tok.vocab_size} tokens but the model's vocabulary has "
                             f"{want[role]}; pass the tokenizers the model was trained with")
