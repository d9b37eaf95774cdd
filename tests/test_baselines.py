"""The simple baselines `train` prints beside its score, and the more-minutes verdict (issue 32 §5)."""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict

import numpy as np
import pytest

from glassformer.experiments.ngram import ngram_probabilities
from glassformer.train import baselines, verdict

from cli_helpers import run

TINY = ["--d-model", "32", "--heads", "2", "--layers", "1", "--d-ff", "64", "--norm-position", "pre",
        "--schedule", "cosine", "--lr", "3e-3", "--warmup", "10", "--batch-size", "32", "--quiet", "--threads", "1"]

PAIRS = [("ab", "x y"), ("ab", "x y"), ("ba", "y z"), ("ac", "x w"), ("cb", "w y"), ("aa", "x x")]


def test_per_token_majority_matches_a_count_by_hand():
    # aligned char → word: a→x 5 times (ab, ab, ac, aa×2), b→y 3, b→z 0 ... count by hand:
    # a: x,x,(ba:z? no: ba → y z so b→y, a→z),x,x,x → x 5, z 1;  b: y,y,y,y → y 4;  c: w,w → w 2
    m = baselines.TokenMajority(PAIRS)
    assert (m.src_kind, m.tgt_kind, m.share) == ("char", "word", 1.0)
    assert m.reading == {"a": "x", "b": "y", "c": "w"}
    raw = {"train": PAIRS, "valid": [("ba", "y x"), ("cc", "w w")], "test": [("ba", "y z"), ("bc", "y w"), ("d", "q")]}
    b = baselines.transduction(raw)
    # per token: ba → "y x" right, cc → "w w" right: valid 2/2; lookup gives ba → "y z" (memorised): 1/2
    assert b["variant"] == "per_token" and b["valid"]["exact_match"] == 1.0
    # test: ba → "y x" wrong, bc → "y w" right, d → "d" (copied) wrong: 1/3; WER: 1 + 0 + 1 edits / 5 words
    assert b["test"]["exact_match"] == pytest.approx(1 / 3)
    assert b["test"]["wer"] == pytest.approx(2 / 5)


def test_context_majority_reads_a_character_by_its_neighbours_counted_by_hand():
    # 行 is read xing twice (行人, 行走) and hang twice (银行, 行业): the per-token majority says xing
    # (the first counted of a tie); in the unseen 银行业 neither ±2 nor ±1 was trained, but both of
    # 行's neighbours were, each with hang: hang. 银 has its ±1 context from 银行, 业 from 行业.
    train = [("行人", "xing ren"), ("行走", "xing zou"), ("银行", "yin hang"), ("行业", "hang ye")]
    m = baselines.TokenMajority(train)
    assert m.per_token("银行业") == "yin xing ye"
    assert m.in_context("银行业") == "yin hang ye"
    assert m.in_context("行人") == "xing ren"  # a trained phrase: its own ±2 context
    assert m.in_context("x行") == "x hang"  # x unseen: copied; 行 before the end: as in 银行
    raw = {"train": train, "valid": [("银行业", "yin hang ye")],
           "test": [("银行业", "yin hang ye"), ("行人", "xing ren")]}
    b = baselines.transduction(raw)
    assert b["variant"] == "context" and b["test"]["exact_match"] == 1.0
    assert b["variants"]["per_token"]["valid"]["exact_match"] == 0.0 and "context majority" in b["description"]


def test_unaligned_pairs_memorise_and_fall_back_to_the_majority_output():
    pairs = [("cat", "K AE"), ("cat", "K AE"), ("dog", "D AO"), ("a", "AH")]  # 1 pair in 4 of equal length
    raw = {"train": pairs, "valid": [("cat", "K AE"), ("zzz", "Z")], "test": [("dog", "D AO"), ("q", "K AE")]}
    b = baselines.transduction(raw)
    assert b["variant"] == "lookup" and b["valid"]["exact_match"] == 0.5
    assert b["segmentation"]["equal_length_share"] == 0.25
    assert b["test"]["exact_match"] == 1.0  # dog memorised; q unseen → the most frequent output "K AE"


