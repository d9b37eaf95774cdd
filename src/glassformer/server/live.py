"""Generation shown step by step: what the model weighed at each token (explorer, issue 14).

`glassformer.generate` is the fast path (KV cache, batches). The explorer wants what that loop
throws away, so this one recomputes the whole prefix each step (the models shown are small) and
keeps, per step: the next-token distribution's top k, the token picked, and the attention row of
the new query — cross-attention over the source for a translator, self-attention for an LM (a run's
LM reads at most the windows it trained on, as `generate(window=block_size)` does).
Beam search keeps its whole tree: every candidate kept at every step, with its parent.

Greedy picks argmax; sampling draws with `glassformer.generate.sample_next` from a seeded generator
(so the same seed gives the same tokens as `generate(..., strategy="sample")`); beam search follows
`glassformer.beam`'s rules (2K candidates, an eos counts only within the top K, score / length**alpha,
stop when no running beam can beat the worst kept hypothesis).

`iter_steps` yields one record per decoding step as soon as it is computed, then the result: the
server streams them (one JSON line each), so the page shows generation as it happens.
"""

from __future__ import annotations

from typing import Iterator

import torch
import torch.nn.functional as F

from ..errors import InputError
from ..generate import sample_next, tempered
from ..train.checkpoint import trained_window
from .interventions import run_patched
from .subjects import Prepared


def _prefix(p: Prepared) -> tuple[list[int], str]:
    """The decoder's first ids and the attention hook whose last row the page shows."""
    if p.kind == "encoder-decoder":
        return [p.model.config.start_id], "dec.*.cross_attn.pattern"
    if p.kind == "decoder":
        return list(p.ids), "dec.*.self_attn.pattern"
    raise InputError(f"model {p.subject.name!r} is an encoder and cannot generate; "
                     "pick a translator or a language model (run:...)")


def _step(p: Prepared, seq: list[int], hook: str, fns: dict) -> tuple[torch.Tensor, dict]:
    """Logits of the next token (vocab,) and each layer's attention row of the last query (head, key)."""
    tgt = torch.tensor([seq]) if p.kind == "encoder-decoder" else None
    skipped = 0
    if p.kind == "decoder":  # the LM reads the sequence as its input: at most the window it trained on
        window = trained_window(p.subject.meta or {})  # as `generate(window=...)` reads it
        skipped = max(0, len(seq) - window) if window else 0
        p = Prepared(p.subject, seq[skipped:], p.tokens, p.float64)
    logits, trace = run_patched(p, fns, [hook], tgt)
    # keys before the window get weight 0 (the query never read them): one column per token of `seq`
    return logits[0, -1].float(), {k: F.pad(v[0, :, -1, :].double(), (skipped, 0)) for k, v in trace.items()}


def _top(probs: torch.Tensor, k: int, tok) -> list[dict]:
    ps, ids = probs.topk(min(k, probs.shape[-1]))
    return [{"token": tok.id_to_token(int(i)), "id": int(i), "p": round(float(v), 6)} for v, i in zip(ps, ids)]


def generate_steps(p: Prepared, strategy: str, max_new_tokens: int, temperature: float, top_k: int,
                   beam_size: int, length_penalty: float, seed: int, fns: dict | None = None) -> dict:
    """Decode with every step's record; `fns` (interventions) patch each forward pass."""
    *steps, result = iter_steps(p, strategy, max_new_tokens, temperature, top_k, beam_size, length_penalty, seed, fns)
    return {**result, "steps": steps}


