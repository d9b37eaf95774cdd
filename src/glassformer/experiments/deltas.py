"""δ, the smallest effect each check is about: a published figure in the row's units, or a pre-registered one.

"Does not hold" says an effect of size δ is excluded, so δ decides as much as the data do (issue
28: δ = 0.02 nats/char alone refuted `dk-sweet-spot`, five times Vaswani Table 3(A)'s effect). Each
entry below names its source and writes the conversion beside it. A check missing here keeps the
δ its module fixed before the first full run and says "nothing published; pre-registered".

Units. Vaswani et al. 2017 Table 3 reports dev perplexity per BPE token (newstest2013, 37k shared
BPE): a perplexity ratio r is ln r nats per token. Our text rows are nats per character; English
text averages ≈ 4 characters per BPE token of that vocabulary (4.7 characters per word with its
space, ≈ 1.2 tokens per word) — an assumption, stated so that it can be argued with. So
δ = ln(PPL_worse / PPL_better) / 4.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

CHARS_PER_TOKEN = 4.0  # the assumption above


@dataclass(frozen=True)
class Delta:
    value: float
    source: str


def _table3(worse: float, better: float, where: str) -> Delta:
    per_token = math.log(worse / better)
    return Delta(per_token / CHARS_PER_TOKEN,
                 f"published: {where}: ln({worse}/{better}) = {per_token:.4f} nats/token ÷ "
                 f"{CHARS_PER_TOKEN:g} chars/token = {per_token / CHARS_PER_TOKEN:.4f} nats/char")


# (row id, check) -> δ
DELTAS: dict[tuple[str, str], Delta] = {
    # seed 003 §2 at fixed width: d_k 16 is h = 32 and d_k 128 is h = 4 at d_model 512 (Table 3 (A))
    ("dk-sweet-spot", "d_k = 64 beats d_k = 16 (heads too thin)"):
        _table3(5.01, 4.92, "Vaswani et al. 2017 Table 3 (A), h=32/d_k=16 PPL 5.01 vs base h=8/d_k=64 4.92"),
    ("dk-sweet-spot", "d_k = 64 beats d_k = 128 (too few heads)"):
        _table3(5.00, 4.92, "Vaswani et al. 2017 Table 3 (A), h=4/d_k=128 PPL 5.00 vs base 4.92"),
    ("real-heads", "8 heads beat 1 head on text"):
        _table3(5.29, 4.92, "Vaswani et al. 2017 Table 3 (A), h=1 PPL 5.29 vs base h=8 4.92"),
    ("real-heads", "16 heads (d_k = 8) beat 8 heads (d_k = 16)"):
        _table3(4.92, 4.91, "Vaswani et al. 2017 Table 3 (A), base h=8 PPL 4.92 vs h=16 4.91"),
    # the row's checks at d_model 64 (h = 1, 4, 16): the first full report's (docs/claims_issue12.md), which
    # scripts/claims_redecide.py re-decides without --base
    ("real-heads", "4 heads beat 1 head on text"):
        _table3(5.29, 5.00, "Vaswani et al. 2017 Table 3 (A), h=1 PPL 5.29 vs h=4 5.00"),
    ("real-heads", "16 heads (d_k = 4) beat 4 heads (d_k = 16)"):
        _table3(5.00, 4.91, "Vaswani et al. 2017 Table 3 (A), h=4 PPL 5.00 vs h=16 4.91"),
    ("real-ffn", "d_ff = 4× beats d_ff = 1×"):
        _table3(5.12, 4.75, "Vaswani et al. 2017 Table 3 (C), d_ff 1024 PPL 5.12 vs 4096 4.75 (a 4× step)"),
    # the seeds' own numbers, in the row's units
    ("rnn", "… 10× faster or more at n = 512, d = 512 (§8.1: 10–100×)"):
        Delta(1.0, "the seed's figure: seed 000 §8.1 '快 10-100 倍' → log10 10 = 1 (time in log10 s)"),
    ("representation-convergence", "MiniLM: the last layer's token vectors are more alike than x0's (+0.1 cosine)"):
        Delta(0.1, "the seed's figure: seed 000 §7.4, mean cosine 0.842 → 0.941 after 2 layers = +0.099"),
    ("representation-convergence", "trained LM: the last layer's token vectors are more alike than x0's (+0.1 cosine)"):
        Delta(0.1, "the seed's figure: seed 000 §7.4, mean cosine 0.842 → 0.941 after 2 layers = +0.099"),
    ("representation-convergence", "MiniLM, anisotropy removed: the last layer's token vectors grow more alike "
                                   "within a sentence than across sentences (+0.1 cosine)"):
        Delta(0.1, "the seed's figure: seed 000 §7.4, mean cosine 0.842 → 0.941 after 2 layers = +0.099 (the seed's "
                   "random-weight example has no anisotropy to remove)"),
    ("representation-convergence", "trained LM, anisotropy removed: the last layer's token vectors grow more alike "
                                   "within a window than across windows (+0.1 cosine)"):
        Delta(0.1, "the seed's figure: seed 000 §7.4, mean cosine 0.842 → 0.941 after 2 layers = +0.099 (the seed's "
                   "random-weight example has no anisotropy to remove)"),
    ("representation-convergence", "MiniLM, anisotropy removed, at layer 5 (before the last): within-sentence "
                                   "convergence beyond the cross-sentence drift (+0.1 cosine)"):
        Delta(0.1, "the seed's figure: seed 000 §7.4, mean cosine 0.842 → 0.941 after 2 layers = +0.099"),
    ("ln-gradients", "6 layers: Post-LN's gradient grows toward the output more than Pre-LN's (≥ 2×)"):
        Delta(math.log10(2), "nothing published in these units (Xiong et al. 2020 Fig. 3 is a plot); "
                             "pre-registered: a factor 2, log10 2 = 0.301"),
    # issue 28 §5: rows on MiniLM (one fixed pretrained model, values per sentence or per layer)
    ("head-pruning", "MiniLM keeps its sentence embedding with the 40% least important heads removed (cosine above 0.9)"):
        Delta(0.0, "nothing published in these units (Michel et al. 2019 §4 report task accuracy: BERT keeps MNLI "
                   "with 40% of heads pruned); pre-registered: the bar itself is the claim (cosine 0.9 to the "
                   "unpruned embedding, fixed in experiments/head_pruning.py before the full run), δ = 0 beyond it"),
}


def delta_for(row: str, check: str, registered: float, module: str) -> Delta:
    """The registry's δ for a check, else the module's own pre-registered value."""
    found = DELTAS.get((row, check))
    if found is not None:
        return found
    return Delta(registered, f"nothing published; pre-registered (δ = {registered:g} fixed in "
                             f"experiments/{module}.py before the first full run)")