def test_longest_match_is_chosen_where_the_majority_variants_score_zero():
    # kana → romaji: each training pair is one word on both sides, so "per token" is whole-word
    # memorisation and an unseen word is copied; only cutting it into known pieces can be right
    train = [("かな", "kana"), ("か", "ka"), ("な", "na"), ("に", "ni"), ("かに", "kani")]
    raw = {"train": train, "valid": [("なか", "naka"), ("にな", "nina"), ("かな", "kana")],
           "test": [("なに", "nani"), ("かかな", "kakana"), ("ぬ", "nu")]}
    b = baselines.transduction(raw)
    # per token and memorisation: なか, にな copied (wrong), かな right: 1/3; longest match 3/3
    assert b["variants"]["per_token"]["valid"]["exact_match"] == pytest.approx(1 / 3)
    assert b["variants"]["lookup"]["valid"]["exact_match"] == pytest.approx(1 / 3)
    assert b["variant"] == "longest_match" and b["valid"]["exact_match"] == 1.0
    # test: なに = な + に right; かかな = か + かな right; ぬ copied wrong
    assert b["test"]["exact_match"] == pytest.approx(2 / 3)
    assert "longest" in b["description"]
    assert baselines.LongestMatch([("ab", "x y"), ("c", "z")])("abcab") == "x y z x y"  # joined by a space


def _loop_probability(train: str, history: str, c: str, alphabet: list[str], n: int, kn: bool) -> float:
    """P_n(c | history) of interpolated absolute discounting / Kneser–Ney, with dicts and loops."""
    V = len(alphabet) + 1
    grams = [Counter(train[i:i + k] for i in range(len(train) - k + 1)) for k in range(n + 1)]

    def cont(k):  # N1+(· g) for the k-grams g
        return Counter(g[1:] for g in grams[k + 1])

    def discount(counts):
        n1 = sum(v == 1 for v in counts.values())
        n2 = sum(v == 2 for v in counts.values())
        return min(max(n1 / (n1 + 2 * n2), 0.05), 0.95) if n1 else 0.75

    p = 1.0 / V
    for k in range(1, n + 1):
        counts = grams[k] if (k == n or not kn) else cont(k)
        d = discount(counts) if kn else 0.75
        h = history[len(history) - (k - 1):] if k > 1 else ""
        by_h = defaultdict(float)
        kinds = defaultdict(int)
        for g, v in counts.items():
            if v > 0:
                by_h[g[:-1]] += v
                kinds[g[:-1]] += 1
        if by_h[h] > 0:
            p = max(counts.get(h + c, 0) - d, 0) / by_h[h] + d * kinds[h] / by_h[h] * p
    return p


@pytest.mark.parametrize("kn", [False, True])
def test_ngram_matches_a_loop_implementation(kn):
    rng = np.random.default_rng(0)
    alphabet = list("abcd ")
    train = "".join(rng.choice(alphabet, 400, p=[0.3, 0.25, 0.2, 0.1, 0.15]))
    held = "".join(rng.choice(alphabet + ["e"], 60))
    index = {ch: i for i, ch in enumerate(alphabet)}
    enc = lambda s: np.array([index.get(ch, len(alphabet)) for ch in s])  # noqa: E731
    n = 4
    probs = ngram_probabilities(enc(train), enc(held), np.arange(n - 1, len(held)), len(alphabet) + 1, n,
                                "kn" if kn else "ad")
    for order in range(1, n + 1):
        want = [_loop_probability(train, held[t - n + 1:t], held[t], alphabet, order, kn) for t in range(n - 1, len(held))]
        np.testing.assert_allclose(probs[order - 1], want, rtol=1e-10)


def test_kneser_ney_sums_to_one_over_the_alphabet():
    rng = np.random.default_rng(1)
    V, n = 7, 5
    train = rng.integers(0, V - 1, 3000) * (rng.random(3000) < 0.8)  # symbol V−1 (unknown) never in training
    for _ in range(20):
        history = rng.integers(0, V, n - 1)
        text = np.concatenate([np.concatenate([history, [c]]) for c in range(V)])
        p = ngram_probabilities(train, text, np.arange(n - 1, V * n, n), V, n, "kn")
        np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-12)


def test_ngram_baseline_bits_per_character():
    lines = ["ab ab ab", "ba ab", "abba"] * 20
    raw = {"train": lines, "valid": ["ab ba"], "test": ["ab ab", "zz"]}
    b = baselines.ngram(raw, max_n=3)
    # the unigram order by hand: counts over "line\n" characters, absolute discounting D=0.75, V = 4+1
    text = "".join(x + "\n" for x in lines)
    c = Counter(text)
    p = {ch: (c[ch] - 0.75) / len(text) + 0.75 * len(c) / len(text) / (len(c) + 1) for ch in c}
    floor = 0.75 * len(c) / len(text) / (len(c) + 1)
    want = -np.mean([math.log2(p.get(ch, floor)) for ch in "ab ab\nzz\n"])
    assert b["bpc_by_order"]["ad"]["test"][0] == pytest.approx(want)
    assert b["order"] in (1, 2, 3) and b["test"]["bpc"] == b["bpc_by_order"][b["method"]]["test"][b["order"] - 1]


