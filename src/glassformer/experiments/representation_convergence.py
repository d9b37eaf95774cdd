"""Seed 000 §7.4: after each encoder layer the token vectors of one sentence are more alike.

The seed's own numbers (random weights, 3 tokens, 2 layers): the mean cosine of 猫/吃/鱼 goes from
0.842 in the embedding to 0.941 after layer 2. Measured here on a trained BERT (MiniLM) and on a
model this project trains (see `layer_probes`): the mean pairwise cosine of a sentence's token
vectors at x0 (embedding + position) and after every layer; the check is paired (last − x0 per
sentence, or per seed for the trained LM).
"""

from __future__ import annotations

from .base import Context, Outcome
from .layer_probes import LM_SETUP, lm_readings, mean_rows as _mean, minilm_readings
from .report import line_plot
from .verdict import Check, Variant

ID = "representation-convergence"
SECTION = "seed 000 §7.4"
CLAIM = ("After the encoder layers every pair of words in the sentence is more similar than in the "
         "embeddings: the Transformer lets the words of one context soak into each other "
         "(cos 0.84 → 0.94 on average after 2 layers in the seed's example).")
SEEDS = 5
PUBLISHED = "seed 000 §7.4: mean cos(猫, 吃, 鱼) 0.842 in the embedding → 0.941 after layer 2 (+0.10)"


MINILM_KIND = ("MiniLM (sentence-transformers/all-MiniLM-L6-v2) is not a plain masked-LM encoder: it was "
               "fine-tuned contrastively on sentence pairs so that mean-pooled outputs of *different* sentences "
               "are pushed apart, which acts on exactly the cosines measured here (its last layer is where "
               "the cross-sentence cosine falls back).")


def minilm_arms(mini: list[dict]) -> tuple[list[Variant], list[Check]]:
    """MiniLM's arms and checks (also used by scripts/claims_redecide.py, which has no trained LM to rerun).

    Issue 28 §4: a rise of the within-sentence cosine can be anisotropy — every vector of a layer
    drifting toward one common direction, whatever sentence it comes from (Ethayarajh 2019) — not
    the words of one context soaking into each other. The baseline is the same cosine between the
    token vectors of two *different* sentences (`cross_cosine`, each sentence with the next); the
    check that decides is the within-sentence change minus the cross-sentence change."""
    within = [r["cosine"] for r in mini]
    cross = [r["cross"] for r in mini]
    variants = [
        Variant("MiniLM: x0", "mean pairwise cosine (one value per sentence)", [c[0] for c in within]),
        Variant("MiniLM: last layer", "mean pairwise cosine (one value per sentence)", [c[-1] for c in within]),
        Variant("MiniLM: last − x0", "change of the mean pairwise cosine, per sentence",
                [c[-1] - c[0] for c in within]),
        Variant("MiniLM: cross-sentence last − x0", "change of the mean cosine between this sentence's and the "
                "next sentence's token vectors (anisotropy baseline), per sentence", [c[-1] - c[0] for c in cross]),
        Variant("MiniLM: last − x0 beyond anisotropy", "within-sentence change − cross-sentence change, per sentence",
                [(w[-1] - w[0]) - (c[-1] - c[0]) for w, c in zip(within, cross)]),
        Variant("MiniLM: layer 5 − x0 beyond anisotropy", "the same at the last layer but one (before the layer "
                "where the cross-sentence cosine falls back), per sentence",
                [(w[-2] - w[0]) - (c[-2] - c[0]) for w, c in zip(within, cross)]),
    ]
    checks = [
        Check("MiniLM, anisotropy removed: the last layer's token vectors grow more alike within a sentence than "
              "across sentences (+0.1 cosine)", "MiniLM: last − x0 beyond anisotropy", "no change", True, 0.1,
              published=PUBLISHED),
        Check("MiniLM: the last layer's token vectors are more alike than x0's (+0.1 cosine)",
              "MiniLM: last − x0", "no change", True, 0.1, main=False, published=PUBLISHED),
        Check("MiniLM, anisotropy removed, at layer 5 (before the last): within-sentence convergence beyond the "
              "cross-sentence drift (+0.1 cosine)", "MiniLM: layer 5 − x0 beyond anisotropy", "no change", True,
              0.1, main=False, published=PUBLISHED),
    ]
    return variants, checks