def iter_steps(p: Prepared, strategy: str, max_new_tokens: int, temperature: float, top_k: int,
               beam_size: int, length_penalty: float, seed: int, fns: dict | None = None) -> Iterator[dict]:
    """Each step's record as it is decoded, then {"strategy", "ids", "text", "tree"}."""
    prefix, hook = _prefix(p)
    tok = p.subject.tgt_tokenizer
    if tok is None:
        raise InputError(f"model {p.subject.name!r} has no target tokenizer to show generated tokens with")
    fns = fns or {}
    if strategy == "beam":
        yield from _beam(p, prefix, hook, fns, tok, max_new_tokens, beam_size, length_penalty, top_k)
        return
    eos = p.model.config.eos_id
    gen = torch.Generator().manual_seed(seed)
    seq = list(prefix)
    for _ in range(max_new_tokens):
        logits, attention = _step(p, seq, hook, fns)
        probs = torch.softmax(tempered(logits, temperature if strategy == "sample" else 1.0), dim=-1)
        if strategy == "greedy":
            t = int(logits.argmax())
        else:
            t = int(sample_next(logits[None], temperature, generator=gen)[0])
        yield {"id": t, "token": tok.id_to_token(t), "p": round(float(probs[t]), 6),
               "top": _top(probs, top_k, tok), "attention": {k: v.tolist() for k, v in attention.items()}}
        seq.append(t)
        if t == eos:
            break
    new = seq[len(prefix):]
    yield {"strategy": strategy, "ids": seq, "text": tok.decode(new), "tree": None}


def _beam(p, prefix, hook, fns, tok, max_new_tokens, K, alpha, top_k) -> Iterator[dict]:
    """Beam search that keeps its tree: nodes {id, parent, token, score, step, finished}; each step's
    record carries the nodes it added, the last one the whole tree."""
    eos = p.model.config.eos_id
    nodes = [{"id": 0, "parent": None, "token": "<start>", "score": 0.0, "step": 0, "finished": False}]
    beams = [(0.0, list(prefix), 0)]  # (summed log prob, ids, node)
    finished: list[tuple[float, list[int], int]] = []  # (normalised score, ids, node)
    for step in range(1, max_new_tokens + 1):
        grown = len(nodes)
        cands = []
        first_probs = None
        for score, seq, node in beams:
            logits, _ = _step(p, seq, hook, fns)
            logp = torch.log_softmax(logits, dim=-1)
            if first_probs is None:
                first_probs = logp.exp()
            top_lp, top_i = logp.topk(min(2 * K, logp.shape[-1]))
            cands += [(score + float(lp), seq, node, int(i)) for lp, i in zip(top_lp, top_i)]
        cands.sort(key=lambda c: -c[0])
        kept = []
        for rank, (s, seq, parent, t) in enumerate(cands[:2 * K]):
            if len(kept) == K:
                break
            is_eos = eos is not None and t == eos
            if is_eos and rank >= K:
                continue
            nodes.append({"id": len(nodes), "parent": parent, "token": tok.id_to_token(t), "score": round(s, 6),
                          "step": step, "finished": is_eos})
            if is_eos:
                finished.append((s / step ** alpha, seq + [t], len(nodes) - 1))
            else:
                kept.append((s, seq + [t], len(nodes) - 1))
        yield {"top": _top(first_probs, top_k, tok), "beams": [tok.decode(s[len(prefix):]) for _, s, _ in kept],
               "nodes": nodes[grown:]}
        finished = sorted(finished, key=lambda f: -f[0])[:K]
        if not kept or (len(finished) >= K and finished[-1][0] >=
                        kept[0][0] / (max_new_tokens if alpha > 0 else step) ** alpha):
            break  # no running beam can beat the worst kept hypothesis (beam.py's `_bound`)
        beams = kept
    else:  # the length limit: running beams compete too
        finished += [(s / max_new_tokens ** alpha, seq, n) for s, seq, n in beams]
    best_score, best, best_node = max(finished, key=lambda f: f[0])
    path, n = [], best_node
    while n is not None:
        path.append(n)
        n = nodes[n]["parent"]
    yield {"strategy": "beam", "ids": best, "text": tok.decode(best[len(prefix):]),
           "tree": {"nodes": nodes, "best": path[::-1], "score": round(best_score, 6)}}