@pytest.mark.parametrize("curves, expected", [
    ({"loss": [3.0, 2.5, 2.2, 2.0, 1.9]}, "improving"),
    ({"loss": [3.0, 2.0, 1.900, 1.899, 1.898, 1.899]}, "plateaued"),
    ({"loss": [3.0, 2.0, 1.9, 2.1, 2.3, 2.4]}, "plateaued"),  # past its best
    ({"loss": [3.0, 2.0]}, "too few"),
    ({"loss": [2.0, 2.0, 2.1, 2.2], "exact_match": [0.5, 0.6, 0.65, 0.7]}, "improving"),  # loss up, EM up
    ({"loss": [2.0, 1.5, 1.2, 1.0], "exact_match": [0.0, 0.0, 0.0, 0.0]}, "improving"),  # EM flat, loss falls
    ({"loss": [2.0, 1.5, 1.5, 1.5, 1.5], "exact_match": [0.2, 0.5, 0.505, 0.50, 0.50]}, "plateaued"),
    # a rise of exactly 1 point (5 more right of 500; 0.65 - 0.64 > 0.01 in floats) is not over 1 point
    ({"loss": [2.0, 1.5, 1.5, 1.5, 1.5], "exact_match": [0.2, 0.64, 0.63, 0.64, 0.65]}, "plateaued"),
    ({"loss": [2.0, 1.5, 1.5, 1.5, 1.5], "exact_match": [0.2, 0.64, 0.63, 0.64, 0.652]}, "improving"),
])
def test_verdict_rule(curves, expected):
    assert verdict.judge(curves)["verdict"] == expected


def _records(path):
    return [json.loads(ln) for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]


def test_train_prints_and_logs_the_baseline_tsv(tmp_path, monkeypatch, capsys):
    pairs = [(f"{a}{b}", f"{a.upper()}{a} {b.upper()}") for a in "abcdefg" for b in "abcdefg"] * 3
    path = tmp_path / "pairs.tsv"
    path.write_text("".join(f"{s}\t{t}\n" for s, t in pairs), encoding="utf-8")
    code, out, err = run(monkeypatch, capsys, "train", "--task", "tsv", "--data", str(path), "--out",
                         str(tmp_path / "run"), "--max-steps", "30", "--eval-every", "10", "--tokenizer", "char/word",
                         *TINY)
    assert code == 0, err
    records = _records(tmp_path / "run" / "metrics.jsonl")
    b = next(r for r in records if r["split"] == "baseline")
    # every test source was seen in training: memorisation is right on each (per token is not: a
    # first character reads "Aa", a second "A")
    assert b["variant"] == "lookup" and b["test"]["exact_match"] == 1.0
    assert f"{b['description']} gets 100.0%" in out
    v = next(r for r in records if r["split"] == "verdict")
    assert v["verdict"] in ("improving", "plateaued") and v["text"] in out


def test_train_prints_and_logs_the_baseline_lm(tmp_path, monkeypatch, capsys):
    text = tmp_path / "corpus.txt"
    text.write_text("the cat eats the fish.\nthe dog sees the bird.\n" * 40, encoding="utf-8")
    code, out, err = run(monkeypatch, capsys, "train", "--task", "lm", "--data", str(text), "--out",
                         str(tmp_path / "lm"), "--max-steps", "20", "--eval-every", "10", "--block-size", "32", *TINY)
    assert code == 0, err
    records = _records(tmp_path / "lm" / "metrics.jsonl")
    b = next(r for r in records if r["split"] == "baseline")
    test = next(r for r in records if r["split"] == "test")
    assert b["test"]["bpc"] < 1.0 and len(b["bpc_by_order"]["kn"]["test"]) == 7  # two lines repeated: nearly certain
    assert f"test {test['bpc']:.3f} bits/char; the character {b['order']}-gram" in out
    assert "too few validations" in out  # 2 validations


def test_context_majority_counts_its_contexts_on_the_first_pairs_of_a_large_set(monkeypatch):
    """Four tables of mostly distinct keys grow with every aligned token: past CONTEXT_TOKENS the pairs
    still count for the per-token reading, not for the contexts (a tagging set of millions stays small)."""
    monkeypatch.setattr(baselines, "CONTEXT_TOKENS", 4)
    train = [("ab", "A B"), ("cd", "C D"), ("ef", "E F")]  # contexts from ab and cd (4 tokens), not ef
    m = baselines.TokenMajority(train)
    assert m.reading == {"a": "A", "b": "B", "c": "C", "d": "D", "e": "E", "f": "F"}
    assert (None, "a", "b") in m.contexts["one"] and (None, "c", "d") in m.contexts["one"]
    assert (None, "e", "f") not in m.contexts["one"] and m.in_context("ef") == "E F"  # the reading alone
