"""Data: the zh→en grammar and its splits, the algorithmic tasks, and the user-file readers."""

import pytest

from glassformer.data import files, tasks, zh_en
from glassformer.errors import InputError

SPLITS = zh_en.zh_en_splits(seed=0)


def _core(src):
    """(subject head, verb, object head) of a source sentence, parsed by hand for the test."""
    words = src.split()
    verb = next(i for i, w in enumerate(words) if w in zh_en.VERBS)
    subj = [w for w in words[:verb] if w != "不"]
    return subj[-1], words[verb], words[verb + 1:][-1]


# ---- the grammar ----
@pytest.mark.parametrize("src, tgt", [
    ("我 爱 你", "I love you"),
    ("你 爱 我", "you love me"),
    ("猫 吃 鱼", "the cat eats the fish"),
    ("他 追 她", "he chases her"),
    ("她 看 他", "she sees him"),
    ("我们 喜欢 他们", "we like them"),
    ("他们 咬 我们", "they bite us"),
    ("大 猫 不 追 小 狗", "the big cat does not chase the small dog"),
    ("我 不 喜欢 黑 老鼠", "I do not like the black mouse"),
    ("孩子 不 看 鸟", "the child does not see the bird"),
    ("白 鸟 咬 你", "the white bird bites you"),
])
def test_reference_translations(src, tgt):
    assert zh_en.translate(src) == tgt


def test_lexicon_has_the_issue_words():
    lex = zh_en.LEXICON
    assert lex["pronouns"]["我"][:2] == ("I", "me") and lex["pronouns"]["他们"][:2] == ("they", "them")
    assert set(lex["nouns"]) == {"猫", "狗", "鱼", "鸟", "老鼠", "孩子"}
    assert {v: forms[0] for v, forms in lex["verbs"].items()} == {
        "吃": "eat", "追": "chase", "爱": "love", "看": "see", "喜欢": "like", "咬": "bite"}


def test_splits_are_deterministic_for_a_seed():
    assert zh_en.zh_en_splits(seed=0) == SPLITS
    assert zh_en.zh_en_splits(seed=1) != SPLITS
    assert len(zh_en.zh_en_splits(seed=0, n_train=1000)["train"]) == 1000


def test_every_pair_is_the_grammar_translation():
    for split in SPLITS.values():
        for src, tgt in split:
            assert tgt == zh_en.translate(src)
            assert src == " ".join(src.split()) and tgt == " ".join(tgt.split())


def test_held_out_sentences_never_appear_in_training():
    train_src = {s for s, _ in SPLITS["train"]}
    train_cores = {_core(s) for s in train_src}
    for name in ("valid", "test"):
        for src, _ in SPLITS[name]:
            assert src not in train_src
            a, v, b = _core(src)
            assert (a, v, b) not in train_cores and (b, v, a) not in train_cores
    assert not {s for s, _ in SPLITS["valid"]} & {s for s, _ in SPLITS["test"]}


def test_test_split_is_role_reversed_pairs():
    test = SPLITS["test"]
    pairs = zh_en.role_reversed_pairs(test)
    assert 2 * len(pairs) == len(test) == len({s for s, _ in test})  # every sentence has its mirror
    for (s1, t1), (s2, t2) in pairs:
        a, v, b = _core(s1)
        assert _core(s2) == (b, v, a) and t1 != t2
    srcs = {s for s, _ in test}
    assert {"猫 追 狗", "狗 追 猫"} <= srcs
    assert len(zh_en.role_reversed_pairs(SPLITS["valid"])) * 2 == len(SPLITS["valid"])


def test_held_out_pairings_are_learnable_by_composition():
    """Each held-out A and B appears with that verb, as subject and as object, with other partners."""
    train_cores = {_core(s) for s, _ in SPLITS["train"]}
    for src, _ in SPLITS["test"] + SPLITS["valid"]:
        a, v, b = _core(src)
        assert any(s == a and vv == v and o != b for s, vv, o in train_cores)
        assert any(o == a and vv == v and s != b for s, vv, o in train_cores)
    train_words = {w for s, _ in SPLITS["train"] for w in s.split()}
    assert train_words == set(zh_en.zh_words())
    assert {"猫 吃 鱼", "我 爱 你", "你 爱 我"} <= {s for s, _ in SPLITS["train"]}


