"""Exported tokenizers: `AutoTokenizer.from_pretrained(folder)` encodes as glassformer's tokenizer does.

transformers reads the folder on its own (tokenizer.json + tokenizer_config.json), so it is the
independent reference: every training text gives the same ids and decodes to the same text, for
each kind, including text that spells a special token ("<unk>") and odd whitespace.
"""

import pytest
from transformers import AutoTokenizer

from glassformer.data.zh_en import zh_en_splits
from glassformer.interop.hf_tokenizers import to_fast
from glassformer.tokenize import build_tokenizer

PAIRS = zh_en_splits(seed=0)["train"][:200]
ZH, EN = [s for s, _ in PAIRS], [t for _, t in PAIRS]
ODD = ["The cat eats the fish.  Twice!", "a\tb é 猫 — “quoted”", "  leading space", "write `<unk>` or <pad> here"]


@pytest.mark.parametrize("kind, texts, lm", [
    ("char", EN[:50] + ODD, True),  # a character LM: <bos> in front, as `glassformer generate` feeds it
    ("char", ZH, False),
    ("word", EN + ODD, False),
    ("jieba", ZH, False),  # the bundled corpus is segmented by spaces: jieba's words are kept as they are
    ("bpe", EN + ODD, False),
    ("bpe", EN + ODD, True),  # a subword LM (`--task lm --tokenizer bpe`)
    ("unigram", EN + ODD, False),
])
def test_autotokenizer_gives_our_ids(kind, texts, lm, tmp_path):
    ours = build_tokenizer(kind, texts, vocab_size=300 if kind in ("bpe", "unigram") else None)
    to_fast(ours, lm).save_pretrained(tmp_path)
    theirs = AutoTokenizer.from_pretrained(tmp_path)
    for text in texts:
        ids = ([ours.bos_id] if lm else []) + ours.encode(text)
        assert theirs(text).input_ids == ids, text
        words = [i for i in ids if i not in (0, 1, 2)]  # ours drops pad/bos/eos but keeps <unk>
        assert theirs.decode(words, skip_special_tokens=False) == ours.decode(words), text
    assert (theirs.pad_token_id, theirs.bos_token_id, theirs.eos_token_id, theirs.unk_token_id) == (0, 1, 2, 3)


def test_jieba_folder_says_how_to_segment(tmp_path):
    to_fast(build_tokenizer("jieba", ZH)).save_pretrained(tmp_path)
    assert "jieba" in (tmp_path / "tokenizer_config.json").read_text(encoding="utf-8")
