"""The simple baselines of a run's own data, printed beside its held-out score (issue 32 §5).

A held-out exact match of 0.86 means little until one knows that each character's most
frequent reading gets 0.85; 1.89 bits/char little until one knows the 5-gram gets 1.90. So
`train` fits the baseline on the run's own training split, chooses among its variants on the
validation split, and scores it on the test split with the run's own metric, as the model is
(its best/ chosen on validation, scored on test).

- translation tasks (`transduction`): four variants, and whichever scores the higher validation
  exact match is the baseline. Per-token majority: a source and target that have the same number
  of tokens in most training pairs (pinyin per character, transliteration) are aligned token by
  token, and each source token maps to its most frequent aligned target token. Memorisation: a
  source seen in training gets its most frequent whole target, the per-token map (or, unaligned,
  the most frequent training target) for the others. Longest match (`LongestMatch`): a source cut
  left to right into the longest pieces that are training sources, their targets joined — the
  dictionary lookup a user would write first for kana → romaji or a compound word, where the
  other two score 0 (a kana run printed "gets 0.0%" before this variant existed). Context majority
  (`in_context`, aligned data): each source token's majority in the widest context training saw
  (±2, ±1, one neighbour, alone) — on pinyin it beats the per-token majority by 3.6 points, and a
  model that beats only the latter has not beaten counting. Scored by evaluate.score_outputs, the
  model's own scorer (exact match, WER, CER).
- language models (`ngram`): interpolated character n-grams, n = 1…7, Kneser–Ney and absolute
  discounting (experiments/ngram.py), in bits per character with a line end as one character
  (error_rates.bits_per_character's unit, whatever the run's tokenizer); the order and method
  with the lowest validation bits/char is the baseline.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Sequence

import numpy as np

ALIGNED = 0.5  # "most pairs": the share of training pairs with equal token counts to align by token
SEGMENTS = ("word", "char")  # whitespace tokens, or characters (spaces kept as characters)


def _tokens(text: str, kind: str) -> list[str]:
    return text.split() if kind == "word" else list(" ".join(text.split()))


def _join(tokens: Sequence[str], kind: str) -> str:
    return " ".join(tokens) if kind == "word" else "".join(tokens)


CONTEXTS = ("two", "one", "left", "right")
# the aligned tokens counted in context: four tables of mostly distinct keys, a few hundred bytes each,
# so a large tagging set is counted on its first pairs (pinyin's aligned tokens: 129k, CMUdict's 195k)
CONTEXT_TOKENS = 300_000


def _context_keys(tokens: Sequence[str]) -> list[dict[str, tuple]]:
    """Each token with its neighbours (None past either end): ±2, ±1, the previous one, the next one."""
    p = [None, None, *tokens, None, None]
    return [{"two": tuple(p[j - 2:j + 3]), "one": tuple(p[j - 1:j + 2]), "left": (p[j - 1], p[j]),
             "right": (p[j], p[j + 1])} for j in range(2, len(tokens) + 2)]


class TokenMajority:
    """Per-token majority and memorisation, counted on a list of (source, target) pairs."""

    def __init__(self, pairs: Sequence[tuple[str, str]]):
        # the segmentation of each side under which most pairs have equal lengths (word first on a tie)
        shares = {(s, t): sum(len(_tokens(a, s)) == len(_tokens(b, t)) for a, b in pairs) / max(len(pairs), 1)
                  for s in SEGMENTS for t in SEGMENTS}
        self.src_kind, self.tgt_kind = max(shares, key=shares.get)
        self.share = shares[self.src_kind, self.tgt_kind]
        self.aligned = self.share >= ALIGNED
        readings: dict[str, Counter] = defaultdict(Counter)
        outputs: dict[str, Counter] = defaultdict(Counter)
        # the aligned tokens in context (`in_context`): two either side, one either side, one neighbour
        self.contexts: dict[str, dict[tuple, Counter]] = {k: defaultdict(Counter) for k in CONTEXTS}
        in_context = 0
        for src, tgt in pairs:
            outputs[src][tgt] += 1
            a, b = _tokens(src, self.src_kind), _tokens(tgt, self.tgt_kind)
            if len(a) == len(b):
                for x, y in zip(a, b):
                    readings[x][y] += 1
                if in_context < CONTEXT_TOKENS:
                    in_context += len(a)
                    for keys, y in zip(_context_keys(a), b):
                        for k, key in keys.items():
                            self.contexts[k][key][y] += 1
        self.reading = {x: c.most_common(1)[0][0] for x, c in readings.items()}
        self.memorised = {s: c.most_common(1)[0][0] for s, c in outputs.items()}
        self.majority = Counter(t for _, t in pairs).most_common(1)[0][0]

    def per_token(self, src: str) -> str:
        """Each source token's most frequent aligned target token; an unseen token is copied."""
        return _join([self.reading.get(x, x) for x in _tokens(src, self.src_kind)], self.tgt_kind)

    def in_context(self, src: str) -> str:
        """Each source token's most frequent aligned target token in the widest context training saw:
        two tokens either side, else one either side, else one neighbour (the previous and the next
        token's counts summed), else the token alone; an unseen token is copied. Contexts are counted on
        the first CONTEXT_TOKENS aligned tokens. (pinyin, a new phrase read as the words it shares a
        neighbour with: 88.4% exact match against 84.7% per token.)"""
        a, out = _tokens(src, self.src_kind), []
        for x, keys in zip(a, _context_keys(a)):
            found = next((self.contexts[k][keys[k]] for k in ("two", "one") if keys[k] in self.contexts[k]), None)
            if found is None:
                found = self.contexts["left"].get(keys["left"], Counter()) + \
                    self.contexts["right"].get(keys["right"], Counter())
            out.append(found.most_common(1)[0][0] if found else self.reading.get(x, x))
        return _join(out, self.tgt_kind)

    def lookup(self, src: str) -> str:
        """A seen source's most frequent target; else per token (aligned data, or every token
        seen), else the most frequent training target."""
        if src in self.memorised:
            return self.memorised[src]
        if self.aligned or all(x in self.reading for x in _tokens(src, self.src_kind)):
            return self.per_token(src)
        return self.majority

    def describe(self, variant: str) -> str:
        unit = "character" if self.src_kind == "char" else "word"
        token = f"each source {unit}'s most frequent target {'character' if self.tgt_kind == 'char' else 'token'}"
        if variant == "per_token":
            return f"{token} in training (per-token majority)"
        if variant == "context":
            return f"{token} in its context (±2 {unit}s, else ±1, else one neighbour; context majority)"
        rest = token if self.aligned else "the most frequent training target"
        return f"each seen source's most frequent training target, {rest} otherwise (memorisation)"


