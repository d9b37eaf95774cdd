"""The walkthrough's input side: the sentence, its tokens, and an embedding for each (seed 000 §7.1–7.2).

The seed prints three 12-dimensional embeddings (§7.2) — 猫, 吃, 鱼 — "looked up in a trained
embedding matrix". Those are the only embeddings the seed gives, so:

- a token among 猫 / 吃 / 鱼 with a 12-wide embedding gets the seed's vector;
- any other token has no embedding: that is an error, unless the user asks for
  `random_embeddings`, which draws a seeded vector per token (uniform in [0, 1), the range of the
  seed's numbers) — the same vector for the same token and seed, whatever the sentence.
"""

from __future__ import annotations

import re
import zlib

import torch

from ..errors import InputError

# Seed 000 §7.2, verbatim.
SEED_EMBEDDINGS: dict[str, list[float]] = {
    "猫": [0.21, 0.54, 0.13, 0.82, 0.31, 0.67, 0.15, 0.93, 0.25, 0.44, 0.72, 0.18],
    "吃": [0.38, 0.23, 0.91, 0.42, 0.55, 0.19, 0.87, 0.33, 0.61, 0.28, 0.49, 0.76],
    "鱼": [0.73, 0.16, 0.45, 0.34, 0.82, 0.29, 0.56, 0.19, 0.94, 0.37, 0.11, 0.68],
}
SEED_SENTENCE = "猫 吃 鱼"
SEED_WIDTH = 12
MAX_TOKENS = 32  # every number is printed: past this the walkthrough stops being readable

_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


def segment(sentence: str | None) -> list[str]:
    """Whitespace-separated words; unsegmented Chinese ("猫吃鱼") is segmented with jieba."""
    if sentence is None:
        sentence = SEED_SENTENCE
    text = sentence.strip()
    if not text:
        raise InputError("the sentence is empty; give at least one token, e.g. \"猫 吃 鱼\"")
    words = []
    for piece in text.split():
        if len(piece) > 1 and _CJK.search(piece):  # "猫吃鱼" → 猫 / 吃 / 鱼
            words += _jieba_cut(piece)
        else:
            words.append(piece)
    if len(words) > MAX_TOKENS:
        raise InputError(f"the sentence has {len(words)} tokens; the walkthrough prints every number "
                         f"and takes at most {MAX_TOKENS} (shorten it)")
    return words


def _jieba_cut(piece: str) -> list[str]:
    """The project's jieba segmenter, knowing the seed's words and the zh→en lexicon (狗追猫 → 狗 追 猫)."""
    from ..data.zh_en import zh_words
    from ..tokenize import SPECIALS, JiebaTokenizer

    return JiebaTokenizer([*SPECIALS, *dict.fromkeys([*SEED_EMBEDDINGS, *zh_words()])]).tokens(piece)


def vocabulary(tokens: list[str]) -> tuple[list[str], list[int]]:
    """Distinct tokens in order of first appearance, and each token's id in that list."""
    vocab: list[str] = []
    for t in tokens:
        if t not in vocab:
            vocab.append(t)
    return vocab, [vocab.index(t) for t in tokens]


def random_embedding(token: str, width: int, seed: int) -> torch.Tensor:
    """A seeded vector in [0, 1)^width for `token`: stable across sentences and runs."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + zlib.crc32(token.encode("utf-8")))
    return torch.rand(width, generator=g, dtype=torch.float64)


def embedding_table(vocab: list[str], width: int, seed: int, random_embeddings: bool) -> tuple[torch.Tensor, dict[str, str]]:
    """W_E (len(vocab), width) and, per token, where its row came from ("seed" or "random")."""
    rows, source = [], {}
    for tok in vocab:
        if tok in SEED_EMBEDDINGS and width == SEED_WIDTH:
            rows.append(torch.tensor(SEED_EMBEDDINGS[tok], dtype=torch.float64))
            source[tok] = "seed"
        elif random_embeddings:
            rows.append(random_embedding(tok, width, seed))
            source[tok] = "random"
        elif width != SEED_WIDTH:
            raise InputError(f"the seed's embeddings are {SEED_WIDTH}-dimensional but the model's "
                             f"embedding width is {width}; add --random-embeddings (or keep --d-model 12)")
        else:
            raise InputError(f"unknown token {tok!r} has no embedding (the seed gives only "
                             f"{', '.join(SEED_EMBEDDINGS)}); add --random-embeddings or use --ckpt DIR")
    return torch.stack(rows).to(torch.get_default_dtype()), source
