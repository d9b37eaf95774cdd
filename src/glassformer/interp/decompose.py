"""Residual-stream decomposition and direct logit attribution (seed 000 ch. 4, §7.6).

Every sublayer *adds* to the residual stream, so the final stream is a sum of parts:

    resid = embed + pos (+ segment) + Σ_layers [ Σ_heads z_h·W_O[h] + b_O + (FFN(x) − b_2) + b_2 ]

`decompose(model, *inputs)` returns those parts, one tensor (batch, seq, d_model) each, named
like the hooks they come from: `embed`, `pos`, `dec.3.self_attn.head2`, `dec.3.self_attn.b_O`,
`dec.3.ffn`, `dec.3.ffn.b_2`, `dec.3.norm1.beta`, ...

- Pre-LN and norm-free models: the sum is exact (only float rounding; computed in float64).
- Post-LN (the 2017 paper): every Add & Norm divides the whole stream by its σ, so a part's share
  depends on all the others and no exact split exists. The linearised split freezes each σ at
  this input (centring and gamma stay linear); `.error` says how far the sum lands from the stream.
`.logit_attribution(token)` sends each part through the final norm (σ frozen, as TransformerLens
freezes `ln_final`) and the unembedding W_U, and reports the error against the real logit.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field

import torch
from torch import nn

from ..errors import InputError
from ..trace import run_with_trace
from .sites import Stream, frozen_norm, head_rows, stream_of

POST_LN_NOTE = ("Post-LN divides the whole stream by its σ after every sublayer, so no part has a share "
                "independent of the others; shares below freeze each σ at this input (linearised)")


@dataclass
class Decomposition:
    """The parts of the final residual stream; `sum(components) ≈ residual` within `.error`."""

    components: "OrderedDict[str, torch.Tensor]"  # name -> (batch, seq, d_model), float64
    residual: torch.Tensor  # (batch, seq, d_model): the stream entering the final norm / head
    exact: bool  # False for Post-LN (linearised)
    note: str
    stream: Stream = field(repr=False)
    output: torch.Tensor = field(repr=False)

    def total(self) -> torch.Tensor:
        return torch.stack(list(self.components.values())).sum(0)

    @property
    def error(self) -> float:
        """max |Σ components − residual| over every batch row, position and feature."""
        return float((self.total() - self.residual.double()).abs().max())

    def grouped(self, by: str = "layer") -> "OrderedDict[str, torch.Tensor]":
        """Parts summed per layer (`by="layer"`) or per sublayer (`by="sublayer"`)."""
        if by not in ("layer", "sublayer"):
            raise InputError(f"by={by!r} is not one of layer, sublayer")
        depth = 2 if by == "layer" else 3
        out: OrderedDict[str, torch.Tensor] = OrderedDict()
        for name, t in self.components.items():
            parts = name.split(".")
            key = ".".join(parts[:depth]) if parts[0] == self.stream.stack and len(parts) > 2 else name
            out[key] = out[key] + t if key in out else t
        return out

    @torch.no_grad()
    def logit_attribution(self, token: int, minus: int | None = None) -> "LogitAttribution":
        """Each part's direct effect on logit[token] (− logit[minus]) through the frozen final norm and W_U."""
        st = self.stream
        if st.head is None:
            raise InputError(f"the {st.stack} stream of a {st.config.arch} model has no output head; "
                             "direct logit attribution needs one (use a decoder or a translator)")
        V = self.output.shape[-1]
        for t in (token, minus):
            if t is not None and not (isinstance(t, int) and 0 <= t < V):
                raise InputError(f"token {t!r} is outside the vocabulary [0, {V})")
        head = st.head
        W_U = (head._tied[0].W_E.t() if head._tied else head.W_U).double()
        direction = W_U[:, token] - (W_U[:, minus] if minus is not None else 0)
        if head.rescale is not None:
            direction = direction * head.rescale
        if st.final_norm is not None:
            f, const = frozen_norm(st.final_norm, self.residual)
        else:
            f, const = (lambda y: y), None
        parts = OrderedDict((k, f(v) @ direction) for k, v in self.components.items())
        if const is not None:
            parts["final_norm.beta"] = (const @ direction).expand_as(next(iter(parts.values())))
        if head.b_U is not None:
            b = head.b_U.double()
            parts["head.b_U"] = (b[token] - (b[minus] if minus is not None else 0)).expand_as(next(iter(parts.values())))
        actual = self.output[..., token].double() - (self.output[..., minus].double() if minus is not None else 0)
        return LogitAttribution(parts, actual)


