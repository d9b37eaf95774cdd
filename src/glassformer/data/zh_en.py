"""The bundled zh→en corpus: a small, regular grammar where word order decides who does what.

Seed 000 §3.1: Chinese (like English) tells subject from object almost only by word order —
猫 追 狗 is not 狗 追 猫. A model blind to position cannot translate this language, so the
held-out "test" split is built from *role-reversed pairs*: for a set of (A, verb, B) triples,
both A-verb-B and B-verb-A are held out, while A and B each appear in training as subject and
as object of that verb with other partners. Every word and every (word, role) combination is
seen in training; only the specific pairings are new. Exact match on "test" therefore measures
whether the model reads word order, not whether it memorised sentences. Measured: a 2-layer
d_model=64 translator reaches 100% on "test" with sinusoidal positions and about 45% with
pe="none" (it then swaps subject and object: 猫 追 狗 → "the dog chases the cat").

Grammar (source words separated by single spaces, as the contract in notes/contracts.md says):

    sentence := NP [不] VERB NP
    NP       := PRONOUN | [ADJ] NOUN

English: SVO, "the" before nouns, third-person singular -s ("the cat eats"), negation with
do/does not ("he does not like the fish"), pronoun case by position (I/me, he/him, ...).
"""

from __future__ import annotations

import itertools
import random

# ---- the lexicon, as data (docs and tests read it) ----
# pronoun: (subject form, object form, third person singular?)
PRONOUNS: dict[str, tuple[str, str, bool]] = {
    "我": ("I", "me", False),
    "你": ("you", "you", False),
    "他": ("he", "him", True),
    "她": ("she", "her", True),
    "我们": ("we", "us", False),
    "他们": ("they", "them", False),
}
NOUNS: dict[str, str] = {"猫": "cat", "狗": "dog", "鱼": "fish", "鸟": "bird", "老鼠": "mouse", "孩子": "child"}
# verb: (base form, third person singular form)
VERBS: dict[str, tuple[str, str]] = {
    "吃": ("eat", "eats"), "追": ("chase", "chases"), "爱": ("love", "loves"),
    "看": ("see", "sees"), "喜欢": ("like", "likes"), "咬": ("bite", "bites"),
}
ADJECTIVES: dict[str, str] = {"大": "big", "小": "small", "黑": "black", "白": "white"}
NEGATION = "不"

LEXICON: dict[str, dict] = {
    "pronouns": PRONOUNS, "nouns": NOUNS, "verbs": VERBS,
    "adjectives": ADJECTIVES, "negation": {NEGATION: ("do not", "does not")},
}
HEADS = list(PRONOUNS) + list(NOUNS)  # words that can be subject or object


def zh_words() -> list[str]:
    """Every Chinese word of the lexicon (what the jieba tokenizer adds to its dictionary)."""
    return [*PRONOUNS, *NOUNS, *VERBS, *ADJECTIVES, NEGATION]


# ---- the reference translator (the grammar's English side) ----
def _np_en(np: tuple[str, ...], as_object: bool) -> tuple[str, bool]:
    """English for a noun phrase, and whether it is third person singular."""
    head = np[-1]
    if head in PRONOUNS:
        subj, obj, third = PRONOUNS[head]
        return (obj if as_object else subj), third
    adj = [ADJECTIVES[a] for a in np[:-1]]
    return " ".join(["the", *adj, NOUNS[head]]), True


def parse(src: str) -> tuple[tuple[str, ...], bool, str, tuple[str, ...]]:
    """(subject NP, negated?, verb, object NP) of a source sentence of the grammar."""
    words = src.split()
    verb_at = [i for i, w in enumerate(words) if w in VERBS]
    if len(verb_at) != 1:
        raise ValueError(f"not a sentence of the zh-en grammar (one verb expected): {src!r}")
    i = verb_at[0]
    neg = i > 0 and words[i - 1] == NEGATION
    subj = tuple(words[:i - 1] if neg else words[:i])
    obj = tuple(words[i + 1:])
    for np in (subj, obj):
        if not np or np[-1] not in HEADS or any(a not in ADJECTIVES for a in np[:-1]) or \
                (np[-1] in PRONOUNS and len(np) > 1) or len(np) > 2:
            raise ValueError(f"not a sentence of the zh-en grammar (bad noun phrase {' '.join(np)!r}): {src!r}")
    return subj, neg, words[i], obj


def translate(src: str) -> str:
    """The English the grammar pairs with `src`: translate("我 爱 你") == "I love you"."""
    subj, neg, verb, obj = parse(src)
    s, third = _np_en(subj, as_object=False)
    o, _ = _np_en(obj, as_object=True)
    base, third_form = VERBS[verb]
    if neg:
        v = ("does not " if third else "do not ") + base
    else:
        v = third_form if third else base
    return f"{s} {v} {o}"


def _sentence(subj: tuple[str, ...], neg: bool, verb: str, obj: tuple[str, ...]) -> str:
    return " ".join([*subj, *([NEGATION] if neg else []), verb, *obj])


