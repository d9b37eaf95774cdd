"""Pegasus (Zhang et al. 2020) as the export target of a Pre-LN translator with sinusoids.

Pegasus is Marian with the norm before each sublayer (seed 000 §4.4) and a final LayerNorm on each
stack: half-split sinusoids counted from 0, × sqrt(d_model) optional, final_logits_bias, no
embedding norm, nn.LayerNorm (eps 1e-5). That is what `glassformer train --task tsv` builds with the
auto recipe (Pre-LN), once export.py has rewritten the interleaved table (rewrites.half_split_basis).
M2M100/NLLB, the other Pre-LN sinusoidal translators, compute a different table
(10000^(-i/(d/2 − 1)) and positions offset by pad_id + 1), so they do not compute our function.
Pegasus has one vocabulary size: separate vocabularies are padded to one (rewrites.one_vocab_size).
`from_hf` reads it back (hf_marian.convert with family "Pegasus"): the round trip is bit for bit.
"""

from __future__ import annotations

from .writing import bart_like_config, bart_like_layers, sinusoid_tables, tables_and_head


def convert(hf_model):
    """A glassformer EncoderDecoder whose logits equal a PegasusForConditionalGeneration's."""
    from .hf_marian import convert as marian_like
    return marian_like(hf_model, "Pegasus")


def to_hf(model):
    """The PegasusForConditionalGeneration of a Pre-LN translator with half-split sinusoids."""
    from transformers import PegasusConfig, PegasusForConditionalGeneration
    c = model.config
    hf = PegasusForConditionalGeneration(PegasusConfig(**bart_like_config(c, c.tie_embeddings and c.share_embeddings)))
    sinusoid_tables(hf.model, model)
    tables_and_head(hf, model)
    bart_like_layers(model, hf.model.encoder, hf.model.decoder, pre_ln_final=True)
    return hf
