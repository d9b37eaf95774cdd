"""The hook-point atlas: every hook name of a model with its shape, its equation and its seed section.

Built from the code, never typed by hand: a tiny model of each architecture is traced and every
dimension is named by its size (batch=2, seq=3, head=4, tgt_seq=5, d_k=6, d_model=24, d_ff=40,
vocab=50 are all different, so each size names one axis; a real model's axes are named from its config). `glassformer hooks --arch ...` prints it;
`glassformer hooks --markdown docs/hooks.md` writes the page, and a test checks the page is current.
"""

from __future__ import annotations

import re

import torch
from torch import nn

from ..config import ModelConfig
from ..errors import InputError
from ..nn import build_model
from ..nn.norms import BatchNorm, LayerNorm, NoNorm, RMSNorm
from ..nn.positional import ALiBi, LearnedPE, RelativePositionBias, SinusoidalPE
from ..trace import run_with_trace

_SMALL = dict(vocab_size=50, d_model=24, n_heads=4, n_layers=1, d_ff=40, max_len=16)
PRESETS: dict[str, dict] = {  # name -> ModelConfig fields: the families glassformer builds or converts
    "encoder-decoder": dict(arch="encoder-decoder"),  # the 2017 paper: Post-LN, sinusoids
    "encoder": dict(arch="encoder", pe="learned", embed_norm=True, n_segments=2, activation="gelu"),  # BERT, MiniLM
    "decoder": dict(arch="decoder", pe="learned", norm_position="pre", activation="gelu_tanh"),  # GPT-2
    "llama": dict(arch="decoder", pe="rope", norm="rmsnorm", norm_position="pre", activation="swiglu",
                  attn_bias=False, ffn_bias=False),
    "t5": dict(arch="encoder-decoder", pe="relative", norm="rmsnorm", norm_position="pre", scale_scores=False,
               attn_bias=False, ffn_bias=False, rel_buckets=8, rel_max_distance=16),
}

# leaf of a hook name -> (equation, seed 000 section)
EQUATIONS = {
    "x0": ("x0 = E + PE (the input of layer 0)", "§3.4, §7.2"),
    "q": ("Q_h = X·W_Q[h] + b_Q[h]", "§1.3"), "k": ("K_h = X·W_K[h] + b_K[h] (cross: X = memory)", "§1.3"),
    "v": ("V_h = X·W_V[h] + b_V[h] (cross: X = memory)", "§1.3"),
    "q_rot": ("RoPE(Q_h): (x_i, x_{i+d/2}) rotated by pos·θ_i", "§3.5"),
    "k_rot": ("RoPE(K_h): (x_i, x_{i+d/2}) rotated by pos·θ_i", "§3.5"),
    "scores": ("Q_h·K_hᵀ", "§1.4"), "scaled": ("Q_h·K_hᵀ / √d_k + position bias + mask", "§1.5"),
    "pattern": ("softmax over keys of scaled", "§1.6"), "z": ("pattern·V_h (head h, before W_O)", "§1.7"),
    "concat": ("Concat(z_1, …, z_H)", "§2.4"), "resid_mid": ("x + SelfAttention(…)", "§4.3"),
    "resid_cross": ("x + CrossAttention(…, memory)", "§7.5"), "resid_post": ("x + FFN(…)", "§4.3"),
    "pre": ("x·W_1 + b_1", "§6.1"), "gate": ("x·W_G + b_G (gated FFN)", "§6.1"),
    "act": ("φ(pre), gated: φ(gate) ⊙ pre", "§6.1"), "logits": ("x·W_U + b_U", "§7.6"),
    "probs": ("softmax(logits)", "§7.6"), "segment": ("S[segment_ids] (BERT token types)", "§7.2"),
}


# module class -> (equation, seed section) for norms and position encodings, whose hook is the module itself
BY_CLASS = {
    LayerNorm: ("gamma·(x − μ)/√(σ² + eps) + beta", "§5.2"), RMSNorm: ("gamma·x/√(mean(x²) + eps)", "§5.2"),
    BatchNorm: ("gamma·(x − μ_batch)/√(σ²_batch + eps) + beta", "§5.3"), NoNorm: ("x (no norm)", "§5"),
    SinusoidalPE: ("PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(…)", "§3.2"),
    LearnedPE: ("P[pos] (a learned table)", "§3.5"),
    RelativePositionBias: ("b_h[bucket(j − i)] added to the scores", "§3.5"),
    ALiBi: ("−m_h·|i − j| added to the scores", "§3.5"),
}


