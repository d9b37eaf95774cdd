"""Write the real-data benchmark's files from packaged data (nothing downloads).

    python bench/real/prepare.py runs/real/data            (every dataset of datasets.json)
    python bench/real/prepare.py runs/real/data kana lm-pydoc   (only those)

Every dataset is a seeded, deterministic split of what a package ships: the same files on every
machine with the same package versions. A transduction is NAME-train.tsv / NAME-test.tsv
(source<TAB>target); a character LM is X-train.txt / X-test.txt for the dataset lm-X (one text
line per line). `glassformer train` holds its own validation split out of the training file.
Which datasets may be used to choose the recipe (development) and which never (evaluation) is
fixed in datasets.json beside this file.

Development datasets (issue 10; their files are unchanged):
- g2p: CMUdict word<TAB>phonemes (stress removed), a seeded split with 12,000 test words (issue 10
  asks for >= 10,000); training on each word's first pronunciation, the test file holding every
  pronunciation of its words, one line each (about 6% of them have two or more): a word is right
  if it matches any, as G2P papers score CMUdict;
- pinyin: pypinyin's phrase dictionary, phrase<TAB>pinyin syllables, 5,000 test phrases;
- lm-en, lm-zh (en-*.txt, zh-*.txt): Debian fortunes, split by document (10% of documents held
  out, seed 0); since issue 32 the 14 held-out English documents that fortunes also has elsewhere
  word for word are left out of the test file (5,396 test lines instead of 5,431).

Evaluation datasets (issue 32; test sets of at most 3,000 items):
- kana: Japanese word -> hiragana reading, from pykakasi's kanwa dictionary (words of 2-12
  characters with an unconditional reading, the first reading); a seeded sample of 50,000 words;
- num-en: a number in digits -> its English words (num2words), 30,000 distinct numbers of 1-9
  digits (the digit count uniform, then the number uniform);
- date-fr: an ISO date -> its French long form (babel, CLDR: "17 mai 2023"), 30,000 distinct dates
  of 1600-2099;
- lm-pydoc: the help topics of Python's own reference manual (pydoc_data.topics), paragraphs as
  documents (each distinct one once: topics repeat paragraphs), 10% of them held out;
- lm-jargon: The Jargon File (Debian jargon-text), its text rendering without the box-drawn
  tables, whitespace inside a line collapsed, paragraphs as documents, 10% held out;
- lm-wordnet: WordNet 3.0 (Debian wordnet-base), one "headword: definition" line per synset, a
  seeded sample of 25,000 synsets, 10% of them held out.
"""

from __future__ import annotations

import datetime
import functools
import gzip
import json
import random
import re
from pathlib import Path

from glassformer.data.corpora import cmudict_pairs, load_corpus, pinyin_pairs, split_documents
from glassformer.train.error_rates import references_by_source

HERE = Path(__file__).resolve().parent
SPEC = json.loads((HERE / "datasets.json").read_text(encoding="utf-8"))
NAMES = SPEC["development"] + SPEC["evaluation"]

G2P_TEST = 12_000
PINYIN_TEST = 5_000
TEST = 3_000  # test items of every evaluation transduction
KANA_WORDS, NUMBERS, DATES, WORDNET_SYNSETS = 50_000, 30_000, 30_000, 25_000
JARGON = Path("/usr/share/doc/jargon-text/jargon.txt.gz")
WORDNET = Path("/usr/share/wordnet")


def kind(name: str) -> str:
    return SPEC["datasets"][name]["kind"]


def files(name: str, root: str | Path) -> tuple[Path, Path]:
    """(train file, test file) of dataset `name` under `root`."""
    root = Path(root)
    if kind(name) == "lm":
        stem = name.removeprefix("lm-")
        return root / f"{stem}-train.txt", root / f"{stem}-test.txt"
    return root / f"{name}-train.tsv", root / f"{name}-test.tsv"


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def doc_lines(docs: list[str]) -> list[str]:
    return [ln.rstrip() for d in docs for ln in d.splitlines() if ln.strip()]


