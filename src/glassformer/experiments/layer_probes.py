"""What the two layer-by-layer claims measure, on the same two kinds of model.

Seed 000 §7.4 reads two things off a trained encoder layer by layer: the token vectors of one
sentence grow more alike (cosine), and shallow layers attend locally, deep ones globally. Both are
measured here with `trace.run_with_trace` (no second hook mechanism) on
- MiniLM (`glassformer.pretrained.load("minilm")`, 6 layers, a BERT trained by others), on held-out
  sentences of fortunes-en, one sentence per forward pass (no padding to mask out);
- a model this project trains: the 4-layer character LM of `text_task` (fortunes-en), one per seed,
  kept as safetensors under the run cache so that both experiments use the same weights.
"""

from __future__ import annotations

import os
from functools import lru_cache

import torch

from ..errors import InputError
from ..trace import run_with_trace
from .base import Context, run_tagging, tiny_config
from .runner import TrainSpec
from .text_task import CharTextTask

LM_LAYERS = 4


def mean_pairwise_cosine(h: torch.Tensor) -> float:
    """Mean cosine over the distinct pairs of rows of h (seq, d_model)."""
    u = torch.nn.functional.normalize(h.double(), dim=-1)
    c = u @ u.T
    n = h.shape[0]
    return float((c.sum() - c.diagonal().sum()) / (n * (n - 1)))


def mean_rows(rows: list[list[float]]) -> list[float]:
    """Element-wise mean of equal-length rows (per-layer readings averaged over sentences or seeds)."""
    return [sum(r[i] for r in rows) / len(rows) for i in range(len(rows[0]))]


def attention_distance(pattern: torch.Tensor) -> float:
    """Mean over heads and queries of Σ_k p(q, k)·|q − k|, pattern (head, q_pos, k_pos), in tokens."""
    q = torch.arange(pattern.shape[-2]).unsqueeze(1)
    k = torch.arange(pattern.shape[-1]).unsqueeze(0)
    return float((pattern.double() * (q - k).abs()).sum(-1).mean())


def attention_entropy(pattern: torch.Tensor) -> float:
    """Mean over heads and queries of −Σ_k p log p (nats)."""
    p = pattern.double()
    return float(-(p * torch.log(p.clamp_min(1e-30))).sum(-1).mean())


def content_distance(pattern: torch.Tensor, special: torch.Tensor) -> float:
    """attention_distance with the special positions (a bool mask over positions) taken out: their
    rows (queries) dropped, their columns (keys) dropped and each query's weights renormalised over
    the content keys that are left — the distance among words only, not to [CLS]/[SEP].

    |q − k| is counted in the original positions: a special token between two words still stands
    between them (compacting the kept positions first would shorten every span across it)."""
    if special.dtype != torch.bool or special.shape != pattern.shape[-1:] or pattern.shape[-2] != pattern.shape[-1]:
        raise InputError(f"content_distance needs pattern (head, seq, seq) and a bool mask (seq,); got pattern "
                         f"{tuple(pattern.shape)} and mask {tuple(special.shape)} of {special.dtype}")
    keep = ~special
    if not bool(keep.any()):
        raise InputError("content_distance: every position is special; at least one content token is needed")
    pos = torch.arange(special.shape[0])[keep]
    p = pattern[:, keep][:, :, keep].double()
    mass = p.sum(-1, keepdim=True)
    if bool((mass == 0).any()):
        raise InputError("content_distance: a content query puts no weight on any content key; its "
                         "distance among words is undefined")
    return float((p / mass * (pos[:, None] - pos[None, :]).abs()).sum(-1).mean())


def cross_cosine(h: torch.Tensor, g: torch.Tensor) -> float:
    """Mean cosine over all pairs (a row of h, a row of g): the similarity of two *different*
    sentences' token vectors, the anisotropy baseline of within-sentence similarity (Ethayarajh 2019)."""
    u = torch.nn.functional.normalize(h.double(), dim=-1)
    v = torch.nn.functional.normalize(g.double(), dim=-1)
    return float((u @ v.T).mean())