class LongestMatch:
    """The dictionary baseline: a source cut left to right into the longest pieces (at most
    `longest` characters) that are training sources (東京銀行 → 東京 + 銀行, butterfly → butter +
    fly), their first training targets joined with a space where most targets have one, else
    directly. A character that starts no piece gets its reading in `chars` (a package's character
    dictionary, which bench/real/curves.py passes; `train` has none), else is copied."""

    DESCRIPTION = ("each source cut greedily into the longest pieces that are training sources, their "
                   "training targets joined (longest match)")

    def __init__(self, pairs: Sequence[tuple[str, str]], chars: dict[str, str] | None = None, longest: int = 16):
        self.table: dict[str, str] = {}
        for src, tgt in pairs:
            self.table.setdefault(src, tgt)
        for c, reading in (chars or {}).items():
            self.table.setdefault(c, reading)
        self.sep = " " if sum(" " in t for _, t in pairs) * 2 >= len(pairs) else ""
        self.longest = longest

    def __call__(self, src: str) -> str:
        pieces, i = [], 0
        while i < len(src):
            for j in range(min(len(src), i + self.longest), i, -1):
                if src[i:j] in self.table:
                    pieces.append(self.table[src[i:j]])
                    i = j
                    break
            else:
                pieces.append(src[i])
                i += 1
        return self.sep.join(pieces)


VARIANTS = ("per_token", "lookup", "longest_match", "context")


def transduction(raw: dict[str, list], valid_limit: int | None = None,
                 variants: Sequence[str] = VARIANTS) -> dict[str, Any]:
    """The transduction baseline: fitted on raw['train'], chosen among `variants` on raw['valid']
    (its first `valid_limit` pairs, the model's validation items), scored on raw['test']."""
    from .evaluate import score_outputs

    model = TokenMajority(raw["train"])
    guesses = {"per_token": model.per_token, "lookup": model.lookup, "longest_match": LongestMatch(raw["train"]),
               "context": model.in_context}
    described = {"per_token": model.describe("per_token"), "lookup": model.describe("lookup"),
                 "longest_match": LongestMatch.DESCRIPTION, "context": model.describe("context")}
    valid = raw["valid"][:valid_limit] if valid_limit else raw["valid"]
    variants = [v for v in variants if v not in ("per_token", "context") or model.aligned]
    scores = {}
    for v in variants:
        guess = guesses[v]
        scores[v] = {split: score_outputs(pairs, {s: guess(s) for s, _ in pairs})
                     for split, pairs in (("valid", valid), ("test", raw["test"]))}
    best = max(variants, key=lambda v: scores[v]["valid"]["exact_match"])  # the earlier variant on a tie
    return {"kind": "transduction", "metric": "exact_match", "variant": best,
            "description": described[best], "valid": scores[best]["valid"], "test": scores[best]["test"],
            "segmentation": {"source": model.src_kind, "target": model.tgt_kind,
                             "equal_length_share": model.share},
            "variants": scores}


