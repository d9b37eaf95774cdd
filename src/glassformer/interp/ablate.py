"""Ablation: replace a component's output and see what the model does without it.

    ablate(model, *inputs, heads=[(layer, head)], ffns=[layer], layers=[layer], positions=[…],
           how="zero" | "mean" | "resample", reference=(…inputs…)) → the ablated model's output

- a head is ablated at `z` (its pattern·V, before W_O): zeroing z_h is zeroing head h's rows of
  W_O (§2.4), which is how the tests check it against Hugging Face;
- an FFN at `ffn.out`; a layer at every sublayer output it adds (attention(s) and FFN);
- `how="mean"` puts the mean activation over `reference` (batch and positions) in its place,
  `how="resample"` the activation of another reference row (TransformerLens' and Chan et al.'s
  resampling ablation), so the stream keeps a typical size.
`deletions(model, *inputs)` runs the deletion experiments of seed 003 §4 and §6 on a trained model
in one call: no residual `x +`, no norms, no FFNs, no attention, no positional encoding.
"""

from __future__ import annotations

import re
from typing import Iterable

import torch
from torch import nn

from ..errors import InputError
from ..trace import hooks, run_with_trace
from .sites import Stream, stream_of

HOWS = ("zero", "mean", "resample")


def _targets(st: Stream, heads, ffns, layers, attn: str | None) -> dict[str, list[int] | None]:
    """hook name -> heads to ablate there (None: the whole activation)."""
    out: dict[str, list[int] | None] = {}
    for item in heads:
        if not (isinstance(item, (tuple, list)) and len(item) == 2):
            raise InputError(f"heads entry {item!r} must be a (layer, head) pair")
        l, h = item
        site = st.check_head(l, h, attn)
        out.setdefault(f"{st.layer_name(l)}.{site.kind}.z", []).append(h)
    for l in ffns:
        st.check_layer(l)
        out[f"{st.layer_name(l)}.ffn.out"] = None
    for l in layers:
        st.check_layer(l)
        for sub in st.sublayers(l):
            out[f"{st.layer_name(l)}.{sub.kind}.out"] = None
    if not out:
        raise InputError("nothing to ablate; give heads=[(layer, head)], ffns=[layer] or layers=[layer]")
    return out


def _positions(positions: Iterable[int] | None, seq: int) -> slice | list[int]:
    if positions is None:
        return slice(None)
    pos = list(positions)
    bad = [p for p in pos if not (isinstance(p, int) and -seq <= p < seq)]
    if bad or not pos:
        raise InputError(f"positions {bad or pos} are outside the sequence; positions are 0..{seq - 1}")
    return pos


@torch.no_grad()
def ablate(model: nn.Module, *inputs, heads=(), ffns=(), layers=(), positions: Iterable[int] | None = None,
           how: str = "zero", reference: tuple | None = None, attn: str | None = None,
           stack: str | None = None, seed: int = 0, **kwargs) -> torch.Tensor:
    """The output of `model(*inputs)` with the given heads / FFNs / layers ablated at `positions`."""
    fns = ablation_hooks(model, *inputs, heads=heads, ffns=ffns, layers=layers, positions=positions, how=how,
                         reference=reference, attn=attn, stack=stack, seed=seed, **kwargs)
    with hooks(model, fns):
        return model(*inputs, **kwargs)


@torch.no_grad()
def ablation_hooks(model: nn.Module, *inputs, heads=(), ffns=(), layers=(), positions: Iterable[int] | None = None,
                   how: str = "zero", reference: tuple | None = None, attn: str | None = None,
                   stack: str | None = None, seed: int = 0, **kwargs) -> dict:
    """The hook functions `ablate` runs with, {hook name: fn}, for callers that run the model
    themselves: several forward passes (step-by-step generation) or a trace of the ablated run.
    `inputs` are only read as the default `reference` of a mean or resample ablation."""
    if how not in HOWS:
        raise InputError(f"how={how!r} is not one of {', '.join(HOWS)}")
    st = stream_of(model, stack)
    targets = _targets(st, heads, ffns, layers, attn)
    replacement = _replacements(model, targets, how, reference if reference is not None else inputs, seed, kwargs)

    def make(name: str, which: list[int] | None):
        def fn(value: torch.Tensor, _name: str) -> torch.Tensor:
            value = value.clone()
            seq_dim = 2 if which is not None else 1  # z is (batch, head, q, d_k); outputs (batch, seq, d)
            pos = _positions(positions, value.shape[seq_dim])
            new = replacement(name, value)
            for h in (which if which is not None else [None]):
                idx = (slice(None), h, pos) if h is not None else (slice(None), pos)
                src = new if new.dim() == 0 else new[idx] if new.shape == value.shape else new[idx[1:]]
                value[idx] = src
            return value
        return fn

    return {name: make(name, which) for name, which in targets.items()}