@dataclass
class LogitAttribution:
    """Direct logit attribution: part name -> (batch, seq); Σ parts ≈ the model's logit (difference)."""

    parts: "OrderedDict[str, torch.Tensor]"
    actual: torch.Tensor  # (batch, seq): the real logit or logit difference

    @property
    def error(self) -> float:
        return float((torch.stack(list(self.parts.values())).sum(0) - self.actual).abs().max())

    def ranked(self, batch: int = 0, pos: int = -1) -> list[tuple[str, float]]:
        """Parts ordered by |effect| at one position, largest first."""
        return sorted(((k, float(v[batch, pos])) for k, v in self.parts.items()), key=lambda kv: -abs(kv[1]))


@torch.no_grad()
def decompose(model: nn.Module, *inputs, stack: str | None = None, **kwargs) -> Decomposition:
    """Split the final residual stream of `model(*inputs, **kwargs)` into its additive parts."""
    st = stream_of(model, stack)
    if model.training:
        raise InputError("decompose needs model.eval(): dropout would make the parts random")
    output, tr = run_with_trace(model, *inputs, **kwargs)
    comps = _input_side(st, tr)
    for l in range(len(st.layers)):
        for sub in st.sublayers(l):
            new = _sublayer_parts(st, sub, tr)
            if st.config.residual:
                comps.update(new)
            else:  # seed 003's deletion: no `x +`, the stream is the sublayer's output alone
                comps = new
            if not st.pre_ln:
                comps = _through_norm(sub.norm, tr[sub.resid_hook], comps, sub.norm_hook)
    residual = tr[f"{st.stack}.{len(st.layers) - 1}.out"]
    exact = st.pre_ln or st.config.norm == "none"
    note = "exact: Pre-LN and norm-free streams are plain sums" if exact else POST_LN_NOTE
    return Decomposition(comps, residual, exact, note, st, output)


def _input_side(st: Stream, tr) -> "OrderedDict[str, torch.Tensor]":
    """embed, absolute position and segment parts of x0 (embedding norm linearised when present)."""
    cfg, p = st.config, st.prefix
    e = tr[f"{p}embed"].double()
    batch, seq, width = e.shape
    comps: OrderedDict[str, torch.Tensor] = OrderedDict()
    comps[f"{p}embed"] = _widen(e, cfg.d_model, 0)
    pos = getattr(st.model, f"{p}pos", None)
    if pos is not None and pos.absolute:
        pe = tr[f"{p}pos"].double().expand(batch, seq, -1)
        comps[f"{p}pos"] = pe if cfg.pe_combine == "add" else _widen(pe, cfg.d_model, width)
    if "segment" in tr and not p:
        comps["segment"] = tr["segment"].double()
    norm = getattr(st.model, f"{p}embed_norm", None)
    if norm is not None:
        comps = _through_norm(norm, sum(comps.values()), comps, f"{p}embed_norm")
    return comps


def _widen(t: torch.Tensor, d_model: int, offset: int) -> torch.Tensor:
    """Place a (…, width) part at features [offset, offset + width) of d_model (concatenated PE)."""
    if t.shape[-1] == d_model:
        return t
    out = t.new_zeros(*t.shape[:-1], d_model)
    out[..., offset:offset + t.shape[-1]] = t
    return out


def _sublayer_parts(st: Stream, sub, tr) -> "OrderedDict[str, torch.Tensor]":
    """What one sublayer adds: each head through its rows of W_O and b_O, or the FFN and b_2."""
    name = f"{st.layer_name(sub.layer)}.{sub.kind}"
    m = sub.module
    parts: OrderedDict[str, torch.Tensor] = OrderedDict()
    if sub.is_attention:
        z = tr[f"{name}.z"].double()  # (batch, head, q, d_k)
        per_head = torch.einsum("bhqk,hkd->bhqd", z, head_rows(m).double())
        for h in range(m.n_heads):
            parts[f"{name}.head{h}"] = per_head[:, h]
        if m.b_O is not None:
            parts[f"{name}.b_O"] = m.b_O.double().expand_as(per_head[:, 0])
    else:
        out = tr[f"{name}.out"].double()
        if m.b_2 is not None:
            parts[name] = out - m.b_2.double()
            parts[f"{name}.b_2"] = m.b_2.double().expand_as(out)
        else:
            parts[name] = out
    return parts


def _through_norm(norm: nn.Module, x: torch.Tensor, comps, name: str):
    """Every part through a norm whose σ is frozen at its real input x; beta becomes a part."""
    f, const = frozen_norm(norm, x)
    out = OrderedDict((k, f(v)) for k, v in comps.items())
    if const is not None:
        out[f"{name}.beta"] = const.expand_as(x).double() if const.dim() == 1 else const
    return out
