"""Tokenizers: text → token ids → text (the first step of seed 000 ch. 7: "猫 吃 鱼" → [ids]).

Five kinds, one interface (`Tokenizer`):

- "char": every character is a token (spaces too, so decoding gives the text back);
- "word": whitespace-separated words;
- "jieba": Chinese word segmentation with jieba, so unsegmented "猫吃鱼" gives the ids of "猫 吃 鱼";
- "bpe", "unigram": subword vocabularies trained with the Hugging Face `tokenizers` library.

Every kind reserves the same special tokens: <pad>=0, <bos>=1, <eos>=2, <unk>=3. A tokenizer
saves to one JSON file (kept beside the checkpoint) and `load_tokenizer` restores it exactly.
"""

from __future__ import annotations

import abc
import json
import logging
import re
from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

import torch

from .errors import InputError

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
KINDS = ("char", "word", "jieba", "bpe", "unigram")
FORMAT = "glassformer-tokenizer/1"
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]")


class Tokenizer(abc.ABC):
    """Base class: a vocabulary of tokens with ids, and how text splits into tokens."""

    kind = "base"

    def __init__(self, vocab: Sequence[str], lang: str | None = None):
        if tuple(vocab[:len(SPECIALS)]) != SPECIALS:
            raise InputError(f"a {self.kind} vocabulary must start with {', '.join(SPECIALS)}")
        self.vocab = list(vocab)
        self._ids = {tok: i for i, tok in enumerate(self.vocab)}
        self.lang = lang

    # ---- special ids (the same for every kind) ----
    pad_id, bos_id, eos_id, unk_id = PAD_ID, BOS_ID, EOS_ID, UNK_ID

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def id_to_token(self, i: int) -> str:
        if not 0 <= int(i) < self.vocab_size:
            raise InputError(f"token id {i} is outside the vocabulary [0, {self.vocab_size})")
        return self.vocab[int(i)]

    def token_to_id(self, tok: str) -> int | None:
        return self._ids.get(tok)

    # ---- text <-> ids ----
    @abc.abstractmethod
    def tokens(self, text: str) -> list[str]:
        """The tokens `text` splits into (before looking them up in the vocabulary)."""

    def join(self, tokens: list[str]) -> str:
        return " ".join(tokens)

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        """Token ids of `text`; add_special wraps them as <bos> ... <eos>. Unknown tokens → <unk>."""
        ids = [self._ids.get(t, UNK_ID) for t in self.tokens(text)]
        return [BOS_ID, *ids, EOS_ID] if add_special else ids

    def decode(self, ids, skip_special: bool = True) -> str:
        """Text of `ids` (a list or a 1-D tensor); skip_special drops <pad>, <bos>, <eos>."""
        ids = _as_list(ids)
        if skip_special:
            ids = [i for i in ids if i not in (PAD_ID, BOS_ID, EOS_ID)]
        return self.join([self.id_to_token(i) for i in ids])

    # ---- saving ----
    def to_dict(self) -> dict:
        return {"format": FORMAT, "kind": self.kind, "lang": self.lang, "vocab": self.vocab}

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), ensure_ascii=False), encoding="utf-8")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(kind={self.kind!r}, vocab_size={self.vocab_size})"


class CharTokenizer(Tokenizer):
    """One token per character, whitespace included (so decode(encode(t)) == t)."""

    kind = "char"

    def tokens(self, text: str) -> list[str]:
        return list(text)

    def join(self, tokens: list[str]) -> str:
        return "".join(tokens)


class WordTokenizer(Tokenizer):
    """Whitespace-separated words ("the cat eats the fish" → 5 tokens)."""

    kind = "word"

    def tokens(self, text: str) -> list[str]:
        return text.split()


