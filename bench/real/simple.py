"""The simple baselines of the real-data benchmark (seconds of CPU, no neural network).

    python bench/real/simple.py DATA_DIR OUT.json

- g2p: per-letter majority. Training words whose spelling and pronunciation have the same length
  are aligned one letter to one phoneme; each letter in its context (two letters either side,
  backing off to one, then to one neighbour on either side with the two sides' counts summed, then
  none) predicts its most frequent phoneme (train/baselines.py's context majority). One phoneme per letter.
- pinyin: the same per-character majority (one syllable per character, in its context).
- lm-en / lm-zh: an interpolated absolute-discounting character n-gram (Ney et al. 1994;
  discount 0.75), order 5, over the same symbols as the neural models: the characters of each
  line and one line end; a character unseen in training is one <unk> symbol.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from pathlib import Path

from glassformer.train.error_rates import closest_references, scored_items, sequence_error_rate, token_error_rate


def g2p_majority(train: list[tuple[str, str]], test: list[tuple[str, str]]) -> dict:
    """Each letter's most frequent phoneme in its context: train/baselines.py's context majority (±2
    letters, else ±1, else one neighbour, else alone), fitted on the pairs of equal length."""
    from glassformer.train.baselines import TokenMajority

    predict = TokenMajority(train).in_context
    items = scored_items(test)  # a word with two pronunciations: right if either
    hyps = [predict(w) for w, _ in items]
    refs = closest_references(hyps, [r for _, r in items])
    return {"n": len(refs), "ser": sequence_error_rate(hyps, refs), "per": token_error_rate(hyps, refs)}


def symbols(lines: list[str], known: set[str] | None) -> list[str]:
    out = []
    for line in lines:
        out += [c if known is None or c in known else "<unk>" for c in line] + ["\n"]
    return out


def ngram_bpc(train_lines: list[str], test_lines: list[str], order: int = 5, d: float = 0.75) -> float:
    train = symbols(train_lines, None)
    vocab = set(train) | {"<unk>"}
    test = symbols(test_lines, vocab)
    counts = [defaultdict(Counter) for _ in range(order)]  # counts[k][history of length k][symbol]
    for i, s in enumerate(train):
        for k in range(order):
            if i - k < 0:
                break
            counts[k][tuple(train[i - k:i])][s] += 1
    totals = [{h: sum(c.values()) for h, c in table.items()} for table in counts]

    def prob(history: tuple, s: str) -> float:
        p = 1.0 / len(vocab)  # uniform floor: every symbol, <unk> included, keeps some mass
        for k in range(order):
            h = history[len(history) - k:] if k else ()
            c = counts[k].get(h)
            if c is None:
                break
            n = totals[k][h]
            p = max(c.get(s, 0) - d, 0) / n + d * len(c) / n * p
        return p

    bits = 0.0
    for i, s in enumerate(test):
        bits -= math.log2(prob(tuple(test[max(0, i - order + 1):i]), s))
    return bits / len(test)


def read_tsv(path: Path) -> list[tuple[str, str]]:
    return [tuple(line.rstrip("\n").split("\t")) for line in path.open(encoding="utf-8") if line.strip()]


def main(data: str, out: str) -> None:
    root = Path(data)
    result = {t: g2p_majority(read_tsv(root / f"{t}-train.tsv"), read_tsv(root / f"{t}-test.tsv"))
              for t in ("g2p", "pinyin")}
    for lang in ("en", "zh"):
        train = (root / f"{lang}-train.txt").read_text(encoding="utf-8").splitlines()
        test = (root / f"{lang}-test.txt").read_text(encoding="utf-8").splitlines()
        result[f"lm-{lang}"] = {"bpc": ngram_bpc(train, test), "order": 5}
    Path(out).write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(json.dumps(result))


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="The simple baselines of the real-data benchmark.")
    ap.add_argument("data", help="the folder bench/real/prepare.py wrote")
    ap.add_argument("out", help="the JSON file to write")
    args = ap.parse_args()
    if not Path(args.data).is_dir():
        ap.error(f"{args.data!r} is not a folder; run bench/real/prepare.py DATA first")
    main(args.data, args.out)
