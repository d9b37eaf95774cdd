"""Tokenizers: special ids, round trips, save/load, jieba segmentation, HF-trained subwords."""

import json
import pytest
import torch
from tokenizers import Tokenizer as HFTokenizer

from glassformer.data.zh_en import zh_en_splits
from glassformer.errors import InputError
from glassformer.tokenize import KINDS, build_tokenizer, load_tokenizer, pad_batch

TRAIN = zh_en_splits(seed=0, n_train=600)["train"]
ZH = [s for s, _ in TRAIN]
EN = [t for _, t in TRAIN]


@pytest.fixture(scope="module")
def zh_tok():
    return build_tokenizer("jieba", ZH)


@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_save_and_load(kind, tmp_path):
    texts = ZH if kind == "jieba" else EN
    tok = build_tokenizer(kind, texts, vocab_size=120 if kind in ("bpe", "unigram") else None)
    assert [tok.id_to_token(i) for i in range(4)] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert (tok.pad_id, tok.bos_id, tok.eos_id, tok.unk_id) == (0, 1, 2, 3)
    sample = texts[:20]
    for text in sample:
        ids = tok.encode(text, add_special=True)
        assert ids[0] == 1 and ids[-1] == 2 and 3 not in ids
        assert tok.decode(ids) == text
        assert tok.decode(torch.tensor(ids)) == text
        assert tok.decode(ids, skip_special=False).startswith("<bos>")
    path = tmp_path / "tok.json"
    tok.save(path)
    back = load_tokenizer(path)
    assert type(back) is type(tok) and back.vocab == tok.vocab and back.vocab_size == tok.vocab_size
    assert [back.encode(t) for t in sample] == [tok.encode(t) for t in sample]
    assert json.loads(path.read_text(encoding="utf-8"))["kind"] == kind


def test_word_vocab_is_ranked_by_count_and_capped():
    tok = build_tokenizer("word", ["b a a c", "a b d"], vocab_size=6)
    assert tok.vocab == ["<pad>", "<bos>", "<eos>", "<unk>", "a", "b"]  # a:3, b:2 (c, d cut)
    assert tok.encode("a c b") == [4, 3, 5]
    assert tok.decode([4, 3, 5]) == "a <unk> b"


def test_char_tokenizer_keeps_spaces():
    tok = build_tokenizer("char", ["ab ba"])
    assert tok.tokens("ab a") == ["a", "b", " ", "a"]
    assert tok.decode(tok.encode("ba ab")) == "ba ab"


def test_jieba_segments_unsegmented_chinese(zh_tok):
    assert zh_tok.encode("猫吃鱼") == zh_tok.encode("猫 吃 鱼")
    assert zh_tok.tokens("猫吃鱼") == ["猫", "吃", "鱼"]
    # jieba's own dictionary has 我爱你 and 黑猫 as single words; our vocabulary splits them back
    assert zh_tok.tokens("我爱你") == ["我", "爱", "你"]
    assert zh_tok.tokens("黑猫不追白狗") == ["黑", "猫", "不", "追", "白", "狗"]
    assert zh_tok.tokens("他们喜欢老鼠") == ["他们", "喜欢", "老鼠"]
    assert zh_tok.tokens("我们看孩子") == ["我们", "看", "孩子"]
    assert 3 not in zh_tok.encode("大猫不吃小鱼")
    assert zh_tok.encode("狐狸吃鱼")[0] == zh_tok.unk_id  # a word outside the vocabulary


def test_jieba_on_unsegmented_corpus():
    tok = build_tokenizer("jieba", ["猫吃鱼", "狗追猫", "我们喜欢老鼠"])
    assert set(tok.vocab[4:]) == {"猫", "吃", "鱼", "狗", "追", "我们", "喜欢", "老鼠"}


def test_jieba_is_quiet(monkeypatch, capfd):
    """jieba logs "Building prefix dict ..." to stderr when it loads; building a tokenizer must not."""
    import glassformer.tokenize as tokenize
    monkeypatch.setattr(tokenize, "_JIEBA", None)  # load jieba's dictionary again, as a fresh process would
    tok = build_tokenizer("jieba", ["猫吃鱼"])
    assert tok.tokens("鱼吃猫") == ["鱼", "吃", "猫"]
    captured = capfd.readouterr()
    assert captured.err == "" and captured.out == ""


@pytest.mark.parametrize("kind", ["bpe", "unigram"])
def test_subword_tokenizers_match_the_library(kind, tmp_path):
    tok = build_tokenizer(kind, EN, vocab_size=60)
    assert tok.vocab_size <= 60
    path = tmp_path / "t.json"
    tok.save(path)
    hf = HFTokenizer.from_str(json.loads(path.read_text(encoding="utf-8"))["hf"])
    text = "the small cat chases the white mouse"
    assert tok.encode(text) == hf.encode(text).ids and tok.tokens(text) == hf.encode(text).tokens
    assert tok.decode(tok.encode("the cat chases zebras")) == "the cat chases <unk>ebras"


def test_errors_are_one_line(tmp_path):
    with pytest.raises(InputError, match="unknown tokenizer kind 'sentencepiece'; choose one of char, word, jieba"):
        build_tokenizer("sentencepiece", ["a"])
    with pytest.raises(InputError, match="no text to build a word tokenizer"):
        build_tokenizer("word", ["", "  "])
    with pytest.raises(InputError, match="vocab_size=2 must be an integer above 4"):
        build_tokenizer("word", ["a"], vocab_size=2)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="bad.json is not a tokenizer JSON file"):
        load_tokenizer(bad)
    with pytest.raises(InputError, match="missing.json: no such tokenizer file"):
        load_tokenizer(tmp_path / "missing.json")
    with pytest.raises(InputError, match=r"token id 99 is outside the vocabulary \[0, 6\)"):
        build_tokenizer("word", ["a b"]).decode([99])


def test_pad_batch():
    assert pad_batch([[5, 6, 7], [8]]).tolist() == [[5, 6, 7], [8, 0, 0]]
    # tuples, an empty row, a row of nothing but empties, no rows at all, another pad id
    assert pad_batch([(1, 2), (), [3]], pad_id=9).tolist() == [[1, 2], [9, 9], [3, 9]]
    assert pad_batch([[], []]).shape == (2, 0) and pad_batch([]).shape == (0, 0)
    assert pad_batch([[2**40]]).dtype == torch.long and pad_batch([[2**40]]).item() == 2**40


@pytest.mark.parametrize("kind", ["bpe", "unigram", "char"])
def test_subwords_give_back_every_text_of_their_alphabet(kind):
    """decode(encode(text)) == text for any text of characters seen in training: leading spaces, runs of
    spaces, a trailing space — what indented code has. A subword LM scored in bits per character must
    be charged for every character; the default Metaspace scheme dropped a line's first space."""
    from hypothesis import given, settings, strategies as st

    lines = ["def f(x):", "    return x  # two spaces", "  if a:", "class A: pass", "print(f(1)) "]
    tok = build_tokenizer(kind, lines, vocab_size=60 if kind != "char" else None)
    alphabet = sorted(set("".join(lines)))

    @settings(max_examples=300, deadline=None)
    @given(st.text(alphabet=alphabet, max_size=40))
    def round_trip(text):
        assert tok.decode(tok.encode(text)) == text

    round_trip()
    for line in ["    return x", " x", "x  ", "   "]:  # the cases the default scheme lost, named
        assert tok.decode(tok.encode(line)) == line
