"""Seed 003 §5 (Geva et al. 2021, "Transformer Feed-Forward Layers Are Key-Value Memories"): an FFN neuron
is a key that fires on a recognisable input pattern.

In FFN(x) = W_2·act(x·W_1 + b_1) + b_2, column i of W_1 is a key matched against the token vector
and row i of W_2 the value it writes. Geva et al. read each key's top-activating contexts over a
corpus and found human-recognisable patterns in them (shallow ones, such as a shared word, mostly
in the lower layers). Measured here on MiniLM over held-out fortunes-en lines, with a check a
program can make: a neuron is *token-selective* when at least MODAL of its TOP_K highest
activations fall on one and the same WordPiece token. Against that, the same count with each
neuron's activations shuffled over the positions (its top contexts then are random positions, so
the share measures how often frequent tokens such as "the" coincide by chance). [CLS]/[SEP] are
left out: they sit at the same place in every line and would make every neuron look selective.
"""

from __future__ import annotations

import torch

from ..errors import InputError
from ..trace import run_with_trace
from .base import Context, Outcome
from .layer_probes import _minilm, sentences
from .verdict import Check, Variant

ID = "ffn-memories"
SECTION = "seed 003 §5"
CLAIM = ("The FFN is where the model keeps what it has learned: its neurons act as key-value memories, each "
         "key firing on a recognisable input pattern (Geva et al. 2021).")
SEEDS = 5  # disjoint corpus samples of CHUNK lines (one fixed model: the corpus is what varies)
CHUNK = 80
TOP_K = 10
MODAL = 5  # of TOP_K: "at least half of a neuron's top contexts are the same token"


def layer_activations(model, ids, mask, special: set[int]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """(token ids of the kept positions, per layer the FFN activations there (positions, d_ff))."""
    with torch.no_grad():
        _, tr = run_with_trace(model, ids, padding_mask=mask, names=["enc.*.ffn.act"])
    keep = ~mask & ~torch.isin(ids, torch.tensor(sorted(special)))
    n = len([k for k in tr if k.endswith("ffn.act")])
    return ids[keep], [tr[f"enc.{i}.ffn.act"][keep].float() for i in range(n)]


def selective_share(tokens: torch.Tensor, act: torch.Tensor) -> float:
    """Share of neurons (columns of act (positions, d_ff)) whose TOP_K highest activations include
    ≥ MODAL positions holding one and the same token (tokens: (positions,) ids).

    Ties are broken by position, the earlier first (a stable sort): `topk` leaves the order of equal
    values unspecified, so a neuron with tied activations at the cut-off could count or not from run
    to run."""
    if tokens.dim() != 1 or act.dim() != 2 or act.shape[0] != tokens.shape[0]:
        raise InputError(f"selective_share needs tokens (positions,) and act (positions, d_ff); got tokens "
                         f"{tuple(tokens.shape)} and act {tuple(act.shape)}")
    if act.shape[0] < TOP_K:
        raise InputError(f"selective_share needs at least TOP_K={TOP_K} positions to rank a neuron's top "
                         f"contexts; got {act.shape[0]}: use a larger corpus sample")
    top = act.sort(dim=0, descending=True, stable=True).indices[:TOP_K]  # (TOP_K, d_ff) positions
    toks = tokens[top]  # (TOP_K, d_ff)
    same = (toks.unsqueeze(0) == toks.unsqueeze(1)).sum(0)  # per slot: how many slots hold its token
    return float((same.max(0).values >= MODAL).double().mean())


def shuffled(act: torch.Tensor, seed: int) -> torch.Tensor:
    """Each neuron's activations permuted over the positions on its own."""
    g = torch.Generator().manual_seed(seed)
    idx = torch.argsort(torch.rand(act.shape, generator=g), dim=0)
    return act.gather(0, idx)


def activations(model, tok, texts: list[str]) -> tuple[torch.Tensor, list[torch.Tensor]]:
    tokens, acts = [], None
    for i in range(0, len(texts), 50):
        ids, mask = tok.encode_batch(texts[i:i + 50], max_length=32)
        t, a = layer_activations(model, ids, mask, {tok.cls_id, tok.sep_id, tok.pad_id})
        tokens.append(t)
        acts = a if acts is None else [torch.cat([x, y]) for x, y in zip(acts, a)]
    return torch.cat(tokens), acts


def run(ctx: Context) -> Outcome:
    model, tok = _minilm()
    per = ctx.pick(12, CHUNK)  # lines per corpus sample; one disjoint sample per seed
    texts = sentences(per * len(ctx.seeds), min_words=4)
    real, base, layers_real = [], [], []
    for s in ctx.seeds:
        tokens, acts = activations(model, tok, texts[s * per:(s + 1) * per])
        shares = [selective_share(tokens, a) for a in acts]
        real.append(sum(shares) / len(shares))  # over all neurons (each layer has d_ff of them)
        base.append(sum(selective_share(tokens, shuffled(a, 100 * s + i)) for i, a in enumerate(acts)) / len(acts))
        layers_real.append(shares)
    by_layer = [sum(r[i] for r in layers_real) / len(layers_real) for i in range(len(layers_real[0]))]
    ctx.log(f"token-selective share {[round(x, 3) for x in real]}, shuffled {[round(x, 3) for x in base]}, "
            f"per layer {[round(x, 3) for x in by_layer]}")
    variants = [Variant("MiniLM FFN neurons", f"share of neurons with ≥ {MODAL} of their top {TOP_K} contexts on one "
                        "token, per corpus sample", real),
                Variant("shuffled activations", "the same share with each neuron's activations shuffled over "
                        "positions, per corpus sample", base)]
    checks = [Check("FFN neurons are keys for input patterns: more are token-selective than with shuffled "
                    "activations (+0.1 share)", "MiniLM FFN neurons", "shuffled activations", True, 0.1,
                    published="Geva et al. 2021 §3: experts found a recognisable pattern in the top-25 trigger "
                              "prefixes of every key they annotated (shallow patterns mostly in lower layers)")]
    setup = (f"MiniLM (all-MiniLM-L6-v2: 6 layers × d_ff 1536 neurons; a contrastively trained sentence encoder) "
             f"on {len(ctx.seeds)} disjoint samples of {per} held-out fortunes-en lines of ≥ 4 words (≤ 32 "
             "WordPiece tokens, [CLS]/[SEP] left out). Post-GELU FFN activations (`enc.i.ffn.act`); a neuron is "
             f"token-selective when ≥ {MODAL} of its top {TOP_K} positions in the sample are the same WordPiece "
             f"token. Share per layer 1–{len(by_layer)} (mean over samples): {[round(x, 3) for x in by_layer]}.")
    notes = ("Only the shallowest pattern (the same token) is counted, so the share is a lower bound on patterned "
             "keys: Geva et al.'s upper-layer keys fire on semantic topics, which a token match cannot see. The "
             "values' side (a value promotes the next token) needs an output head, which MiniLM does not have.")
    return Outcome(variants, checks, setup, notes=notes)