def equation(model: nn.Module, name: str) -> tuple[str, str]:
    """(equation, seed section) of one hook name of `model`."""
    m = model.get_submodule(name)
    leaf = name.rsplit(".", 1)[-1]
    if type(m) in BY_CLASS:
        return BY_CLASS[type(m)]
    if leaf.endswith("embed"):
        return "E = W_E[ids] (× √d_model when scaled)", "§7.2"
    if leaf.endswith("x0"):
        return EQUATIONS["x0"]
    if leaf == "out":
        parent = name.rsplit(".", 1)[0].rsplit(".", 1)[-1]
        if parent.endswith("attn"):
            return "Concat·W_O + b_O", "§2.4"
        if parent == "ffn":
            return "act·W_2 + b_2", "§6.1"
        return "the layer's output", "§7.3"
    return EQUATIONS.get(leaf, ("", ""))


def _sizes(cfg) -> dict[int, str]:
    """Axis names by size: the presets' distinct sizes, or a real model's own (a size shared by two
    axes, or equal to a traced length, keeps its number)."""
    named = [(1, "1"), (2, "batch"), (3, "seq"), (5, "tgt_seq")]
    for size, sym in ((cfg.n_heads, "head"), (cfg.head_dim, "d_k"), (cfg.d_model, "d_model"), (cfg.d_ff, "d_ff"),
                      (cfg.vocab_size, "vocab"), (cfg.out_vocab_size, "vocab")):
        named.append((size, sym))
    out: dict[int, str] = {}
    for size, sym in named:
        out[size] = sym if out.get(size, sym) == sym else str(size)
    return out


def _symbolic(shape, translator: bool, name: str, sizes: dict[int, str]) -> str:
    sizes = {**sizes, **({3: "src_seq", 5: "tgt_seq"} if translator else {5: "5"})}
    out = [sizes.get(s, str(s)) for s in shape]
    # attention maps: name the query and key axes
    if len(out) == 4 and out[1] == "head" and not name.endswith((".q", ".k", ".v", "_rot", ".z")):
        out[2], out[3] = f"q_pos[{out[2]}]", f"k_pos[{out[3]}]"
    return "(" + ", ".join(out) + ")"


def atlas(arch: str | None = None, model: nn.Module | None = None) -> list[dict]:
    """Rows {name, shape, equation, section} in forward order, for a preset or a given model."""
    if model is None:
        if arch not in PRESETS:
            raise InputError(f"--arch {arch!r} is not one of {', '.join(PRESETS)}")
        torch.manual_seed(0)
        model = build_model(ModelConfig(**_SMALL, **PRESETS[arch])).eval()
    cfg = model.config
    V = cfg.vocab_size
    if cfg.arch == "encoder-decoder":
        args = (torch.randint(0, V, (2, 3)), torch.randint(0, cfg.out_vocab_size, (2, 5)))
    else:
        args = (torch.randint(0, V, (2, 3)),)
    with torch.no_grad():
        _, tr = run_with_trace(model, *args)
    translator, sizes = cfg.arch == "encoder-decoder", _sizes(cfg)
    rows = []
    for name, t in tr.items():
        eq, sec = equation(model, name)
        rows.append({"name": name, "shape": _symbolic(tuple(t.shape), translator, name, sizes), "equation": eq, "section": sec})
    return rows


def markdown(command: str) -> str:
    """docs/hooks.md: the atlas of every preset."""
    lines = ["# Hook points", "",
             f"Generated by `{command}` from the code (`glassformer.interp.atlas`); do not edit by hand.",
             "", "Every value below can be read with `run_with_trace(model, ...)` and replaced with",
             "`hooks(model, {name: fn})` (`glassformer.trace`). Names come from the module tree; `*` in a",
             "pattern is one name component (`dec.*.self_attn.z`). Shapes use one vocabulary: batch, seq,",
             "head, d_k, d_model, d_ff, vocab; attention maps",
             "are (batch, head, q_pos, k_pos); a translator's source is src_seq long, its target tgt_seq.",
             "Sections are those of seed 000 (the chapter the hook's equation comes from).", ""]
    for arch, fields in PRESETS.items():
        shown = ", ".join(f"{k}={v}" for k, v in fields.items())
        lines += [f"## {arch}", "", f"`glassformer hooks --arch {arch}` ({shown}); one layer shown, "
                  "every layer repeats it with its own index.", "",
                  "| hook | shape | computes | seed |", "|---|---|---|---|"]
        for r in atlas(arch):
            lines.append(f"| `{r['name']}` | {r['shape']} | {r['equation']} | {r['section']} |")
        lines.append("")
    return "\n".join(lines)