class JiebaTokenizer(WordTokenizer):
    """Chinese words found by jieba; text already separated by spaces keeps its words.

    jieba's dictionary knows 我爱你 and 黑猫 as single words; a piece the vocabulary lacks is
    split again into vocabulary words when it can be, so "猫吃鱼" and "我爱你" give the same
    ids as "猫 吃 鱼" and "我 爱 你".
    """

    kind = "jieba"

    def __init__(self, vocab: Sequence[str], lang: str | None = "zh"):
        super().__init__(vocab, lang)
        self._max_word = max((len(t) for t in self.vocab[len(SPECIALS):]), default=1)
        _add_words(t for t in self.vocab[len(SPECIALS):] if _CJK.search(t))

    def tokens(self, text: str) -> list[str]:
        out: list[str] = []
        for chunk in text.split():
            if chunk in self._ids:
                out.append(chunk)
                continue
            for piece in _jieba().cut(chunk, HMM=False):
                if piece.isspace():
                    continue
                out.extend([piece] if piece in self._ids else self._resplit(piece))
        return out

    def _resplit(self, piece: str) -> list[str]:
        """Fewest vocabulary words that make up `piece`, or [piece] when there are none."""
        best: list[list[str] | None] = [[]] + [None] * len(piece)
        for end in range(1, len(piece) + 1):
            for start in range(max(0, end - self._max_word), end):
                word = piece[start:end]
                if best[start] is not None and word in self._ids:
                    cand = best[start] + [word]
                    if best[end] is None or len(cand) < len(best[end]):
                        best[end] = cand
        return best[-1] if best[-1] is not None else [piece]


class HFTokenizer(Tokenizer):
    """BPE or unigram subwords from the Hugging Face `tokenizers` library (Metaspace ▁ words)."""

    def __init__(self, hf, kind: str, lang: str | None = None):
        self.kind, self.hf = kind, hf
        vocab = [tok for tok, _ in sorted(hf.get_vocab(with_added_tokens=True).items(), key=lambda kv: kv[1])]
        super().__init__(vocab, lang)

    def tokens(self, text: str) -> list[str]:
        return self.hf.encode(text, add_special_tokens=False).tokens

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        ids = self.hf.encode(text, add_special_tokens=False).ids
        return [BOS_ID, *ids, EOS_ID] if add_special else ids

    def decode(self, ids, skip_special: bool = True) -> str:
        ids = _as_list(ids)
        if skip_special:
            ids = [i for i in ids if i not in (PAD_ID, BOS_ID, EOS_ID)]
        for i in ids:
            self.id_to_token(i)  # range check with our message
        return self.hf.decode(ids, skip_special_tokens=False)

    def to_dict(self) -> dict:
        return {**super().to_dict(), "hf": self.hf.to_str()}


# ---- jieba: one private instance, quiet, dictionary bundled with the package (no network) ----
_JIEBA = None


def _jieba():
    global _JIEBA
    if _JIEBA is None:
        import jieba
        jieba.setLogLevel(logging.WARNING)  # silence "Building prefix dict from the default dictionary ..."
        _JIEBA = jieba.Tokenizer()
        _JIEBA.initialize()
        from .data.zh_en import zh_words
        for w in zh_words():
            _JIEBA.add_word(w)
    return _JIEBA


def _add_words(words: Iterable[str]) -> None:
    tk = _jieba()
    for w in words:
        if w not in tk.FREQ or not tk.FREQ[w]:
            tk.add_word(w)


# ---- building ----
def _as_list(ids) -> list[int]:
    if isinstance(ids, torch.Tensor):
        if ids.dim() != 1:
            raise InputError(f"decode takes one sequence of ids (1-D), got shape {tuple(ids.shape)}")
        return ids.tolist()
    return [int(i) for i in ids]


def _counted_vocab(tokens: Iterable[str], vocab_size: int | None) -> list[str]:
    """Specials, then tokens by descending count (ties: first seen first), capped at vocab_size."""
    counts = Counter(tokens)
    for s in SPECIALS:
        counts.pop(s, None)
    ranked = sorted(counts, key=lambda t: -counts[t])  # sorted() is stable: first-seen order on ties
    if vocab_size is not None:
        ranked = ranked[:max(0, vocab_size - len(SPECIALS))]
    return [*SPECIALS, *ranked]


def _is_segmented(texts: list[str]) -> bool:
    """True when most Chinese texts already separate words by spaces (like the bundled corpus)."""
    zh = [t for t in texts if _CJK.search(t)]
    spaced = sum(bool(re.search(r"[\u3400-\u9fff]\s+[\u3400-\u9fff]", t)) for t in zh)
    return bool(zh) and spaced * 2 >= len(zh)


