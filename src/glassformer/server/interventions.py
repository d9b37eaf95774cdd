"""Interventions in the explorer: switch off heads or FFNs, the logit lens, one query-key pair's q·k.

The replacements and the lens are the interpretability library's (`glassformer.interp`, issue 13);
this module maps the page's names ("enc.0.attn", head 1; "dec.1.ffn") onto them and records the
patterns of the patched run through `glassformer.trace.hooks`, so the model's own code runs unchanged.

- A head switched off is ablated at its z (pattern·V) before concat and W_O (seed §2.3): zeroed,
  or replaced by its mean over this sentence's positions (`how="mean"`, which keeps the stream's
  typical size). The other heads and the residual stream still flow.
- An FFN switched off has its output zeroed (or set to its mean) before the residual add (seed §6).
- The logit lens reads the residual stream after every layer through the final norm and the output
  head, as if the stack stopped there (nostalgebraist 2020); an encoder has no head, so the library
  reads it through the token embedding instead and says so (`unembedding`).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch

from .. import interp
from ..errors import InputError
from ..trace import Trace, _matches, hook_points, hooks, run_with_trace
from .subjects import Prepared

TOP = 5  # tokens shown per position by the logit lens


def reference_inputs(p: Prepared) -> tuple:
    """The inputs a mean ablation averages over: the sentence, and for a translator its greedy translation."""
    if p.kind != "encoder-decoder":
        return (p.source(),)
    from ..generate import generate
    with torch.no_grad(), p.precision():
        ys = generate(p.model, p.source(), max_new_tokens=48, strategy="greedy")
    return p.source(), ys[:, :-1] if ys.shape[1] > 1 else ys


def ablation_hooks(p: Prepared, heads: list[tuple[str, int]], ffns: list[str], how: str = "zero",
                   reference: tuple | None = None) -> dict:
    """`interp.ablation_hooks` for `heads` ([block, h]) and `ffns` (blocks), named as the page names them."""
    points = hook_points(p.model)
    n_heads = p.model.config.n_heads
    by_site: dict[tuple[str, str], list[tuple[int, int]]] = {}  # (stack, attention kind) -> [(layer, head)]
    for block, h in heads:
        if f"{block}.z" not in points:
            blocks = sorted({n[:-2] for n in points if n.endswith(".z")})
            raise InputError(f"{block!r} is not an attention block of this model; use one of {', '.join(blocks)}")
        if not 0 <= h < n_heads:
            raise InputError(f"head {h} of {block} does not exist; heads are 0..{n_heads - 1}")
        stack, layer, kind = block.split(".")
        by_site.setdefault((stack, kind), []).append((int(layer), h))
    by_stack: dict[str, list[int]] = {}
    for block in ffns:
        if not block.endswith(".ffn") or f"{block}.out" not in points:
            blocks = sorted({n[:-4] for n in points if n.endswith(".ffn.out")})
            raise InputError(f"{block!r} is not a feed-forward block of this model; use one of {', '.join(blocks)}")
        stack, layer, _ = block.split(".")
        by_stack.setdefault(stack, []).append(int(layer))
    if not by_site and not by_stack:
        return {}
    ref = reference if reference is not None else (reference_inputs(p) if how != "zero" else _inputs(p))
    fns: dict = {}
    with p.precision():  # a mean ablation runs the reference: the walkthrough's float64 PE too
        for (stack, kind), hs in by_site.items():
            fns.update(interp.ablation_hooks(p.model, *ref, heads=hs, attn=kind, stack=stack, how=how))
        for stack, layers in by_stack.items():
            fns.update(interp.ablation_hooks(p.model, *ref, ffns=layers, stack=stack, how=how))
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


def logit_lens(p: Prepared, fns: dict, inputs: tuple) -> dict | None:
    """`interp.logit_lens` of the (patched) run: the top tokens at every layer and position."""
    if p.vocab is None:
        return None
    try:
        with torch.no_grad(), p.precision(), (hooks(p.model, fns) if fns else nullcontext()):
            lens = interp.logit_lens(p.model, *inputs)
    except InputError:  # an encoder whose positions are concatenated has nothing to read through
        return None
    probs = lens.probs()[:, 0]  # (layer, seq, vocab)
    top_p, top_i = probs.topk(min(TOP, probs.shape[-1]), dim=-1)
    layers = [{"layer": label, "top": [[{"token": p.vocab(int(i)), "p": round(float(v), 5)} for v, i in zip(ps, ids)]
                                       for ps, ids in zip(top_p[k], top_i[k])]}
              for k, label in enumerate(lens.labels)]
    return {"unembedding": lens.unembedding, "layers": layers}


def intervene(p: Prepared, heads: list[tuple[str, int]], ffns: list[str], how: str, max_new_tokens: int) -> dict:
    """Patterns, output and logit lens with the parts switched off, next to the intact run."""
    from .live import generate_steps
    from .models import _lists

    reference = reference_inputs(p)
    fns = ablation_hooks(p, heads, ffns, how, reference)
    stack = p.self_attention()
    names = [f"{stack}.*.{'self_attn' if stack == 'dec' else 'attn'}.pattern", f"{stack}.*.out"]
    if p.kind == "encoder-decoder":
        names.append("dec.*.cross_attn.pattern")
    out: dict = {"tokens": p.tokens, "kind": p.kind, "how": how}
    tgt = None
    if p.kind == "encoder-decoder":  # the translation with and without the intervention
        before = generate_steps(p, "greedy", max_new_tokens, 1.0, 1, 1, 1.0, 0)
        after = generate_steps(p, "greedy", max_new_tokens, 1.0, 1, 1, 1.0, 0, fns)
        out["output"] = {"before": before["text"], "after": after["text"]}
        tgt = torch.tensor([after["ids"][:-1] if len(after["ids"]) > 1 else after["ids"]])
        out["target_tokens"] = [p.subject.tgt_tokenizer.id_to_token(i) for i in tgt[0].tolist()]
    _, base = run_patched(p, {}, names, tgt)
    _, patched = run_patched(p, fns, names, tgt)
    hooks_ = [k for k in patched if k.endswith(".pattern")]
    out["pattern_hooks"] = hooks_
    out["patterns"] = {k: _lists(patched[k][0], 5) for k in hooks_}
    last = [k for k in patched if k.startswith(f"{stack}.") and k.endswith(".out") and k.count(".") == 2][-1]
    # how far each token's final representation moved: ‖after − before‖ / ‖before‖
    delta = (patched[last] - base[last]).norm(dim=-1) / base[last].norm(dim=-1).clamp_min(1e-12)
    out["change"] = {"hook": last, "relative": _lists(delta[0], 6)}
    inputs = (p.source(), tgt) if tgt is not None else (p.source(),)
    before_lens, after_lens = logit_lens(p, {}, inputs), logit_lens(p, fns, inputs)
    out["lens"] = None if before_lens is None else {"unembedding": before_lens["unembedding"],
                                                    "before": before_lens["layers"], "after": after_lens["layers"]}
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