def _noun_phrases(head: str) -> list[tuple[str, ...]]:
    if head in PRONOUNS:
        return [(head,)]
    return [(head,)] + [(a, head) for a in ADJECTIVES]


def _variants(a: str, verb: str, b: str) -> list[tuple[tuple[str, ...], bool, str, tuple[str, ...]]]:
    """Every sentence with subject head a, verb, object head b (adjectives and negation varied)."""
    return [(s, neg, verb, o) for s in _noun_phrases(a) for o in _noun_phrases(b) for neg in (False, True)]


# ---- splits ----
# Sentences the demo and the docs use stay in training; 猫 追 狗 / 狗 追 猫 is always held out.
_KEEP_IN_TRAIN = {("猫", "吃", "鱼"), ("我", "爱", "你"), ("你", "爱", "我")}
_ALWAYS_TEST = ("猫", "追", "狗")
N_TEST_PAIRS, N_VALID_PAIRS = 36, 12
VARIANTS_PER_TRIPLE = 3  # held-out sentences per held-out (A, verb, B) triple, mirrored exactly
DEFAULT_N_TRAIN = 4000


def _pick_pairs(rng: random.Random, n: int, taken: set, budget: dict) -> list[tuple[str, str, str]]:
    """n unordered (A, verb, B) pairs, each word losing at most 2 partners per (role, verb)."""
    candidates = [(a, v, b) for v in VERBS for a, b in itertools.combinations(HEADS, 2)]
    rng.shuffle(candidates)
    if _ALWAYS_TEST not in taken and not any(set(c) == set(_ALWAYS_TEST) for c in taken):
        candidates.insert(0, _ALWAYS_TEST)
    chosen = []
    for a, v, b in candidates:
        if len(chosen) == n:
            break
        if (a, v, b) in taken or (b, v, a) in taken or {(a, v, b), (b, v, a)} & _KEEP_IN_TRAIN:
            continue
        if any(budget.get((w, v), 0) >= 2 for w in (a, b)):
            continue  # keep A and B seen with this verb, in both roles, with other partners
        for w in (a, b):
            budget[(w, v)] = budget.get((w, v), 0) + 1
        taken |= {(a, v, b), (b, v, a)}
        chosen.append((a, v, b))
    return chosen


def _held_out(rng: random.Random, pairs) -> list[tuple[str, str]]:
    """For each pair: the bare sentence plus random variants, each with its exact mirror."""
    out = []
    for a, v, b in pairs:
        forms = _variants(a, v, b)
        picked = [forms[0]] + rng.sample(forms[1:], min(VARIANTS_PER_TRIPLE - 1, len(forms) - 1))
        for s, neg, verb, o in picked:
            for src in (_sentence(s, neg, verb, o), _sentence(o, neg, verb, s)):
                out.append((src, translate(src)))
    return out


def zh_en_splits(seed: int = 0, n_train: int | None = None) -> dict[str, list[tuple[str, str]]]:
    """{"train", "valid", "test"}: lists of (source, target) pairs, deterministic for `seed`.

    "test" and "valid" hold role-reversed pairs of sentences whose (A, verb, B) triples appear
    in no training sentence in either direction; n_train (default 4000) caps the training set,
    which keeps the bare sentence of every training triple when n_train is at least their number
    (about 700); a smaller n_train is a random sample.
    """
    rng = random.Random(seed)
    taken: set = set()
    budget: dict = {}
    test_pairs = _pick_pairs(rng, N_TEST_PAIRS, taken, budget)
    valid_pairs = _pick_pairs(rng, N_VALID_PAIRS, taken, budget)
    triples = [(a, v, b) for a in HEADS for v in VERBS for b in HEADS if a != b and (a, v, b) not in taken]
    bare = [_variants(a, v, b)[0] for a, v, b in triples]
    rest = [f for a, v, b in triples for f in _variants(a, v, b)[1:]]
    rng.shuffle(rest)
    n = DEFAULT_N_TRAIN if n_train is None else n_train
    train_forms = bare + rest[:max(0, n - len(bare))]
    if n < len(bare):  # too few to keep every bare triple: a random sample of all forms
        train_forms = rng.sample(bare + rest, n)
    rng.shuffle(train_forms)
    train = [(src, translate(src)) for src in (_sentence(*f) for f in train_forms)]
    return {"train": train, "valid": _held_out(rng, valid_pairs), "test": _held_out(rng, test_pairs)}


def role_reversed_pairs(split: list[tuple[str, str]]) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """Pairs of examples in `split` whose subject and object are swapped (猫 追 狗 / 狗 追 猫)."""
    index = {src: (src, tgt) for src, tgt in split}
    pairs = []
    for src, tgt in split:
        subj, neg, verb, obj = parse(src)
        mirror = _sentence(obj, neg, verb, subj)
        if mirror in index and src < mirror:
            pairs.append(((src, tgt), index[mirror]))
    return pairs
