"""Seed 003 §5: "in BERT-base the FFN holds about 70% of the ~110M parameters (two FFNs per block)".

Counted on Hugging Face's BertModel built from BertConfig() (whose defaults are BERT-base:
vocabulary 30522, d_model 768, 12 layers, d_ff 3072), on the meta device so nothing is allocated.
The FFN of a BERT layer is `intermediate.dense` (768→3072) + `output.dense` (3072→768); a block
has one FFN (and one attention).
"""

from __future__ import annotations

from .base import Context, Outcome
from .verdict import Exact, Variant

ID = "ffn-share"
SECTION = "seed 003 §5"
CLAIM = ("The FFN's share of the parameters is very high: in BERT-base (about 110M parameters) the "
         "FFN part is about 70% (each block has two FFNs, 12 blocks).")
SEEDS = 1


def bert_base_counts() -> dict:
    import torch
    from transformers import BertConfig, BertModel
    with torch.device("meta"):
        model = BertModel(BertConfig())
    total = ffn = layers = 0
    ffn_modules = set()
    for name, p in model.named_parameters():
        total += p.numel()
        if ".layer." in name:
            layers += p.numel()
        if ".intermediate.dense." in name or (".output.dense." in name and ".attention." not in name):
            ffn += p.numel()
            ffn_modules.add(name.rsplit(".", 2)[0])
    first = model.encoder.layer[0]
    per_block = sum(1 for m in first.modules() if m.__class__.__name__ == "BertIntermediate")
    return {"total": total, "ffn": ffn, "layers": layers, "ffn_per_block": per_block}


def run(ctx: Context) -> Outcome:
    c = bert_base_counts()
    share, share_layers = c["ffn"] / c["total"], c["ffn"] / c["layers"]
    variants = [
        Variant("BERT-base parameters (M)", "parameters, millions", [c["total"] / 1e6]),
        Variant("FFN share of all parameters", "FFN / all", [share]),
        Variant("FFN share of the 12 blocks", "FFN / encoder-layer parameters", [share_layers]),
        Variant("|FFN share − 0.70|", "distance from the seed's 70%", [abs(share - 0.70)]),
        Variant("|FFN share of blocks − 0.70|", "distance from the seed's 70%", [abs(share_layers - 0.70)]),
        Variant("FFNs per block", "BertIntermediate modules in one BertLayer", [float(c["ffn_per_block"])]),
    ]
    checks = [
        Exact("the FFN is ≈ 70% (±5 points) of BERT-base's parameters", "|FFN share − 0.70|", "<=", 0.05,
              published="Devlin et al. 2019: BERT-base 110M"),
        Exact("each block has two FFNs", "FFNs per block", ">=", 2),
        Exact("(reading kindly) ≈ 70% of the blocks' parameters, embeddings left out",
              "|FFN share of blocks − 0.70|", "<=", 0.05, main=False),
    ]
    setup = ("transformers.BertModel(BertConfig()) on the meta device: every parameter counted by "
             "name; FFN = intermediate.dense + output.dense of each of the 12 layers.")
    notes = (f"{c['ffn'] / 1e6:.1f}M of {c['total'] / 1e6:.1f}M parameters are FFN weights: "
             f"{share:.1%} of the model, {share_layers:.1%} of the 12 blocks (the 23.8M embedding "
             "parameters make the difference). Each block has one FFN; '12 blocks × two FFNs' would give 113M "
             "of FFN alone, more than the whole model.")
    return Outcome(variants, checks, setup, notes=notes)
