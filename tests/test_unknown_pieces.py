"""unknown.unseen_pieces: whenever the tokenizer (the `tokenizers` library for BPE/unigram) reads
part of a text as <unk>, the warning names a piece, and each piece it names is itself read as
<unk>. Whitespace the model never saw counts: a '\\r' of Windows line ends, a no-break space
pasted from a web page, a newline inside a one-line prompt (these were read as <unk> silently).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glassformer.data.zh_en import zh_en_splits
from glassformer.tokenize import build_tokenizer
from glassformer.unknown import UnknownPolicy, unseen_pieces

EN = [t for _, t in zh_en_splits(seed=0, n_train=600)["train"]]  # English sentences: letters, spaces, punctuation; no \r, \n, \xa0
ALPHABET = "abc xyz.\t\r\n\xa0☃é"
TOKS = {kind: build_tokenizer(kind, EN, vocab_size=120 if kind in ("bpe", "unigram") else None)
        for kind in ("char", "word", "bpe", "unigram")}


@pytest.mark.parametrize("kind", sorted(TOKS))
@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet=ALPHABET, min_size=1, max_size=12))
def test_every_unk_is_named_and_every_name_is_unk(kind, text):
    tok = TOKS[kind]
    pieces = unseen_pieces(tok, text)
    assert bool(pieces) == (tok.unk_id in tok.encode(text))
    for piece in pieces:
        assert piece and tok.unk_id in tok.encode(piece)


@pytest.mark.parametrize("kind", ["char", "bpe", "unigram"])
def test_windows_line_end_and_no_break_space_are_warned(kind):
    lines: list[str] = []
    policy = UnknownPolicy(TOKS[kind], warn=lines.append)
    policy.encode("the cat\r\nsat\xa0down")
    assert len(lines) == 1 and "read as <unk>" in lines[0]
    assert "\\r" in lines[0] and "\\xa0" in lines[0]  # shown as repr, on one line