def split_pairs(pairs: list[tuple[str, str]], n_test: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """Train and test TSV lines of (source, target) pairs with unique sources, a seeded split."""
    pairs = sorted(pairs)
    random.Random(seed).shuffle(pairs)
    return [f"{s}\t{t}" for s, t in pairs[n_test:]], [f"{s}\t{t}" for s, t in pairs[:n_test]]


# ---- the development datasets (issue 10) ----
def g2p() -> tuple[list[str], list[str]]:
    readings = references_by_source(cmudict_pairs(variants=True))  # word -> its pronunciations, first first
    pairs = [(w, prons[0]) for w, prons in readings.items()]
    random.Random(0).shuffle(pairs)
    test = [f"{w}\t{p}" for w, _ in pairs[:G2P_TEST] for p in readings[w]]
    return [f"{w}\t{p}" for w, p in pairs[G2P_TEST:]], test


def pinyin() -> tuple[list[str], list[str]]:
    pairs = pinyin_pairs()
    random.Random(0).shuffle(pairs)
    return [f"{w}\t{p}" for w, p in pairs[PINYIN_TEST:]], [f"{w}\t{p}" for w, p in pairs[:PINYIN_TEST]]


def fortunes_docs(lang: str) -> tuple[list[str], list[str]]:
    """Issue 10's split of the fortunes; a held-out document that the package also has elsewhere,
    word for word (14 in English, none in Chinese), is left out of the test documents."""
    train, test = split_documents(load_corpus(f"fortunes-{lang}"), valid_fraction=0.1, seed=0)
    seen = set(train)
    return train, [d for d in test if d not in seen]


# ---- the evaluation datasets (issue 32) ----
_HIRAGANA = re.compile(r"[\u3041-\u309f\u30fc]+")
_WORD_JA = re.compile(r"[\u3041-\u30ff\u3400-\u9fff\uf900-\ufaff々〆ヶ]+")


@functools.lru_cache(maxsize=1)
def kana_pairs() -> tuple[tuple[str, str], ...]:
    """(word, hiragana reading) for the words of pykakasi's kanwa dictionary (its own pickle)."""
    import pickle

    import pykakasi
    path = Path(pykakasi.__file__).parent / "data" / "kanwadict4.db"
    with path.open("rb") as f:
        table = pickle.load(f)  # first character's code point -> {word: [(reading, okurigana class or None)]}
    pairs = {}
    for _, words in sorted(table.items()):
        for word, readings in sorted(words.items()):
            reading, cond = readings[0]
            if cond is None and 2 <= len(word) <= 12 and _WORD_JA.fullmatch(word) and _HIRAGANA.fullmatch(reading):
                pairs.setdefault(word, reading)
    return tuple(sorted(pairs.items()))


def kana_char_readings() -> dict[str, str]:
    """Each single character's first unconditional reading in pykakasi's dictionary (a baseline's
    "first dictionary reading"; the dataset itself holds words of 2 or more characters)."""
    import pickle

    import pykakasi
    with (Path(pykakasi.__file__).parent / "data" / "kanwadict4.db").open("rb") as f:
        table = pickle.load(f)
    out = {}
    for _, words in sorted(table.items()):
        for word, readings in words.items():
            plain = [r for r, cond in readings if cond is None and _HIRAGANA.fullmatch(r)]
            if len(word) == 1 and plain:
                out.setdefault(word, plain[0])
    return out


def pinyin_char_readings() -> dict[str, str]:
    """Each character's first reading in pypinyin's character dictionary."""
    from pypinyin.pinyin_dict import pinyin_dict
    return {chr(cp): readings.split(",")[0] for cp, readings in pinyin_dict.items()}


CHAR_READINGS = {"kana": kana_char_readings, "pinyin": pinyin_char_readings}


def kana() -> tuple[list[str], list[str]]:
    pairs = kana_pairs()
    pairs = random.Random(0).sample(pairs, min(KANA_WORDS, len(pairs)))
    return split_pairs(pairs, TEST)


def number_pairs(n: int = NUMBERS, seed: int = 0) -> list[tuple[str, str]]:
    from num2words import num2words
    rng, seen = random.Random(seed), {}
    while len(seen) < n:
        digits = rng.randint(1, 9)
        x = rng.randrange(0 if digits == 1 else 10 ** (digits - 1), 10 ** digits)
        seen.setdefault(x, num2words(x, lang="en"))
    return [(str(x), words) for x, words in seen.items()]


def num_en() -> tuple[list[str], list[str]]:
    return split_pairs(number_pairs(), TEST)


def date_pairs(n: int = DATES, seed: int = 0) -> list[tuple[str, str]]:
    from babel.dates import format_date
    first, last = datetime.date(1600, 1, 1), datetime.date(2099, 12, 31)
    days = random.Random(seed).sample(range((last - first).days + 1), n)
    dates = [first + datetime.timedelta(days=d) for d in days]
    return [(d.isoformat(), format_date(d, format="long", locale="fr")) for d in dates]


def date_fr() -> tuple[list[str], list[str]]:
    return split_pairs(date_pairs(), TEST)


def paragraphs(text: str) -> list[str]:
    return [p.strip("\n") for p in re.split(r"\n\s*\n", text) if p.strip()]


def pydoc_documents() -> list[str]:
    from pydoc_data.topics import topics
    return [p for key in sorted(topics) for p in paragraphs(topics[key])]


_BOX = re.compile(r"[\u2500-\u257f]")


def jargon_documents() -> list[str]:
    if not JARGON.is_file():
        raise FileNotFoundError(f"{JARGON} is missing: apt-get install jargon-text")
    text = gzip.decompress(JARGON.read_bytes()).decode("utf-8")
    lines = ["" if _BOX.search(ln) else " ".join(ln.split()) for ln in text.splitlines()]
    return paragraphs("\n".join(lines))


@functools.lru_cache(maxsize=1)
def wordnet_lines() -> tuple[str, ...]:
    """'headword: definition' for every synset of WordNet 3.0's data files, in file order."""
    if not (WORDNET / "data.noun").is_file():
        raise FileNotFoundError(f"{WORDNET / 'data.noun'} is missing: apt-get install wordnet-base")
    out = []
    for pos in ("noun", "verb", "adj", "adv"):
        for ln in (WORDNET / f"data.{pos}").open(encoding="utf-8", errors="replace"):
            if ln.startswith("  ") or "|" not in ln:
                continue  # the licence header
            fields, gloss = ln.split("|", 1)
            head = fields.split()[4].replace("_", " ")
            head = re.sub(r"\([a-z]+\)$", "", head)  # adjective markers: (a), (p), (ip)
            out.append(f"{head}: {' '.join(gloss.split())}")
    return tuple(out)


def lm_split(docs: list[str]) -> tuple[list[str], list[str]]:
    """Train and test documents: each distinct document once (its first place; the manual's
    topics repeat whole paragraphs), 10% of them held out (seed 0)."""
    return split_documents(list(dict.fromkeys(docs)), valid_fraction=0.1, seed=0)


LM_DOCS = {  # an LM dataset's (train, test) documents
    "lm-en": lambda: fortunes_docs("en"), "lm-zh": lambda: fortunes_docs("zh"),
    "lm-pydoc": lambda: lm_split(pydoc_documents()),
    "lm-jargon": lambda: lm_split(jargon_documents()),
    "lm-wordnet": lambda: lm_split(random.Random(0).sample(wordnet_lines(), WORDNET_SYNSETS)),
}


def _lines_of(name: str):
    def lines() -> tuple[list[str], list[str]]:
        train, test = LM_DOCS[name]()
        return doc_lines(train), doc_lines(test)
    return lines


BUILDERS = {"g2p": g2p, "pinyin": pinyin, "kana": kana, "num-en": num_en, "date-fr": date_fr,
            **{name: _lines_of(name) for name in LM_DOCS}}


def build(name: str, out: str | Path) -> tuple[Path, Path]:
    """Write dataset `name`'s train and test files under `out`; returns their paths."""
    train, test = BUILDERS[name]()
    train_path, test_path = files(name, out)
    train_path.parent.mkdir(parents=True, exist_ok=True)
    write_lines(train_path, train)
    write_lines(test_path, test)
    return train_path, test_path


def main(out: str, names: list[str]) -> None:
    for name in names or NAMES:
        for f in build(name, out):
            n = sum(1 for _ in f.open(encoding="utf-8"))
            print(f"{name}: {f}: {n:,} lines, {f.stat().st_size:,} bytes")


def cli(argv: list[str] | None = None) -> None:
    import argparse
    ap = argparse.ArgumentParser(description="Write the real-data benchmark's files from packaged data.")
    ap.add_argument("out", nargs="?", default="runs/real/data", help="the folder to write (default runs/real/data)")
    ap.add_argument("names", nargs="*", help=f"datasets to write (default every one: {', '.join(NAMES)})")
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in NAMES]
    if unknown:
        ap.error(f"unknown dataset {unknown[0]!r}; choose from {', '.join(NAMES)}")
    main(args.out, args.names)


if __name__ == "__main__":
    cli()