def layer_readings(model: torch.nn.Module, ids: torch.Tensor, stack: str,
                   special: torch.Tensor | None = None) -> dict[str, list]:
    """Per layer: cosine of the token vectors (x0, then each layer's output), attention distance, entropy;
    with `special` (bool per position), also the distance among content tokens and the vectors themselves."""
    _, tr = run_with_trace(model, ids, names=["x0", f"{stack}.*.out", f"{stack}.*.*attn.pattern"])
    n = sum(1 for k in tr if k.endswith(".out") and k.count(".") == 2)
    outs = [tr["x0"][0]] + [tr[f"{stack}.{i}.out"][0] for i in range(n)]
    pats = [tr[next(k for k in tr if k.startswith(f"{stack}.{i}.") and k.endswith("attn.pattern"))][0]
            for i in range(n)]
    out = {"cosine": [mean_pairwise_cosine(h) for h in outs],
           "distance": [attention_distance(p) for p in pats],
           "entropy": [attention_entropy(p) for p in pats]}
    if special is not None:
        out["distance_content"] = [content_distance(p, special) for p in pats]
        out["vectors"] = outs
    return out


@lru_cache(maxsize=1)
def _minilm():
    from ..pretrained import load
    return load("minilm")


def sentences(n: int, min_words: int = 8) -> list[str]:
    """The first n held-out fortunes-en lines of at least `min_words` words (deterministic)."""
    from ..data.corpora import load_corpus, split_documents
    _, valid = split_documents(load_corpus("fortunes-en"), valid_fraction=0.1, seed=0)
    lines = [ln.strip() for d in valid for ln in d.splitlines() if len(ln.split()) >= min_words]
    return lines[:n]


def minilm_readings(n_sentences: int) -> list[dict[str, list[float]]]:
    """layer_readings of MiniLM for each sentence (truncated to 32 WordPiece tokens), with
    "distance_content" (attention distance without [CLS]/[SEP]) and "cross" (per layer, the mean cosine
    between this sentence's token vectors and the next sentence's, the last paired with the first)."""
    model, tok = _minilm()
    out = []
    for text in sentences(n_sentences):
        ids, _ = tok.encode_batch([text], max_length=32)
        special = (ids[0] == tok.cls_id) | (ids[0] == tok.sep_id)
        with torch.no_grad():
            out.append(layer_readings(model, ids, "enc", special))
    return _with_cross(out)


def _with_cross(readings: list[dict]) -> list[dict]:
    """Each reading gains "cross": per layer, the mean cosine between its token vectors and the next
    reading's (the last paired with the first); the vectors themselves are dropped."""
    for i, r in enumerate(readings):
        other = readings[(i + 1) % len(readings)]["vectors"]
        r["cross"] = [cross_cosine(h, g) for h, g in zip(r["vectors"], other)]
    for r in readings:
        del r["vectors"]
    return readings


def trained_lm(ctx: Context, seed: int) -> torch.nn.Module:
    """The 4-layer character LM of fortunes-en for `seed`, trained once and kept in the run cache."""
    from safetensors.torch import load_file, save_file

    task = CharTextTask()
    cfg = tiny_config(task.vocab_size, n_layers=LM_LAYERS, max_len=task.seq_len)
    spec = TrainSpec(steps=ctx.pick(3, 1500), batch_size=ctx.pick(8, 32), lr=1e-3, warmup=ctx.pick(2, 100))
    path = None
    if ctx.memo_dir is not None:
        path = ctx.memo_dir.parent / "_models" / f"{'quick' if ctx.quick else 'full'}.textlm.s{seed}.safetensors"
        if path.exists():
            from ..nn import build_model
            model = build_model(cfg)
            model.load_state_dict(load_file(str(path)))
            return model.eval()
    model = run_tagging(cfg, task, spec, seed).model.eval()
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp))
        os.replace(tmp, path)
    return model


def lm_readings(ctx: Context, seed: int, n_windows: int) -> list[dict[str, list[float]]]:
    """layer_readings of the seed's trained LM on fixed held-out windows, one window per pass, with
    "cross" (per layer, the mean cosine between this window's token vectors and the next window's:
    the anisotropy baseline, as for MiniLM)."""
    model = trained_lm(ctx, seed)
    windows = CharTextTask().batches(1, n_windows, seed=4242)[0][0]
    with torch.no_grad():
        return _with_cross([layer_readings(model, w[None], "dec", torch.zeros(len(w), dtype=torch.bool))
                            for w in windows])


LM_SETUP = (f"the {LM_LAYERS}-layer character LM of fortunes-en (decoder-only, Post-LN, d_model 64, 4 heads, "
            "sinusoidal, embed_scale on) trained per seed, read on 64-character held-out windows")
