"""Where the parameters live: a count per component (seed 003 §5 claims the FFN holds most)."""

from __future__ import annotations

from torch import nn


def _component(name: str) -> str:
    parts = name.split(".")
    leaf_owner = parts[-2] if len(parts) > 1 else ""
    if parts[0] in ("embed", "dec_embed", "segment"):
        return "embeddings"
    if parts[0] in ("pos", "dec_pos"):
        return "positional"
    if parts[0] == "head":
        return "head"
    if "ffn" in parts:
        return "ffn"
    if any(p in ("attn", "self_attn", "cross_attn") for p in parts):
        return "attention"
    if leaf_owner.startswith("norm") or "norm" in parts[0] or leaf_owner.endswith("norm"):
        return "norms"
    return "other"


def params_breakdown(model: nn.Module) -> dict[str, dict[str, float]]:
    """{component: {"params": n, "share": fraction}} for embeddings, positional, attention, ffn, norms, head.

    Shared tensors (tied embeddings) are counted once, under the first name that holds them.
    """
    counts: dict[str, int] = {k: 0 for k in ("embeddings", "positional", "attention", "ffn", "norms", "head", "other")}
    seen: set[int] = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            continue
        seen.add(id(p))
        counts[_component(name)] += p.numel()
    total = sum(counts.values())
    out = {k: {"params": v, "share": v / total if total else 0.0} for k, v in counts.items() if v or k != "other"}
    out["total"] = {"params": total, "share": 1.0}
    return out
