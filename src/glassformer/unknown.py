"""The unknown-token policy shared by translate, generate, eval and inspect (issues 10 and 16).

A piece of user text the model never saw in training is read as <unk>, and one warning names
it (once per piece per command, so a file of 10,000 lines does not repeat it); with
`--strict` the text is refused instead, in one line naming the piece. A piece is what the
tokenizer splits text into: a character, a word, or for BPE/unigram the characters no
subword covers (the form the user typed, never an empty string or a '▁' marker).

Hugging Face tokenizers (MiniLM, a BERT folder) have an [UNK] of their own: `unknown_spans` names
the words behind it from the tokenizer's character offsets, with the same one-line warning
(`SpanWarnings`). The interpretability commands (lens, decompose, patch, ablate-heads) refuse a
piece a glassformer checkpoint never saw instead, in one line naming it (`unseen_line`).
The explorer (`serve`) shows the warning's line above the tokens (`unknown_note`, `Subject.unknown`).
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Callable

from .errors import InputError


def unseen_pieces(tok, text: str) -> list[str]:
    """The pieces of `text` outside the tokenizer's vocabulary, in order of first appearance."""
    if tok.unk_id not in tok.encode(text):
        return []
    found = [t.replace("▁", "") for t in tok.tokens(text) if tok.token_to_id(t) is None]
    # a bare '▁' is the subword models' space marker, not something typed; whitespace the model never
    # saw (a '\r' of Windows line ends, a no-break space pasted from a web page) is named like any piece
    found = [t for t in found if t]
    if not found:  # a subword model: find the characters that encode to <unk> on their own
        found = [c for c in text if c != " " and tok.unk_id in tok.encode(c)]
    return list(dict.fromkeys(found))


def _shown(pieces: list[str]) -> str:
    more = f" and {len(pieces) - 8} more" if len(pieces) > 8 else ""
    return ", ".join(repr(p) for p in pieces[:8]) + more


def _vocab(tok, side: str = "") -> str:
    return f"the model's {side + ' ' if side else ''}vocabulary ({tok.vocab_size} tokens)"


def unknown_note(pieces: list[str], vocabulary: str, unk_token: str) -> str:
    """The warning's words, also what the explorer shows above the tokens:
    "'☃' not in the model's vocabulary (30522 tokens); read as [UNK]"."""
    return f"{_shown(pieces)} not in {vocabulary}; read as {unk_token}"


def unseen_line(tok, text: str, pieces: list[str], side: str = "") -> str:
    """What a refusal says: "'☃' in 'a ☃ b' not in the model's vocabulary (92 tokens)"."""
    return f"{_shown(pieces)} in {text[:60]!r} not in {_vocab(tok, side)}"


class UnknownPolicy:
    """Encode user text: <unk> plus one warning per unseen piece, or refuse under `strict`."""

    def __init__(self, tok, strict: bool = False, side: str = "",
                 warn: Callable[[str], None] | None = None):
        self.tok, self.strict, self.side = tok, strict, side
        self.warn = warn or (lambda line: print(line, file=sys.stderr))
        self.warned: set[str] = set()

    def check(self, text: str) -> None:
        """Warn about (or, under strict, refuse) the unseen pieces of `text`."""
        self.check_all([text])

    def check_all(self, texts) -> None:
        """One warning for the new unseen pieces of all `texts` (a data file), or refuse the first."""
        new: list[str] = []
        for text in texts:
            pieces = unseen_pieces(self.tok, text)
            if pieces and self.strict:
                raise InputError(unseen_line(self.tok, text, pieces, self.side)
                                 + "; without --strict it is read as <unk>")
            new += [p for p in pieces if p not in self.warned and p not in new]
        if new:
            self.warned.update(new)
            self.warn("warning: " + self.note(new))

    def note(self, pieces: list[str]) -> str:
        return unknown_note(pieces, _vocab(self.tok, self.side), "<unk>")

    def encode(self, text: str, add_special: bool = False) -> list[int]:
        self.check(text)
        return self.tok.encode(text, add_special=add_special)


def unknown_spans(text: str, ids, offsets, unk_id: int | None) -> list[str]:
    """The parts of `text` that a tokenizer reporting character offsets (Hugging Face `tokenizers`:
    MiniLM's WordPiece, a BERT folder's tokenizer.json) read as its unknown token, in order of first
    appearance. WordPiece turns a whole word into [UNK] when no piece of its vocabulary covers it."""
    if unk_id is None:
        return []
    return list(dict.fromkeys(text[a:b] for i, (a, b) in zip(ids, offsets) if i == unk_id and b > a))


class SpanWarnings:
    """The warning of `UnknownPolicy` for those tokenizers: once per unseen piece, on one line.
    `unk_id` None: the tokenizer has no unknown token (byte-level BPE), so nothing is ever warned."""

    def __init__(self, vocab_size: int, unk_token: str, unk_id: int | None,
                 warn: Callable[[str], None] | None = None):
        self.vocabulary = f"the model's vocabulary ({vocab_size} tokens)"
        self.unk_token, self.unk_id = unk_token, unk_id
        self.warn = warn or (lambda line: print(line, file=sys.stderr))
        self.warned: set[str] = set()

    def check(self, text: str, ids, offsets) -> None:
        """Warn about the words of `text` that its encoding (`ids`, character `offsets`) read as unknown."""
        new = [p for p in self.pieces(text, ids, offsets) if p not in self.warned]
        if new:
            self.warned.update(new)
            self.warn("warning: " + self.note(new))

    def pieces(self, text: str, ids, offsets) -> list[str]:
        """The words of `text` that its encoding read as unknown (no warning)."""
        return unknown_spans(text, ids, offsets, self.unk_id)

    def note(self, pieces: list[str]) -> str:
        return unknown_note(pieces, self.vocabulary, self.unk_token)


class SpanEncoder:
    """text -> its encoding (`ids`, `tokens`, character `offsets`: a `tokenizers` Encoding), warning once
    per word read as the unknown token (`SpanWarnings`); `unseen` names those words without warning."""

    def __init__(self, encode: Callable[[str], object], warnings: SpanWarnings):
        self.encode, self.warnings = encode, warnings

    def __call__(self, text: str):
        enc = self.encode(text)
        self.warnings.check(text, enc.ids, enc.offsets)
        return enc

    def unseen(self, text: str) -> list[str]:
        enc = self.encode(text)
        return self.warnings.pieces(text, enc.ids, enc.offsets)


def minilm_encoder(tok, max_length: int | None = -1) -> SpanEncoder:
    """MiniLM's WordPiece (`pretrained.WordPieceTokenizer`), trained with [UNK]: read it, say so."""
    return SpanEncoder(lambda text: tok.encoding(text, max_length), SpanWarnings(tok.vocab_size, "[UNK]", tok.unk_id))


def transformers_encoder(hf_tok) -> SpanEncoder:
    """The same for a `transformers` tokenizer. A fast one carries the `tokenizers` Encoding whose
    offsets name the word; a slow one has no offsets, so it warns about nothing."""
    if hf_tok.is_fast:
        encode, unk_id = (lambda text: hf_tok(text).encodings[0]), hf_tok.unk_token_id
    else:
        encode, unk_id = (lambda text: SimpleNamespace(ids=hf_tok(text)["input_ids"], offsets=())), None
    return SpanEncoder(encode, SpanWarnings(len(hf_tok), str(hf_tok.unk_token), unk_id))