# ---- algorithmic tasks ----
def test_tasks_compute_their_answers():
    for src, tgt in tasks.make_task("sort", 50, seed=3, min_len=2, max_len=6):
        xs = src.split()
        assert 2 <= len(xs) <= 6 and tgt.split() == sorted(xs)
    for src, tgt in tasks.make_task("reverse", 20, seed=3):
        assert tgt.split() == src.split()[::-1]
    for src, tgt in tasks.make_task("copy", 20, seed=3):
        assert tgt == src
    for src, tgt in tasks.make_task("add", 50, seed=3, max_len=4):
        a, b = src.replace(" ", "").split("+")
        assert int(tgt.replace(" ", "")) == int(a) + int(b)
        assert tgt == " ".join(tgt.replace(" ", ""))
    assert tasks.make_task("add", 10, seed=1) == tasks.make_task("add", 10, seed=1)
    assert tasks.make_task("add", 10, seed=1) != tasks.make_task("add", 10, seed=2)


def test_task_errors_are_one_line():
    with pytest.raises(InputError, match="unknown task 'divide'; choose one of copy, reverse, sort, add"):
        tasks.make_task("divide", 3)
    with pytest.raises(InputError, match="min_len=5, max_len=2"):
        tasks.make_task("copy", 3, min_len=5, max_len=2)


# ---- user files ----
def _write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


def test_read_tsv_reads_pairs(tmp_path):
    p = _write(tmp_path, "ok.tsv", "\ufeff猫 吃 鱼\tthe cat eats the fish\r\n\n我 爱 你\tI love you".encode())
    assert list(files.read_tsv(p)) == [("猫 吃 鱼", "the cat eats the fish"), ("我 爱 你", "I love you")]


@pytest.mark.parametrize("name, data, message", [
    ("bin.tsv", b"a\tb\n\x00\x01\x02\tz\n", r"bin.tsv line 2: binary data"),
    ("empty.tsv", b"", r"empty.tsv is empty; expected one 'source<TAB>target' pair per line"),
    ("blank.tsv", b"\n\n  \n", r"blank.tsv is empty"),
    ("one.tsv", "猫 吃 鱼\tthe cat eats the fish\n只有一列\n".encode(), r"one.tsv line 2: no tab \(one column\)"),
    ("three.tsv", b"a\tb\tc\n", r"three.tsv line 1: 3 columns"),
    ("latin1.tsv", "ok\tfine\nna\u00efve\tcaf\u00e9\n".encode("latin-1"), r"latin1.tsv line 2: not valid UTF-8"),
    ("notgt.tsv", b"a\tb\nc\t  \n", r"notgt.tsv line 2: empty target"),
])
def test_malformed_tsv_is_refused_with_file_and_line(tmp_path, name, data, message):
    p = _write(tmp_path, name, data)
    with pytest.raises(InputError, match=message) as err:
        list(files.read_tsv(p))
    assert "\n" not in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="nope.tsv: no such file"):
        list(files.read_tsv(tmp_path / "nope.tsv"))


def test_read_tsv_streams(tmp_path):
    """The first pair comes out before the reader has seen the rest of the file."""
    p = tmp_path / "big.tsv"
    with p.open("w", encoding="utf-8") as f:
        f.write("猫 吃 鱼\tthe cat eats the fish\n")
        f.write("我 爱 你\tI love you\n" * 300_000)  # ~7 MB
        f.write("broken line without a tab\n")
    reader = files.read_tsv(p)
    assert next(reader) == ("猫 吃 鱼", "the cat eats the fish")  # no error yet: not read that far
    with pytest.raises(InputError, match=r"big.tsv line 300002: no tab"):
        for _ in reader:
            pass


def test_read_text(tmp_path):
    p = _write(tmp_path, "lm.txt", "the cat eats the fish\n\nI love you\n".encode())
    assert list(files.read_text(p)) == ["the cat eats the fish", "I love you"]
    with pytest.raises(InputError, match="e.txt is empty"):
        list(files.read_text(_write(tmp_path, "e.txt", b"")))
    with pytest.raises(InputError, match="b.txt line 1: binary data"):
        list(files.read_text(_write(tmp_path, "b.txt", b"\x89PNG\x00\x00")))