def _replacements(model, targets, how, reference, seed, kwargs):
    """name, value -> what replaces it: 0, the reference mean, or resampled reference rows."""
    if how == "zero":
        return lambda name, value: value.new_zeros(())
    _, ref = run_with_trace(model, *reference, names=list(targets), **kwargs)
    if how == "mean":
        # mean over batch and positions: z keeps its head axis, outputs their feature axis
        means = {n: (t.mean(dim=(0, 2)) if t.dim() == 4 else t.mean(dim=(0, 1))) for n, t in ref.items()}
        return lambda name, value: (means[name][None, :, None, :].expand_as(value) if value.dim() == 4
                                    else means[name].expand_as(value))
    g = torch.Generator().manual_seed(seed)

    def resample(name: str, value: torch.Tensor) -> torch.Tensor:
        r = ref[name]
        if r.shape[1:] != value.shape[1:]:
            raise InputError(f"resample ablation needs reference inputs of the same length; {name} is "
                             f"{tuple(r.shape[1:])} in the reference but {tuple(value.shape[1:])} here")
        rows = torch.randint(0, r.shape[0], (value.shape[0],), generator=g)
        return r[rows]
    return resample


DELETIONS = ("residual", "norm", "ffn", "attention", "position")


@torch.no_grad()
def delete(model: nn.Module, *inputs, what: str, stack: str | None = None, **kwargs) -> torch.Tensor:
    """The output with one kind of component removed from every layer (seed 003 §6's deletion experiment).

    residual: each `x + F(x)` becomes `F(x)`; norm: each norm passes its input through; ffn and
    attention: their outputs are zero; position: the absolute positional encoding is zero.
    """
    if what not in DELETIONS:
        raise InputError(f"what={what!r} is not one of {', '.join(DELETIONS)}")
    stream_of(model, stack)  # a glassformer model
    if what == "position":
        pos = getattr(model, "pos", None)
        if pos is None or not pos.absolute or model.config.pe_combine != "add":
            raise InputError(f"this model's positions (pe={model.config.pe!r}) are not added to the embedding; "
                             "position deletion needs added sinusoidal or learned encodings")
    state: dict[str, torch.Tensor] = {}  # "stream": the residual stream so far; "sub": the last sublayer output

    def fn(value: torch.Tensor, name: str) -> torch.Tensor | None:
        kind, new = _role(model, name), value
        if kind == "pos" and what == "position":
            new = torch.zeros_like(value)
        if kind in ("attn_out", "ffn_out"):
            if (what == "ffn") == (kind == "ffn_out") and what in ("ffn", "attention"):
                new = torch.zeros_like(value)
            state["sub"] = new
        if kind == "resid" and what == "residual":
            new = state["sub"]  # x + F(x) -> F(x)
        if kind == "norm" and what == "norm":
            new = state["stream"]  # the norm's input: Pre-LN's x, Post-LN's x + F(x)
        if kind in ("embed", "resid", "stream"):
            state["stream"] = new
        elif kind in ("pos", "segment"):
            state["stream"] = state["stream"] + new
        return None if new is value else new

    with hooks(model, {"*": fn}):
        return model(*inputs, **kwargs)


_SUBLAYER_OUT = re.compile(r"(enc|dec)\.\d+\.(attn|self_attn|cross_attn|ffn)\.out")
_LAYER_OUT = re.compile(r"(enc|dec)\.\d+\.out")


def _role(model: nn.Module, name: str) -> str | None:
    """What a hook point holds, for the deletion walk: embed, pos, segment, norm, resid, stream, *_out."""
    leaf = name.rsplit(".", 1)[-1]
    if name in ("embed", "dec_embed"):
        return "embed"
    if name in ("pos", "dec_pos"):
        return "pos" if getattr(model, name).absolute else None
    if name == "segment":
        return "segment"
    if name.endswith("_norm") or re.fullmatch(r"norm\d", leaf):
        return "norm"
    if leaf.startswith("resid_"):
        return "resid"
    if leaf == "x0" or leaf == "dec_x0" or _LAYER_OUT.fullmatch(name):
        return "stream"
    m = _SUBLAYER_OUT.fullmatch(name)
    if m:
        return "ffn_out" if m.group(2) == "ffn" else "attn_out"
    return None


def deletions(model: nn.Module, *inputs, **kwargs) -> list[dict]:
    """Every deletion of seed 003 on `model(*inputs)`: how far the output moves from the intact one.

    Rows: {what, cosine (mean over positions of the output vectors), top1_agreement (models with a
    vocabulary), max_abs_change}. Deletions a model cannot have (no absolute positions) are skipped.
    """
    with torch.no_grad():
        base = model(*inputs, **kwargs)
    rows = []
    for what in DELETIONS:
        try:
            out = delete(model, *inputs, what=what, **kwargs)
        except InputError:
            continue
        row = {"what": what,
               "cosine": float(torch.nn.functional.cosine_similarity(out, base, dim=-1).mean()),
               "max_abs_change": float((out - base).abs().max())}
        if model.config.arch != "encoder":
            row["top1_agreement"] = float((out.argmax(-1) == base.argmax(-1)).float().mean())
        rows.append(row)
    return rows
