"""Activation patching: run the corrupted input with one clean activation put back (Meng et al. 2022).

    patch(model, clean, corrupted, hook="dec.*.resid_post", per="position") → PatchResult

For every hook point matching `hook` and every position (or head, or the whole activation), the
corrupted run gets the clean value there and the metric is read: effect = (m − m_corrupted) /
(m_clean − m_corrupted), 1 when that one place restores the clean answer, 0 when it does nothing.

- per="head" on a per-head hook (`q`, `k`, `v`, `z`, `pattern`): one head at a time. Under
  grouped-query attention `k` and `v` belong to a K/V head shared by several query heads, so one
  patch covers the whole group (`sites.kv_groups`), as patching LLaMA's k_proj slice would.
- cross-attention (`dec.*.cross_attn.*`) works the same: its `k`/`v` run over source positions.
- patching the whole clean activation of a layer's output restores the clean logits exactly (a test).
The default metric is the logit difference, at the last position, between the clean answer and
the corrupted answer (models with a vocabulary) or the cosine to the clean output (encoders).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch
from torch import nn

from ..errors import InputError
from ..trace import hook_points, hooks, run_with_trace, _matches
from .sites import kv_groups, stream_of

PER = ("position", "head", "all")
PER_HEAD = ("q", "k", "v", "q_rot", "k_rot", "scores", "scaled", "pattern", "z")
Metric = Callable[[torch.Tensor], torch.Tensor]  # model output -> one number per batch row


@dataclass
class PatchResult:
    """effects (hook, position|head|0) with the labels of both axes and the two reference metrics."""

    hooks: list[str]
    labels: list[str]
    effects: torch.Tensor
    clean_metric: float
    corrupted_metric: float
    per: str
    method: str = "activation patching"
    extra: dict = field(default_factory=dict)

    def top(self, k: int = 5) -> list[tuple[str, str, float]]:
        """The k largest effects as (hook, label, effect)."""
        flat = self.effects.flatten()
        idx = flat.abs().argsort(descending=True)[:k]
        n = self.effects.shape[1]
        return [(self.hooks[int(i) // n], self.labels[int(i) % n], float(flat[i])) for i in idx]

    def to_dict(self) -> dict:
        return {"method": self.method, "per": self.per, "hooks": self.hooks, "labels": self.labels,
                "effects": self.effects.tolist(), "clean_metric": self.clean_metric,
                "corrupted_metric": self.corrupted_metric, **self.extra}


def as_inputs(x) -> tuple:
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


def default_metric(model: nn.Module, clean_out: torch.Tensor, corrupted_out: torch.Tensor) -> Metric:
    """Logit(clean answer) − logit(corrupted answer) at the last position; cosine for encoders."""
    if model.config.arch == "encoder":
        ref = clean_out.detach()
        return lambda out: torch.nn.functional.cosine_similarity(out, ref, dim=-1).mean(-1)
    good = clean_out[:, -1].argmax(-1)
    bad = corrupted_out[:, -1].argmax(-1)
    rows = torch.arange(clean_out.shape[0])

    def logit_diff(out: torch.Tensor) -> torch.Tensor:
        last = out[:, -1]
        return last[rows, good] - last[rows, bad]
    return logit_diff


def matching_hooks(model: nn.Module, hook: str | list[str]) -> list[str]:
    patterns = [hook] if isinstance(hook, str) else list(hook)
    names = [n for n in hook_points(model) if _matches(n, patterns)]
    if not names:
        some = ", ".join(list(hook_points(model))[:4])
        raise InputError(f"no hook point matches {', '.join(patterns)}; names look like {some}, ... "
                         "(`glassformer hooks` lists them all)")
    return names


def slices(model: nn.Module, name: str, value: torch.Tensor, per: str) -> list[tuple[str, tuple]]:
    """(label, index) of each place to patch in one activation of hook `name`."""
    if per == "all":
        return [("all", (...,))]
    leaf = name.rsplit(".", 1)[-1]
    if per == "head":
        if leaf not in PER_HEAD or value.dim() != 4:
            raise InputError(f"per='head' needs a per-head hook ({', '.join(PER_HEAD)}); {name} is not one")
        attn = model.get_submodule(name.rsplit(".", 1)[0])
        groups = kv_groups(attn) if leaf in ("k", "v", "k_rot") else [[h] for h in range(value.shape[1])]
        return [(f"head{'+'.join(map(str, g))}", (slice(None), g)) for g in groups]
    if value.dim() == 4:  # (batch, head, seq, …): positions are the third axis
        return [(f"pos{p}", (slice(None), slice(None), p)) for p in range(value.shape[2])]
    if value.dim() == 3:
        return [(f"pos{p}", (slice(None), p)) for p in range(value.shape[1])]
    raise InputError(f"{name} has shape {tuple(value.shape)}; patch it with per='all'")


@torch.no_grad()
def run_patched(model: nn.Module, corrupted: tuple, values: dict[str, tuple[tuple, torch.Tensor]], **kwargs):
    """The corrupted run with `values[name] = (index, clean activation)` written in at each hook."""
    def put(index, clean):
        def fn(value: torch.Tensor, _name: str) -> torch.Tensor:
            if value.shape != clean.shape:
                raise InputError(f"clean and corrupted activations differ in shape at {_name}: "
                                 f"{tuple(clean.shape)} vs {tuple(value.shape)}; give inputs of equal length")
            value = value.clone()
            value[index] = clean[index]
            return value
        return fn
    with hooks(model, {n: put(i, c) for n, (i, c) in values.items()}):
        return model(*corrupted, **kwargs)


def _check_pair(clean: tuple, corrupted: tuple) -> None:
    if len(clean) != len(corrupted) or any(a.shape != b.shape for a, b in zip(clean, corrupted)):
        raise InputError("clean and corrupted inputs must have the same shapes (same number of tokens); "
                         f"got {[tuple(a.shape) for a in clean]} and {[tuple(b.shape) for b in corrupted]}")


@torch.no_grad()
def patch(model: nn.Module, clean, corrupted, hook: str | list[str] | None = None, per: str = "position",
          metric: Metric | None = None, **kwargs) -> PatchResult:
    """Patching effects of every matching hook × position (or head, or whole activation).

    hook: glob(s) over hook names; default every layer output of the stream (`dec.*.out`, `enc.*.out`)."""
    if per not in PER:
        raise InputError(f"per={per!r} is not one of {', '.join(PER)}")
    if model.training:
        raise InputError("patch needs model.eval(): dropout would make every run different")
    clean, corrupted = as_inputs(clean), as_inputs(corrupted)
    _check_pair(clean, corrupted)
    names = matching_hooks(model, hook or f"{stream_of(model).stack}.*.out")
    clean_out, acts = run_with_trace(model, *clean, names=names, **kwargs)
    corrupted_out, _ = run_with_trace(model, *corrupted, names=["logits"], **kwargs)  # same (math) path as the patched runs
    metric = metric or default_metric(model, clean_out, corrupted_out)
    m_clean, m_corr = float(metric(clean_out).mean()), float(metric(corrupted_out).mean())
    denom = m_clean - m_corr if abs(m_clean - m_corr) > 1e-12 else 1.0
    rows, labels = [], None
    for name in names:
        places = slices(model, name, acts[name], per)
        labels = labels or [lab for lab, _ in places]
        if len(places) != len(labels):
            raise InputError(f"hooks matching {hook!r} differ in size ({name}); patch them one at a time")
        rows.append([(float(metric(run_patched(model, corrupted, {name: (idx, acts[name])}, **kwargs)).mean())
                      - m_corr) / denom for _, idx in places])
    return PatchResult(names, labels, torch.tensor(rows), m_clean, m_corr, per)
