"""Interventions in the explorer: switch off heads or FFNs, the logit lens, one query-key pair's q·k.

Everything here patches values through `glassformer.trace.hooks` (the hook points of seed 000's
math), so the model's own code runs unchanged. Kept small and in the server layer on purpose: the
interpretability library (`glassformer.interp`, issue 13) can take these over later.

- Switching off head h of a block zeroes its output z[:, h] before concat and W_O (seed §2.3):
  the other heads and the residual stream still flow.
- Switching off an FFN zeroes its output before the residual add (seed §6).
- The logit lens reads the residual stream after each decoder layer through the model's final
  norm and output head, as if the stack stopped there (nostalgebraist 2020).
"""

from __future__ import annotations

import torch

from ..errors import InputError
from ..trace import Trace, _matches, hook_points, hooks, run_with_trace
from .subjects import Prepared

TOP = 5  # tokens shown per position by the logit lens


def ablation_hooks(p: Prepared, heads: list[tuple[str, int]], ffns: list[str]) -> dict:
    """Hook functions that switch off `heads` ([block, h]) and `ffns` (blocks); checked by name."""
    points = hook_points(p.model)
    n_heads = p.model.config.n_heads
    by_block: dict[str, set[int]] = {}
    for block, h in heads:
        if f"{block}.z" not in points:
            blocks = sorted({n[:-2] for n in points if n.endswith(".z")})
            raise InputError(f"{block!r} is not an attention block of this model; use one of {', '.join(blocks)}")
        if not 0 <= h < n_heads:
            raise InputError(f"head {h} of {block} does not exist; heads are 0..{n_heads - 1}")
        by_block.setdefault(block, set()).add(h)
    fns = {}
    for block, hs in by_block.items():
        def zero_heads(z, _name, hs=sorted(hs)):  # z: (batch, head, q_pos, d_head)
            z = z.clone()
            z[:, hs] = 0.0
            return z
        fns[f"{block}.z"] = zero_heads
    for block in ffns:
        if not block.endswith(".ffn") or f"{block}.out" not in points:
            blocks = sorted({n[:-4] for n in points if n.endswith(".ffn.out")})
            raise InputError(f"{block!r} is not a feed-forward block of this model; use one of {', '.join(blocks)}")
        fns[f"{block}.out"] = lambda v, _name: torch.zeros_like(v)
    return fns


def run_patched(p: Prepared, fns: dict, names: list[str], tgt: torch.Tensor | None = None):
    """(output, Trace of `names`) with `fns` patching values: one forward pass."""
    trace = Trace()

    def record(value, name):
        if _matches(name, names):
            trace[name] = value.detach().clone()

    # `record` is registered after the patches, so it sees the patched values
    with torch.no_grad(), p.precision(), hooks(p.model, {**fns, "*": record}):
        if p.kind == "encoder-decoder":
            start = p.model.config.start_id or 0
            out = p.model(p.source(), tgt if tgt is not None else torch.tensor([[start]]))
        else:
            out = p.model(p.source())
    return out, trace


def logit_lens(p: Prepared, trace: Trace, tokenizer) -> list[dict] | None:
    """Top tokens after every decoder layer, read through the final norm and the output head."""
    model = p.model
    if not hasattr(model, "head"):
        return None  # an encoder has no output head to read the residual stream through
    norm = getattr(model, "dec_norm", None)
    out = []
    with torch.no_grad(), p.precision():
        for name in [k for k in trace if k.startswith("dec.") and k.endswith(".out") and k.count(".") == 2]:
            x = trace[name]
            logits = model.head(norm(x, None) if norm is not None else x)
            probs = torch.softmax(logits.float(), dim=-1)[0]  # (pos, vocab)
            top_p, top_i = probs.topk(min(TOP, probs.shape[-1]), dim=-1)
            out.append({"layer": name, "top": [[{"token": tokenizer.id_to_token(int(i)), "p": round(float(v), 5)}
                                                for v, i in zip(ps, idx)] for ps, idx in zip(top_p, top_i)]})
    return out


def qk_contributions(p: Prepared, layer: int, query: int, key: int) -> dict:
    """Per-dimension terms q_i·k_i·scale of one query-key pair, per head (bertviz's neuron view).

    Their sum is the scaled score; `bias` is what the model adds besides (positional bias, masks),
    so sum + bias = the score that the softmax sees."""
    block = p.attention_block(layer)
    n = len(p.ids)
    for what, i in (("query", query), ("key", key)):
        if not 0 <= i < n:
            raise InputError(f"{what} position {i} does not exist; the sentence has positions 0..{n - 1}")
    module = p.model.get_submodule(block)
    with torch.no_grad(), p.precision():
        _, tr = run_with_trace(p.model, *_inputs(p), names=[f"{block}.{s}" for s in ("q", "k", "scaled", "pattern")])
    q, k = tr[f"{block}.q"][0, :, query], tr[f"{block}.k"][0, :, key]  # (head, d_head)
    terms = (q * k * module.scale).double()
    scaled = tr[f"{block}.scaled"][0, :, query, key].double()
    return {"block": block, "query": query, "key": key, "tokens": p.tokens,
            "q": q.double().tolist(), "k": k.double().tolist(),
            "terms": terms.tolist(), "score": scaled.tolist(), "bias": (scaled - terms.sum(-1)).tolist(),
            "pattern": tr[f"{block}.pattern"][0, :, query, key].double().tolist()}


def _inputs(p: Prepared) -> tuple:
    if p.kind == "encoder-decoder":
        return p.source(), torch.tensor([[p.model.config.start_id or 0]])
    return (p.source(),)