def _codes(text: str, alphabet: np.ndarray) -> np.ndarray:
    """Index of each character in the sorted code points `alphabet`; len(alphabet) if absent."""
    points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    at = np.searchsorted(alphabet, points)
    hit = (at < alphabet.size) & (alphabet[np.minimum(at, alphabet.size - 1)] == points)
    return np.where(hit, at, alphabet.size)


def ngram(raw: dict[str, list], max_n: int | None = None) -> dict[str, Any]:
    """The language-model baseline: interpolated character n-grams, n = 1…max_n, Kneser–Ney and
    absolute discounting, bits per character on the valid and test lines."""
    from ..experiments.ngram import ORDERS, ngram_probabilities

    max_n = max_n or ORDERS
    text = {split: "".join(line + "\n" for line in raw[split]) for split in ("train", "valid", "test")}
    train_points = np.frombuffer(text["train"].encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    alphabet = np.unique(np.concatenate([train_points, [ord("\n")]]))
    vocab = alphabet.size + 1  # + one symbol for every character the training split never shows
    # each held-out split read after max_n − 1 line ends: its first line starts a line, as every line does
    history = "\n" * (max_n - 1)
    scored = history + text["valid"] + history + text["test"]
    n_valid, n_test = len(text["valid"]), len(text["test"])
    positions = {"valid": np.arange(max_n - 1, max_n - 1 + n_valid)}
    positions["test"] = np.arange(positions["valid"][-1] + max_n, positions["valid"][-1] + max_n + n_test)
    every = np.concatenate([positions["valid"], positions["test"]])
    bpc: dict[str, dict[str, list[float]]] = {}
    for method in ("kn", "ad"):
        bits = -np.log2(ngram_probabilities(_codes(text["train"], alphabet), _codes(scored, alphabet), every,
                                            vocab, max_n, method))
        bpc[method] = {"valid": bits[:, :n_valid].mean(axis=1).tolist(), "test": bits[:, n_valid:].mean(axis=1).tolist()}
    method, order = min(((m, n) for m in bpc for n in range(max_n)), key=lambda mn: bpc[mn[0]]["valid"][mn[1]])
    name = {"kn": "interpolated Kneser–Ney", "ad": "interpolated absolute discounting"}[method]
    return {"kind": "ngram", "metric": "bpc", "method": method, "order": order + 1,
            "description": f"the character {order + 1}-gram ({name}; order 1–{max_n} and method chosen on the "
                           "validation split)",
            "valid": {"bpc": bpc[method]["valid"][order]}, "test": {"bpc": bpc[method]["test"][order]},
            "bpc_by_order": bpc, "alphabet": int(alphabet.size)}


def of_task(data, valid_limit: int | None = None) -> dict[str, Any] | None:
    """The simple baseline of a TaskData (None where a split it needs is missing or empty)."""
    if any(not data.raw.get(split) for split in ("train", "valid", "test")):
        return None
    if data.kind == "lm":
        return ngram(data.raw)
    return transduction(data.raw, valid_limit)


def line(model_test: dict, baseline: dict) -> str:
    """One line: the model's test score beside the baseline's, in the run's metric."""
    if baseline["metric"] == "bpc":
        ours, theirs = model_test.get("bpc"), baseline["test"]["bpc"]
        head = f"test {ours:.3f} bits/char" if ours is not None else \
            f"test bits/char {model_test.get('bpc_note', 'not measured')}"
        verdict = "" if ours is None else f" (ours {abs(theirs - ours):.3f} {'below' if ours < theirs else 'above'} it)"
        return f"{head}; {baseline['description']} gets {theirs:.3f}{verdict}"
    ours, theirs = model_test["exact_match"], baseline["test"]["exact_match"]
    return (f"test exact match {100 * ours:.1f}%; {baseline['description']} gets {100 * theirs:.1f}%"
            f" ({'+' if ours >= theirs else '−'}{100 * abs(ours - theirs):.1f} points)")


def logged(checkpoint_dir) -> dict[str, Any] | None:
    """The baseline `train` logged in the run folder holding `checkpoint_dir` (its best/ or
    checkpoint/), or None (an older run, or a folder outside a run)."""
    import json
    from pathlib import Path
    path = Path(checkpoint_dir).parent / "metrics.jsonl"
    if not path.is_file():
        return None
    found = None
    for ln in path.read_text(encoding="utf-8").splitlines():
        if ln.strip() and '"baseline"' in ln:
            record = json.loads(ln)
            found = record if record.get("split") == "baseline" else found
    return found
