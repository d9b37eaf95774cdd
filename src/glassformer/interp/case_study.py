"""Case study: how the zh-en translator turns 猫 into "cat" and keeps 狗 追 猫 apart from 猫 追 狗.

Everything is measured by activation patching on the trained translator (teacher-forced on the
clean translation, so only the source differs between the two runs):

1. Word identity: clean 猫 吃 鱼, corrupted 狗 吃 鱼; metric logit(cat) − logit(dog) where "cat" is
   predicted. Patched: encoder layer outputs × source position, decoder layer outputs × target
   position, cross-attention heads; beside them the logit lens and the direct logit attribution.
2. Roles: clean A 追 B, corrupted B 追 A (same words, swapped order), for every ordered noun pair;
   metric: logit(clean token) − logit(corrupted token) at the target positions where the two
   translations differ. Patched: encoder self-attention heads (who carries word order), cross-
   attention heads, encoder outputs × source position — averaged over the pairs.
`run_case_study(ckpt, out)` writes docs/case-study.md and its figures; the text quotes only numbers
computed here, so a rerun on another model rewrites the findings to match.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path

import torch

from ..data.zh_en import NOUNS
from ..errors import InputError
from ..trace import run_with_trace
from .attribution import agreement, attribution_patch
from .decompose import decompose
from .lens import logit_lens
from .patch import PatchResult, patch, run_patched


@dataclass
class Pair:
    """A translator's clean and corrupted inputs, teacher-forced on the clean translation."""

    clean_src: torch.Tensor
    bad_src: torch.Tensor
    tgt_in: torch.Tensor  # (1, tgt) start + clean translation without its last token
    good: torch.Tensor  # (tgt,) clean next tokens
    bad: torch.Tensor  # (tgt,) the corrupted source's own next tokens (same length when roles swap)
    differ: torch.Tensor  # target positions where the two translations differ

    def metric(self, out: torch.Tensor) -> torch.Tensor:
        d = self.differ
        return (out[:, d, self.good[d]] - out[:, d, self.bad[d]]).mean(-1)


def _translate(model, ids: list[int]) -> torch.Tensor:
    out = model.generate(torch.tensor([ids]), max_new_tokens=16)[0]
    eos = model.config.eos_id
    return out[: int((out == eos).nonzero()[0]) + 1] if (out == eos).any() else out


def make_pair(model, src_tok, clean: str, corrupted: str) -> Pair:
    a, b = src_tok.encode(clean), src_tok.encode(corrupted)
    if len(a) != len(b):
        raise InputError(f"«{clean}» and «{corrupted}» differ in length; patching needs equal token counts")
    ta, tb = _translate(model, a), _translate(model, b)
    if len(ta) != len(tb):
        raise InputError(f"the translations of «{clean}» and «{corrupted}» differ in length")
    differ = (ta[1:] != tb[1:]).nonzero().flatten()
    if len(differ) == 0:
        raise InputError(f"«{clean}» and «{corrupted}» translate the same; nothing to measure")
    return Pair(torch.tensor([a]), torch.tensor([b]), ta[:-1][None], ta[1:], tb[1:], differ)


def _patch(model, pair: Pair, hook: str, per: str) -> PatchResult:
    return patch(model, (pair.clean_src, pair.tgt_in), (pair.bad_src, pair.tgt_in), hook=hook, per=per,
                 metric=pair.metric)


