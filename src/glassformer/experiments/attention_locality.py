"""Seed 000 §2.6 (Clark et al. 2019, as the seed quotes it): shallow layers attend locally, deep layers globally.

Read off trained models layer by layer (see `layer_probes`): the mean attention distance
Σ_k p(q, k)·|q − k| (in tokens, averaged over heads and queries) and the entropy of each
query's attention. "Global" means a larger distance and a flatter (higher-entropy) pattern.
The check is paired: last layer − first layer, per sentence (MiniLM) or per seed (trained LM).
"""

from __future__ import annotations

from .base import Context, Outcome
from .layer_probes import LM_SETUP, lm_readings, mean_rows as _mean, minilm_readings
from .report import line_plot
from .verdict import Check, Variant

ID = "attention-locality"
SECTION = "seed 000 §2.6"  # Clark et al. 2019 as quoted there; §2.1 is the one-head argument
CLAIM = ("Heads in shallow layers (near the input) attend more to local patterns; heads in deep layers "
         "(near the output) attend more to global, abstract patterns.")
SEEDS = 5
DELTA = 0.5  # tokens: the smallest change of mean distance the claim is about
NOTES = ("BERT-style models send much attention to [CLS] and [SEP] (a sink, at the two ends of the sentence), "
         "which would count as distance: the MiniLM check that decides leaves them out (queries and keys, each "
         "query's weights renormalised over the words); the check with them is a side check. The causal LM's "
         "distances are bounded by the query's position.")


def minilm_arms(mini: list[dict]) -> tuple[list[Variant], list[Check]]:
    """MiniLM's arms and checks (also used by scripts/claims_redecide.py, which has no trained LM to rerun).

    Issue 28 §4: about half of MiniLM's distance growth was attention to [CLS]/[SEP], which sit at
    the two ends of the sentence, so a head parked on them "attends far" without reading any word.
    The check that decides is therefore the distance among the words only (`content_distance`);
    the distance with the special tokens is kept as a side check, to show the size of the confound."""
    variants = [
        Variant("MiniLM words only: last − first distance", "change of mean attention distance (tokens) with "
                "[CLS]/[SEP] removed as queries and keys (weights renormalised), per sentence",
                [r["distance_content"][-1] - r["distance_content"][0] for r in mini]),
        Variant("MiniLM: last − first distance", "change of mean attention distance (tokens), per sentence",
                [r["distance"][-1] - r["distance"][0] for r in mini]),
        Variant("MiniLM: last − first entropy", "change of mean attention entropy (nats), per sentence",
                [r["entropy"][-1] - r["entropy"][0] for r in mini]),
    ]
    checks = [
        Check(f"MiniLM, words only (no [CLS]/[SEP]): the last layer attends farther than the first (≥ {DELTA} "
              "tokens)", "MiniLM words only: last − first distance", "no change", True, DELTA),
        Check(f"MiniLM: the last layer attends farther than the first (≥ {DELTA} tokens)",
              "MiniLM: last − first distance", "no change", True, DELTA, main=False),
        Check("MiniLM: the last layer's attention is flatter (entropy +0.1 nats)",
              "MiniLM: last − first entropy", "no change", True, 0.1, main=False),
    ]
    return variants, checks


def run(ctx: Context) -> Outcome:
    n_sent = ctx.pick(len(ctx.seeds), 64)  # --quick: as many sentences as seeds
    mini = minilm_readings(n_sent)
    lm = [lm_readings(ctx, s, ctx.pick(2, 16)) for s in ctx.seeds]
    lm_dist = [_mean([r["distance"] for r in runs]) for runs in lm]
    lm_ent = [_mean([r["entropy"] for r in runs]) for runs in lm]
    mini_variants, mini_checks = minilm_arms(mini)
    variants = mini_variants + [
        Variant("trained LM: last − first distance", "change of mean attention distance (tokens), per seed",
                [d[-1] - d[0] for d in lm_dist]),
        Variant("trained LM: last − first entropy", "change of mean attention entropy (nats), per seed",
                [e[-1] - e[0] for e in lm_ent]),
        Variant("no change", "0", [0.0] * max(len(mini), len(lm))),
    ]
    checks = mini_checks[:2] + [
        Check(f"trained LM: the last layer attends farther than the first (≥ {DELTA} tokens)",
              "trained LM: last − first distance", "no change", True, DELTA),
        mini_checks[2],
        Check("trained LM: the last layer's attention is flatter (entropy +0.1 nats)",
              "trained LM: last − first entropy", "no change", True, 0.1, main=False),
    ]
    mini_dist = _mean([r["distance"] for r in mini])
    line_plot(ctx.out_dir / "attention_locality.png",
              {"MiniLM (mean over sentences)": (list(range(1, len(mini_dist) + 1)), mini_dist),
               "trained LM (mean over seeds)": (list(range(1, len(lm_dist[0]) + 1)), _mean(lm_dist))},
              "layer", "mean attention distance (tokens)", "Local or global, layer by layer")
    setup = (f"MiniLM on the first {n_sent} held-out fortunes-en lines of ≥ 8 words (≤ 32 WordPiece tokens, "
             f"bidirectional) and {LM_SETUP} (causal: a query at position t sees t + 1 keys). Mean distance per "
             f"layer: MiniLM {[round(x, 2) for x in mini_dist]} (words only, without [CLS]/[SEP]: "
             f"{[round(x, 2) for x in _mean([r['distance_content'] for r in mini])]}), trained LM "
             f"{[round(x, 2) for x in _mean(lm_dist)]}; "
             f"entropy: MiniLM {[round(x, 2) for x in _mean([r['entropy'] for r in mini])]}, trained LM "
             f"{[round(x, 2) for x in _mean(lm_ent)]}.")
    notes = NOTES
    return Outcome(variants, checks, setup, notes=notes,
                   plots=[("attention_locality.png", "Mean attention distance per layer")])
