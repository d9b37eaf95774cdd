"""Error rates for real-data tasks (issue 10): edit distance, WER/PER, CER, bits per character.

- `edit_distance(a, b)`: Levenshtein distance (insertions, deletions, substitutions cost 1).
- `token_error_rate(hyps, refs)`: summed edit distance over whitespace tokens / reference tokens;
  the ASR "WER" (what jiwer computes), and the G2P "PER" when the tokens are phonemes.
- `sequence_error_rate`: fraction of outputs not exactly right; the G2P papers' "WER", where a
  word counts as wrong if any phoneme is (Yolchuyeva et al. 2019; Rao et al. 2015).
- `char_error_rate`: the same edit distance over characters.
- `scored_items(pairs)`: the items of a TSV to score, a source's different targets together;
- `closest_references(hyps, reference_lists)`: for a source with several right answers (a word
  with two pronunciations), the one its hypothesis is nearest to, which every rate above is then
  computed against: the G2P literature's scoring of words with variants (Bisani & Ney 2008), and
  an exact match when the hypothesis equals any of them.
- `bits_per_character(nats, text_lines)`: a language model's summed loss in bits divided by the
  characters it predicted, each line end counted as one character (a newline), so that models
  with different tokenizers compare.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Sequence


def edit_distance(a: Sequence, b: Sequence) -> int:
    """Levenshtein distance between two sequences (one row of the DP table at a time)."""
    if len(a) < len(b):
        a, b = b, a
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, start=1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, start=1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def _rate(pairs) -> float:
    errors = total = 0
    for hyp, ref in pairs:
        errors += edit_distance(hyp, ref)
        total += len(ref)
    return errors / total if total else 0.0


def token_error_rate(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Σ edit distance over whitespace tokens / Σ reference tokens (WER; PER for phonemes)."""
    return _rate((h.split(), r.split()) for h, r in zip(hypotheses, references))


def char_error_rate(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Σ edit distance over characters (spaces normalised to one) / Σ reference characters."""
    return _rate((" ".join(h.split()), " ".join(r.split())) for h, r in zip(hypotheses, references))


def sequence_error_rate(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    """Fraction of hypotheses that differ from their reference (whitespace-normalised)."""
    if not references:
        return 0.0
    wrong = sum(h.split() != r.split() for h, r in zip(hypotheses, references))
    return wrong / len(references)


def references_by_source(pairs: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """{source: its targets}, sources in first-seen order: a source on several lines of a TSV
    has several right answers."""
    refs: dict[str, list[str]] = {}
    for src, tgt in pairs:
        refs.setdefault(src, []).append(tgt)
    return refs


def scored_items(pairs: Sequence[tuple[str, str]]) -> list[tuple[str, list[str]]]:
    """One (source, its distinct targets) per item to score, sources in first-seen order: a
    source's lines with different targets are one item with several right answers; a line
    repeated word for word is a repeated example and gives the item as often as it occurs."""
    items: list[tuple[str, list[str]]] = []
    for src, targets in references_by_source(pairs).items():
        items += [(src, list(dict.fromkeys(targets)))] * max(Counter(targets).values())
    return items


def closest_references(hypotheses: Sequence[str], reference_lists: Sequence[Sequence[str]]) -> list[str]:
    """For each hypothesis, the reference with the fewest token edits from it (the first on a tie)."""
    return [min(refs, key=lambda r: edit_distance(h.split(), r.split())) if len(refs) > 1 else refs[0]
            for h, refs in zip(hypotheses, reference_lists)]


def bits_per_character(total_nats: float, lines: Sequence[str]) -> float:
    """Summed cross-entropy (nats) in bits per character, a line end counting as one character."""
    chars = sum(len(line) + 1 for line in lines)
    return total_nats / math.log(2) / max(chars, 1)


def for_outputs(hypotheses: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """The error rates of a translator's outputs, as evaluation metrics."""
    return {"wer": token_error_rate(hypotheses, references), "cer": char_error_rate(hypotheses, references),
            "ser": sequence_error_rate(hypotheses, references)}