def word_identity(model, src_tok, tgt_tok) -> dict:
    """猫 吃 鱼 vs 狗 吃 鱼: where is 猫 → cat decided?"""
    pair = make_pair(model, src_tok, "猫 吃 鱼", "狗 吃 鱼")
    res = {name: _patch(model, pair, hook, per) for name, hook, per in (
        ("encoder", "enc.*.out", "position"), ("decoder", "dec.*.out", "position"),
        ("cross_heads", "dec.*.cross_attn.z", "head"), ("decoder_self_heads", "dec.*.self_attn.z", "head"))}
    approx = {k: attribution_patch(model, (pair.clean_src, pair.tgt_in), (pair.bad_src, pair.tgt_in),
                                   hook=r.hooks, per=r.per, metric=pair.metric) for k, r in res.items()}
    at = int(pair.differ[0])  # the target position that predicts "cat"
    cat, dog = int(pair.good[at]), int(pair.bad[at])
    lens = logit_lens(model, pair.clean_src, pair.tgt_in)
    dla = decompose(model, pair.clean_src, pair.tgt_in)
    attribution = dla.logit_attribution(cat, minus=dog)
    return {"pair": pair, "patch": res, "attribution": {k: agreement(res[k], approx[k]) for k in res},
            "lens_p_cat": lens.prob_of(cat)[:, at].tolist(), "lens_labels": lens.labels,
            "lens_top": [tgt_tok.id_to_token(int(i)) for i in lens.top(1)[:, at, 0]],
            "dla": attribution.ranked(0, at)[:6], "dla_error": attribution.error, "decompose_error": dla.error,
            "decompose_note": dla.note, "at": at, "src_tokens": [src_tok.id_to_token(int(i)) for i in pair.clean_src[0]],
            "tgt_labels": ["→" + tgt_tok.id_to_token(int(i)) for i in pair.good]}


def roles(model, src_tok, tgt_tok, verb: str = "追") -> dict:
    """A 追 B vs B 追 A over every ordered pair of nouns: which heads keep the roles apart."""
    sums: dict[str, torch.Tensor] = {}
    example = None
    n = 0
    for a, b in itertools.permutations(NOUNS, 2):
        pair = make_pair(model, src_tok, f"{a} {verb} {b}", f"{b} {verb} {a}")
        for name, hook, per in (("encoder_heads", "enc.*.attn.z", "head"), ("cross_heads", "dec.*.cross_attn.z", "head"),
                                ("encoder", "enc.*.out", "position"), ("decoder", "dec.*.out", "position")):
            if name in ("encoder", "decoder") and len(pair.good) != 6:
                continue  # only sentences shaped like 猫 追 狗 → "the cat chases the dog" share positions
            r = _patch(model, pair, hook, per)
            sums[name] = sums.get(name, 0) + r.effects
            if (a, b) == ("猫", "狗"):
                example = example or {}
                example[name] = r
        sums["all_encoder_attention"] = sums.get("all_encoder_attention", 0) + all_encoder_attention(model, pair)
        n += 1
    mean = {k: v / n for k, v in sums.items()}
    pair = make_pair(model, src_tok, "猫 追 狗", "狗 追 猫")
    _, tr = run_with_trace(model, pair.clean_src, pair.tgt_in, names=["dec.*.cross_attn.pattern"])
    return {"n_pairs": n, "mean": mean, "example": example, "pair": pair, "patterns": tr,
            "src_tokens": [src_tok.id_to_token(int(i)) for i in pair.clean_src[0]],
            "tgt_labels": ["→" + tgt_tok.id_to_token(int(i)) for i in pair.good]}


@torch.no_grad()
def all_encoder_attention(model, pair: Pair) -> float:
    """Fraction restored when every encoder self-attention output is patched at once (redundant heads included)."""
    names = [f"enc.{l}.attn.out" for l in range(len(model.enc))]
    clean_out, clean = run_with_trace(model, pair.clean_src, pair.tgt_in, names=names)
    _, tr = run_with_trace(model, pair.bad_src, pair.tgt_in, names=["logits"])
    m_clean, m_bad = float(pair.metric(clean_out)), float(pair.metric(tr["logits"]))
    patched = run_patched(model, (pair.bad_src, pair.tgt_in), {n: ((...,), clean[n]) for n in names})
    return (float(pair.metric(patched)) - m_bad) / (m_clean - m_bad)
