"""Attribution patching (Nanda 2023; Syed et al. 2023): activation patching to first order.

    effect(place) ≈ Σ (clean − corrupted)[place] · ∂metric/∂activation[place]   (at the corrupted run)

One forward and one backward pass replace one forward pass per place. The gradient is taken by
adding a zero tensor that requires grad to each hooked activation (so every activation's total
derivative flows, including through later hooked ones). `agreement(exact, approx)` says how well
the approximation ranks what exact patching measured: Pearson r and whether the top place matches.
"""

from __future__ import annotations

import torch
from torch import nn

from ..errors import InputError
from ..trace import hooks, run_with_trace
from .patch import PER, Metric, PatchResult, _check_pair, as_inputs, default_metric, matching_hooks, slices
from .sites import stream_of


def attribution_patch(model: nn.Module, clean, corrupted, hook: str | list[str] | None = None,
                      per: str = "position", metric: Metric | None = None, **kwargs) -> PatchResult:
    """The gradient estimate of `patch(...)`'s effects, same hooks, labels and normalisation."""
    if per not in PER:
        raise InputError(f"per={per!r} is not one of {', '.join(PER)}")
    clean, corrupted = as_inputs(clean), as_inputs(corrupted)
    _check_pair(clean, corrupted)
    names = matching_hooks(model, hook or f"{stream_of(model).stack}.*.out")
    with torch.no_grad():
        clean_out, clean_acts = run_with_trace(model, *clean, names=names, **kwargs)
    leaves: dict[str, torch.Tensor] = {}
    values: dict[str, torch.Tensor] = {}

    def grab(value: torch.Tensor, name: str) -> torch.Tensor:
        leaves[name] = torch.zeros_like(value, requires_grad=True)
        values[name] = value.detach()
        return value + leaves[name]

    with torch.enable_grad(), hooks(model, {n: grab for n in names}):
        corrupted_out = model(*corrupted, **kwargs)
        metric = metric or default_metric(model, clean_out, corrupted_out.detach())
        m_corr_t = metric(corrupted_out).mean()
        grads = torch.autograd.grad(m_corr_t, [leaves[n] for n in names], allow_unused=True)
    m_clean, m_corr = float(metric(clean_out).mean()), float(m_corr_t.detach())
    denom = m_clean - m_corr if abs(m_clean - m_corr) > 1e-12 else 1.0
    rows, labels = [], None
    for name, g in zip(names, grads):
        g = torch.zeros_like(values[name]) if g is None else g
        delta_g = (clean_acts[name] - values[name]) * g
        places = slices(model, name, values[name], per)
        labels = labels or [lab for lab, _ in places]
        rows.append([float(delta_g[idx].sum()) / denom for _, idx in places])
    return PatchResult(names, labels, torch.tensor(rows), m_clean, m_corr, per, method="attribution patching")


def agreement(exact: PatchResult, approx: PatchResult) -> dict:
    """How far attribution patching agrees with activation patching on the same places."""
    if exact.effects.shape != approx.effects.shape:
        raise InputError(f"results differ in shape {tuple(exact.effects.shape)} vs {tuple(approx.effects.shape)}")
    a, b = exact.effects.flatten().double(), approx.effects.flatten().double()
    r = float(torch.corrcoef(torch.stack([a, b]))[0, 1]) if a.numel() > 1 and a.std() > 0 and b.std() > 0 else float("nan")
    return {"pearson": r, "max_abs_diff": float((a - b).abs().max()),
            "same_top": int(a.abs().argmax()) == int(b.abs().argmax())}
