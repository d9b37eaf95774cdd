"""Seed 000 §2.3 (and Michel et al. 2019, "Are Sixteen Heads Really Better than One?"): heads specialise,
so most of them can be removed at test time with little loss.

The seed says each head's subspace comes to capture its own kind of feature ("这不是设计，是涌现").
If that division of labour is real, heads differ in how much the model needs them: removing the
least important ones costs little, and less than removing heads at random. Measured on MiniLM
(all-MiniLM-L6-v2, 6 layers × 12 heads), which has no masked-LM head, so the quality proxy is
its own output: the cosine between a sentence's mean-pooled embedding (the model's intended
use) with heads removed and without.
- importance of a head: the mean drop of that cosine when only that head is removed, on a set of
  sentences disjoint from the evaluation set (Michel et al. use the gradient of the loss with
  respect to a head mask; with no loss to differentiate, the one-head ablation is the direct form);
- a removed head has its z (pattern·V) zeroed, i.e. its rows of W_O (`interp.ablate`);
- prune the k least important heads, k = 10%, 20%, …, 90% of 72, and compare with random orders.
"""

from __future__ import annotations

import random

import torch

from ..interp.ablate import ablate
from .base import Context, Outcome
from .layer_probes import _minilm, sentences
from .report import line_plot
from .verdict import Check, Variant

ID = "head-pruning"
SECTION = "seed 000 §2.3"
CLAIM = ("Each head works in its own subspace and comes to capture its own kind of feature (emergent, not "
         "designed): heads specialise, so (Michel et al. 2019) many can be removed with little loss.")
SEEDS = 5  # random pruning orders; the per-sentence values are of one fixed model
FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
KEEP_BAR = 0.9  # pre-registered: cosine to the unpruned embedding that counts as "little loss"
AT = 0.4  # Michel et al. 2019 §4: BERT keeps its MNLI accuracy with up to 40% of heads pruned


def embed(model, ids, mask, heads=()) -> torch.Tensor:
    """Mean-pooled, unit-length sentence embeddings (sentence-transformers' pooling for this model)."""
    with torch.no_grad():
        h = ablate(model, ids, heads=list(heads), padding_mask=mask) if heads else model(ids, padding_mask=mask)
    keep = (~mask).unsqueeze(-1).to(h.dtype)
    pooled = (h * keep).sum(1) / keep.sum(1)
    return torch.nn.functional.normalize(pooled.double(), dim=-1)


def run(ctx: Context) -> Outcome:
    model, tok = _minilm()
    n = ctx.pick(len(ctx.seeds), 64)  # --quick: as many sentences as seeds (the row's shape)
    texts = sentences(2 * n)
    eval_ids, eval_mask = tok.encode_batch(texts[:n], max_length=32)
    imp_ids, imp_mask = tok.encode_batch(texts[n:], max_length=32)
    L, H = model.config.n_layers, model.config.n_heads
    all_heads = [(layer, h) for layer in range(L) for h in range(H)]
    base_imp = embed(model, imp_ids, imp_mask)
    importance = {lh: float(1 - (embed(model, imp_ids, imp_mask, [lh]) * base_imp).sum(-1).mean())
                  for lh in all_heads}
    order = sorted(all_heads, key=importance.get)  # least important first
    base = embed(model, eval_ids, eval_mask)

    def cosines(removed) -> list[float]:
        return (embed(model, eval_ids, eval_mask, removed) * base).sum(-1).tolist()

    fractions = FRACTIONS if not ctx.quick else (0.2, AT)
    by_imp = {f: cosines(order[:round(f * len(order))]) for f in fractions}
    by_rand = {f: [] for f in fractions}
    for s in ctx.seeds:
        shuffled = random.Random(s).sample(all_heads, len(all_heads))
        for f in fractions:
            by_rand[f].append(cosines(shuffled[:round(f * len(shuffled))]))
    # per sentence: mean over the random orders (the orders are the nuisance, sentences the sample)
    rand_mean = {f: [sum(r[i] for r in by_rand[f]) / len(by_rand[f]) for i in range(n)] for f in fractions}
    ctx.log(f"mean cosine by importance {[round(sum(by_imp[f]) / n, 3) for f in fractions]}, random "
            f"{[round(sum(rand_mean[f]) / n, 3) for f in fractions]}")
    k = round(AT * len(order))
    variants = [Variant(f"importance-pruned {AT:.0%}", "cosine to the unpruned embedding, per sentence", by_imp[AT]),
                Variant(f"random-pruned {AT:.0%}", "cosine to the unpruned embedding, per sentence (mean of "
                        f"{len(ctx.seeds)} random orders)", rand_mean[AT]),
                Variant("importance-pruned 20%", "cosine to the unpruned embedding, per sentence", by_imp[0.2]),
                Variant("random-pruned 20%", "cosine to the unpruned embedding, per sentence", rand_mean[0.2]),
                Variant(f"bar (cosine {KEEP_BAR})", "the pre-registered bar", [KEEP_BAR] * n)]
    checks = [
        Check(f"MiniLM keeps its sentence embedding with the {AT:.0%} least important heads removed "
              f"(cosine above {KEEP_BAR})", f"importance-pruned {AT:.0%}", f"bar (cosine {KEEP_BAR})", True, 0.0,
              published="Michel et al. 2019 §4 / Fig. 2: BERT on MNLI keeps its accuracy with up to 40% of heads "
                        "pruned by importance"),
        Check(f"heads differ: removing the {AT:.0%} least important costs less than {AT:.0%} at random "
              "(+0.05 cosine)", f"importance-pruned {AT:.0%}", f"random-pruned {AT:.0%}", True, 0.05),
        Check("heads differ at 20% too (+0.05 cosine)", "importance-pruned 20%", "random-pruned 20%", True, 0.05,
              main=False),
    ]
    line_plot(ctx.out_dir / "head_pruning.png",
              {"by importance": (list(fractions), [sum(by_imp[f]) / n for f in fractions]),
               "random order": (list(fractions), [sum(rand_mean[f]) / n for f in fractions])},
              "fraction of MiniLM's 72 heads removed", "cosine to the unpruned sentence embedding",
              "Pruning heads by importance and at random")
    top = sorted(importance.items(), key=lambda kv: -kv[1])[:3]
    setup = (f"MiniLM (all-MiniLM-L6-v2, {L} layers × {H} heads; a contrastively trained sentence encoder with no "
             f"MLM head, so the proxy is its mean-pooled embedding) on {n} held-out fortunes-en lines of ≥ 8 words "
             f"(≤ 32 WordPiece tokens); head importance from {n} other lines (one-head ablation: mean 1 − cosine). "
             f"Removing {k} of {len(order)} heads; mean cosine by fraction {list(fractions)}: by importance "
             f"{[round(sum(by_imp[f]) / n, 3) for f in fractions]}, random "
             f"{[round(sum(rand_mean[f]) / n, 3) for f in fractions]}. Most important heads (layer, head): "
             + ", ".join(f"{lh} {v:.3f}" for lh, v in top) + ".")
    notes = ("Michel et al. measure task accuracy after fine-tuning; MiniLM has no task head here, so 'little "
             "loss' is read as the embedding staying within cosine 0.9 of itself (a pre-registered bar: "
             "paraphrase pairs under this model sit around 0.8–0.9). The values are per sentence of one "
             "fixed model.")
    return Outcome(variants, checks, setup, notes=notes, plots=[("head_pruning.png", "Cosine to the unpruned "
                                                                 "embedding as heads are removed")],
                   extra={"importance": {f"{a}.{b}": v for (a, b), v in importance.items()}})