def _train_hf(kind: str, texts: list[str], vocab_size: int | None):
    from tokenizers import Tokenizer as HF, decoders, models, pre_tokenizers, trainers
    size = vocab_size or 8000
    if kind == "bpe":
        hf = HF(models.BPE(unk_token="<unk>"))
        trainer = trainers.BpeTrainer(vocab_size=size, special_tokens=list(SPECIALS), show_progress=False)
    else:
        hf = HF(models.Unigram())
        trainer = trainers.UnigramTrainer(vocab_size=size, special_tokens=list(SPECIALS), unk_token="<unk>",
                                          show_progress=False)
    # every space becomes ▁ and words keep theirs, so decode restores the text exactly; no ▁ is prepended
    # to a line's first word (the default scheme's extra ▁ is stripped on decode together with a space the
    # line began with: 283 of pydoc's 610 indented test lines came back one space short, and a subword LM
    # was never charged for it — bits per character too low by what the spaces cost)
    hf.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never")
    hf.decoder = decoders.Metaspace(prepend_scheme="never")
    hf.train_from_iterator(texts, trainer)
    return hf


def build_tokenizer(kind: str, texts: Iterable[str], vocab_size: int | None = None,
                    lang: str | None = None) -> Tokenizer:
    """Build a tokenizer of `kind` from `texts` (the training side it will encode)."""
    if kind not in KINDS:
        raise InputError(f"unknown tokenizer kind {kind!r}; choose one of {', '.join(KINDS)}")
    if vocab_size is not None and (not isinstance(vocab_size, int) or vocab_size <= len(SPECIALS)):
        raise InputError(f"vocab_size={vocab_size!r} must be an integer above {len(SPECIALS)} (the special tokens)")
    texts = [t for t in texts if t and t.strip()]
    if not texts:
        raise InputError(f"no text to build a {kind} tokenizer from; give at least one non-empty line")
    if kind in ("bpe", "unigram"):
        return HFTokenizer(_train_hf(kind, texts, vocab_size), kind, lang)
    if kind == "char":
        return CharTokenizer(_counted_vocab((c for t in texts for c in t), vocab_size), lang)
    if kind == "word":
        return WordTokenizer(_counted_vocab((w for t in texts for w in t.split()), vocab_size), lang)
    if _is_segmented(texts):
        words = [w for t in texts for w in t.split()]
    else:
        words = [w for t in texts for w in _jieba().cut(t, HMM=False) if not w.isspace()]
    return JiebaTokenizer(_counted_vocab(words, vocab_size), lang or "zh")


def load_tokenizer(path: str | Path) -> Tokenizer:
    """The tokenizer saved at `path` by `Tokenizer.save`."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{p}: no such tokenizer file; expected a JSON file written by Tokenizer.save") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"{p} is not a tokenizer JSON file ({type(e).__name__}); "
                         "expected one written by Tokenizer.save") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("kind") not in KINDS:
        raise InputError(f"{p} is not a glassformer tokenizer (format {FORMAT!r} with kind in {', '.join(KINDS)})")
    kind, lang = data["kind"], data.get("lang")
    if kind in ("bpe", "unigram"):
        from tokenizers import Tokenizer as HF
        return HFTokenizer(HF.from_str(data["hf"]), kind, lang)
    cls = {"char": CharTokenizer, "word": WordTokenizer, "jieba": JiebaTokenizer}[kind]
    return cls(data["vocab"], lang)


def pad_batch(seqs: Sequence[Sequence[int]], pad_id: int = PAD_ID) -> torch.Tensor:
    """(batch, longest) LongTensor of the id lists, right-padded with pad_id."""
    width = max((len(s) for s in seqs), default=0)
    # one tensor from padded lists: a copy per row was ~1 ms of a 46-ms training step (3 batches of 64 rows)
    rows = [list(s) + [pad_id] * (width - len(s)) for s in seqs]
    return torch.tensor(rows, dtype=torch.long).reshape(len(seqs), width)