def run(ctx: Context) -> Outcome:
    n_sent = ctx.pick(len(ctx.seeds), 64)  # --quick: as many sentences as seeds
    mini = minilm_readings(n_sent)
    readings = [lm_readings(ctx, s, ctx.pick(2, 16)) for s in ctx.seeds]
    lm = [_mean([r["cosine"] for r in per_seed]) for per_seed in readings]
    lm_cross = [_mean([r["cross"] for r in per_seed]) for per_seed in readings]  # the anisotropy baseline
    mini_cos = [r["cosine"] for r in mini]
    mini_variants, mini_checks = minilm_arms(mini)
    variants = mini_variants + [
        Variant("trained LM: x0", "mean pairwise cosine (one value per seed)", [c[0] for c in lm]),
        Variant("trained LM: last layer", "mean pairwise cosine (one value per seed)", [c[-1] for c in lm]),
        Variant("trained LM: last − x0", "change of the mean pairwise cosine, per seed", [c[-1] - c[0] for c in lm]),
        Variant("trained LM: cross-window last − x0", "change of the mean cosine between one held-out window's and "
                "the next window's token vectors (anisotropy baseline), per seed", [c[-1] - c[0] for c in lm_cross]),
        Variant("trained LM: last − x0 beyond anisotropy", "within-window change − cross-window change, per seed",
                [(w[-1] - w[0]) - (c[-1] - c[0]) for w, c in zip(lm, lm_cross)]),
        Variant("no change", "0", [0.0] * max(len(mini_cos), len(lm))),
    ]
    checks = mini_checks[:1] + [
        Check("trained LM, anisotropy removed: the last layer's token vectors grow more alike within a window than "
              "across windows (+0.1 cosine)", "trained LM: last − x0 beyond anisotropy", "no change", True, 0.1,
              published=PUBLISHED),
        Check("trained LM: the last layer's token vectors are more alike than x0's (+0.1 cosine)",
              "trained LM: last − x0", "no change", True, 0.1, main=False, published=PUBLISHED),
    ] + mini_checks[1:]
    line_plot(ctx.out_dir / "representation_convergence.png",
              {"MiniLM (mean over sentences)": (list(range(len(mini_cos[0]))), _mean(mini_cos)),
               "trained LM (mean over seeds)": (list(range(len(lm[0]))), _mean(lm))},
              "layer (0 = x0, embedding + position)", "mean pairwise cosine of a sentence's tokens",
              "Do token vectors converge with depth? (seed 000 §7.4)")
    setup = (f"MiniLM (all-MiniLM-L6-v2, 6 layers) on the first {n_sent} held-out fortunes-en lines of ≥ 8 words "
             f"(≤ 32 WordPiece tokens, [CLS]/[SEP] included), and {LM_SETUP}. Per-layer means: MiniLM "
             f"{[round(x, 3) for x in _mean(mini_cos)]} (cross-sentence baseline "
             f"{[round(x, 3) for x in _mean([r['cross'] for r in mini])]}), trained LM "
             f"{[round(x, 3) for x in _mean(lm)]} (cross-window baseline {[round(x, 3) for x in _mean(lm_cross)]})."
             f" {MINILM_KIND}")
    notes = ("MiniLM's values are per sentence of one fixed model (the interval covers sentences, not training "
             "seeds); the trained LM's are per training seed (the mean over its 16 held-out windows), and its "
             "anisotropy baseline pairs each window with the next. The seed's example uses random weights and "
             "3 tokens; here the models are trained.")
    return Outcome(variants, checks, setup, notes=notes,
                   plots=[("representation_convergence.png", "Mean pairwise cosine per layer")])
