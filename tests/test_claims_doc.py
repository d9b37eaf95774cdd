"""The decision layer of docs/claims.md (issue 28): Welch and Holm against SciPy and textbook
formulas, Newcombe against its paper, a verdict that Holm flips, gates that forbid a verdict, the
n-gram gate against counts done by hand, and the committed docs/claims.json rendering into the
committed docs/claims.md exactly."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from glassformer.experiments.claims_doc import CHECK_KEYS, build, recompute, render
from glassformer.experiments.ngram import ngram_losses
from glassformer.experiments.stats import (holm_levels, interval, newcombe, newcombe_p_beyond, t_interval,
                                           t_p_beyond, welch)
from glassformer.experiments.verdict import FAILS, HOLDS, UNSURE, UNTESTED, decide, p_value

DOCS = Path(__file__).resolve().parent.parent / "docs"
CASES = [([1.0, 1.1, 0.9, 1.05, 0.95], [0.5, 0.6, 0.4, 0.55, 0.45]),
         ([2.3, 2.1, 2.6, 2.2, 2.45, 2.0], [2.25, 2.2, 2.3, 2.28, 2.21]),
         ([0.3, 1.7, 2.2, 5.0, 0.1, 0.9, 1.2, 3.3, 2.4, 0.8], [1.0, 1.1, 0.7, 0.9, 1.3])]


# ---- Welch against SciPy ----
@pytest.mark.parametrize("a, b", CASES)
@pytest.mark.parametrize("level", [0.95, 0.99, 0.9975])
def test_welch_interval_is_scipys(a, b, level):
    want = stats.ttest_ind(a, b, equal_var=False).confidence_interval(level)
    d, se, df = welch(a, b)
    assert d == pytest.approx(np.mean(a) - np.mean(b))
    assert t_interval(d, se, df, level) == pytest.approx((want.low, want.high), rel=1e-10)


@pytest.mark.parametrize("a, b", CASES)
def test_welch_p_values_are_scipys_one_sided_tests(a, b):
    d, se, df = welch(a, b)
    greater = stats.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue
    assert t_p_beyond(d, se, df, 0.0, True) == pytest.approx(min(1, 2 * greater), rel=1e-10)
    delta = 0.3  # "d < δ": the test of a against b shifted by δ
    less = stats.ttest_ind(a, np.asarray(b) + delta, equal_var=False, alternative="less").pvalue
    assert t_p_beyond(d, se, df, delta, False) == pytest.approx(min(1, 2 * less), rel=1e-10)
    # p is the level at which the interval just touches the bound
    p = t_p_beyond(d, se, df, 0.0, True)
    if 1e-6 < p < 1:
        assert t_interval(d, se, df, 1 - p)[0] == pytest.approx(0.0, abs=1e-9)


def test_per_arm_interval_is_scipys_t_interval_and_wilson_only_for_declared_rates():
    xs = [0.3, 1.7, 2.2, 5.0]
    want = stats.t.interval(0.95, len(xs) - 1, loc=np.mean(xs), scale=stats.sem(xs))
    assert interval(xs) == pytest.approx(want)
    assert interval([0.0] * 5) == (0.0, 0.0)  # a gap of 0 nats is not a rate: no [0, 0.43]
    w = stats.binomtest(0, 5).proportion_ci(0.95, method="wilson")
    assert interval([0.0] * 5, rate=True) == pytest.approx((w.low, w.high))


# ---- Newcombe's difference of two rates ----
def test_newcombe_matches_its_paper_and_scipys_wilson():
    # Newcombe (1998), Stat. Med. 17:873, Table II example (a): 56/70 − 48/80, method 10
    lo, hi = newcombe(56, 70, 48, 80)
    assert (round(lo, 4), round(hi, 4)) == (0.0524, 0.3339)
    for k1, n1, k2, n2 in ((0, 5, 5, 5), (3, 10, 1, 10), (5, 5, 5, 5)):
        w1 = stats.binomtest(k1, n1).proportion_ci(0.99, method="wilson")
        w2 = stats.binomtest(k2, n2).proportion_ci(0.99, method="wilson")
        p1, p2 = k1 / n1, k2 / n2
        want = (p1 - p2 - math.hypot(p1 - w1.low, w2.high - p2), p1 - p2 + math.hypot(w1.high - p1, p2 - w2.low))
        assert newcombe(k1, n1, k2, n2, 0.99) == pytest.approx(want, abs=1e-12)
    p = newcombe_p_beyond(5, 5, 0, 5, 0.0, True)  # 5/5 against 0/5: the interval leaves 0 at 1 − p
    assert newcombe(5, 5, 0, 5, 1 - p)[0] == pytest.approx(0.0, abs=1e-6)


# ---- Holm ----
def _holm_adjusted(p):
    """Textbook Holm-adjusted p-values: p_(i) · (m − i + 1), running maximum, capped at 1."""
    p = np.asarray(p)
    m = p.size
    order = np.argsort(p)
    adj = np.minimum(1, np.maximum.accumulate(p[order] * (m - np.arange(m))))
    out = np.empty(m)
    out[order] = adj
    return out


@pytest.mark.parametrize("p", [[0.01, 0.04, 0.03, 0.005], [0.2, 0.001, 0.0125, 0.013, 0.5], [0.04], [0.6, 0.7]])
def test_holm_rejects_what_the_adjusted_p_values_reject(p):
    levels = holm_levels(p, 0.05)
    assert [pi <= lv for pi, lv in zip(p, levels)] == list(_holm_adjusted(p) <= 0.05)
    assert min(levels) == pytest.approx(0.05 / len(p))


def _row(rid, checks, variants, gate=None):
    return {"id": rid, "claim": "c", "seed_section": "seed 000 §0", "setup": "s", "notes": "", "plots": [],
            "seconds": 1.0, "quick": False, "seeds": list(range(5)), "gate": gate,
            "variants": [{"name": n, "metric": "m", "values": v, "mean": float(np.mean(v)), "ci_low": None,
                          "ci_high": None, "interval": "t"} for n, v in variants.items()],
            "checks": [{"kind": "difference", "claim": c, "better": a, "worse": b, "higher_is_better": True,
                        "min_effect": 0.1, "main": True, "ceiling": None, "floor": None} for c, a, b in checks]}


def test_holm_flips_a_verdict_that_holds_alone():
    # A: d = 0.105 ≥ δ = 0.1 with a two-sided p between 0.025 and 0.05: it holds at 95% alone, but
    # in a family of two its Holm level is 0.025
    a = [0.105, 0.205, 0.005, 0.155, 0.055]
    assert 0.025 < stats.ttest_1samp(a, 0.0).pvalue < 0.05
    alone = build([_row("r1", [("A", "a", "zero")], {"a": a, "zero": [0.0] * 5})], {})
    noisy = [0.0, 0.9, -0.8, 0.4, -0.3]  # a second main check with a large p
    pair = build([_row("r1", [("A", "a", "zero"), ("B", "b", "zero")], {"a": a, "b": noisy, "zero": [0.0] * 5})], {})
    want = stats.ttest_ind(a, [0.0] * 5, equal_var=False).confidence_interval(0.95)
    (c,) = alone["checks"]
    assert (c["lo"], c["hi"]) == pytest.approx((want.low, want.high)) and c["lo"] > 0
    assert c["verdict"] == HOLDS and c["level"] == pytest.approx(0.95)
    c1 = pair["checks"][0]
    assert pair["family_size"] == 2 and c1["level"] == pytest.approx(0.975)
    want = stats.ttest_ind(a, [0.0] * 5, equal_var=False).confidence_interval(0.975)
    assert (c1["lo"], c1["hi"]) == pytest.approx((want.low, want.high)) and c1["lo"] < 0
    assert c1["verdict"] == UNSURE  # the verdict is never stronger than the Holm-adjusted interval


def test_json_entries_have_the_issues_schema_and_recompute():
    rows = [_row("r1", [("A", "a", "zero")], {"a": [1.0, 1.1, 0.9, 1.2, 1.0], "zero": [0.0] * 5})]
    doc = build(rows, {})
    assert all(tuple(c) == CHECK_KEYS for c in doc["checks"])
    assert recompute(json.loads(json.dumps(doc))) == [c["verdict"] for c in doc["checks"]]
    text = render(doc)
    assert render(json.loads(json.dumps(doc, ensure_ascii=False))) == text


# ---- gates ----
def test_a_failed_gate_cannot_print_holds_or_does_not_hold():
    a, zero = [1.0, 1.1, 0.9, 1.2, 1.0], [0.0] * 5
    assert decide(a, zero, True, 0.1)[0] == HOLDS
    assert decide(a, zero, True, 0.1, gate_failed=True)[0] == UNTESTED
    doc = build([_row("r1", [("A", "a", "zero")], {"a": a, "zero": zero}, gate="failed: below the 4-gram")], {})
    (c,) = doc["checks"]
    assert c["verdict"] == UNTESTED and doc["family_size"] == 0
    c["verdict"] = HOLDS  # a hand-edited file: the page refuses it
    with pytest.raises(ValueError, match="gate failed"):
        render(doc)
    met = build([_row("r1", [("A", "a", "zero")], {"a": a, "zero": zero}, gate="met: below the 4-gram")], {})
    assert met["checks"][0]["verdict"] == HOLDS
    assert decide([0.5, 0.6, 0.4, 0.5, 0.5], [0.5] * 5, True, 0.0)[0] in (UNSURE, FAILS)


# ---- the n-gram gate against counts by hand ----
def _by_hand(train, valid, vocab, n, D=0.75):
    counts = [Counter(tuple(train[i:i + k]) for i in range(len(train) - k + 1)) for k in range(n + 1)]
    total = 0.0
    scored = 0
    for t in range(n - 1, len(valid)):  # this helper is scored from position n − 1 (max_n = n)
        p = 1.0 / vocab
        for k in range(1, n + 1):
            h = tuple(valid[t - k + 1:t])
            hc = h + (valid[t],)
            c_h = len(train) if k == 1 else sum(v for g, v in counts[k].items() if g[:-1] == h)
            if c_h == 0:
                continue
            n1 = sum(1 for g in counts[k] if g[:-1] == h)
            p = max(counts[k][hc] - D, 0) / c_h + D * n1 / c_h * p
        total -= math.log(p)
        scored += 1
    return total / scored


def test_ngram_baseline_is_absolute_discounting_counted_by_hand():
    rng = np.random.default_rng(0)
    train = list(rng.integers(0, 5, 400)) + [0, 1, 2, 3] * 20
    valid = list(rng.integers(0, 6, 80))  # 5 is never seen in training
    got = ngram_losses(np.array(train), np.array(valid), vocab=7, max_n=3)
    assert got[2] == pytest.approx(_by_hand(train, valid, 7, 3), rel=1e-10)
    uni = Counter(train)
    want1 = -np.mean([math.log(max(uni[c] - 0.75, 0) / len(train) + 0.75 * len(uni) / len(train) / 7)
                      for c in valid[2:]])
    assert got[0] == pytest.approx(want1, rel=1e-10)


# ---- the committed page is a pure function of the committed file ----
def test_docs_claims_json_renders_into_docs_claims_md_exactly():
    doc = json.loads((DOCS / "claims.json").read_text(encoding="utf-8"))
    assert render(doc) == (DOCS / "claims.md").read_text(encoding="utf-8")
    assert recompute(doc) == [c["verdict"] for c in doc["checks"]]
    for c in doc["checks"]:
        assert tuple(c) == CHECK_KEYS and c["verdict"] in (HOLDS, FAILS, UNSURE, UNTESTED)
        if c["gate"] and c["gate"].startswith("failed"):
            assert c["verdict"] == UNTESTED


# ---- one verdict per seed claim, recomputed from the file ----
def test_committed_seed_claim_verdicts_recompute_from_the_file_alone():
    from glassformer.experiments.claims_doc import recompute_seed_claims

    doc = json.loads((DOCS / "claims.json").read_text(encoding="utf-8"))
    assert recompute_seed_claims(doc) == [s["verdict"] for s in doc["seed_claims"]]


@pytest.mark.parametrize("check_verdict, sentence_verdict", [(HOLDS, FAILS), (FAILS, HOLDS), (UNSURE, UNSURE),
                                                             (UNTESTED, UNTESTED)])
def test_a_sentence_decided_by_its_negation_reads_the_check_the_other_way_round(check_verdict, sentence_verdict):
    """'Pre-LN needs no warmup' is decided by 'warmup widens Pre-LN's range by ≥ δ': that check holding
    refutes the sentence, that check excluding an effect of δ confirms it; the rest passes through."""
    from glassformer.experiments.claims_doc import _seed_claims, recompute_seed_claims
    from glassformer.experiments.seed_claims import SEED_CLAIMS

    (sc,) = [s for s in SEED_CLAIMS if s.key == "pre-ln-no-warmup"]
    ((row, check),) = sc.against
    checks = [{"row": row, "check": check, "seed_claim": sc.text, "main": False, "verdict": check_verdict}]
    (entry,) = _seed_claims(checks)
    assert entry["verdict"] == sentence_verdict
    assert entry["decided_by"] == entry["negated"] == [f"{row}: {check}"]
    assert recompute_seed_claims({"checks": checks, "seed_claims": [entry]}) == [sentence_verdict]


# ---- a published report taken back into rows, and rows measured since replacing theirs ----
def test_a_published_doc_gives_back_the_rows_that_build_it():
    """`rows_from_doc` inverts `build` on the committed file: the same checks, Holm levels, verdicts and
    page — so rows kept from a published report and rows measured since can be decided together."""
    from glassformer.experiments.claims_doc import rows_from_doc

    doc = json.loads((DOCS / "claims.json").read_text(encoding="utf-8"))
    again = json.loads(json.dumps(build(rows_from_doc(doc), doc["header"]), allow_nan=False))
    assert again == doc
    assert render(again) == (DOCS / "claims.md").read_text(encoding="utf-8")


def test_the_page_holds_the_rows_kept_in_docs_claims_measured():
    """Each folder of docs/claims/measured/ is a row the page shows as measured there: its arms' per-seed
    values are the page's, and its checks' entries are the ones the decision layer gives that row (a
    measured folder added without regenerating the page fails here)."""
    from glassformer.experiments.claims_doc import rows_from_doc

    doc = json.loads((DOCS / "claims.json").read_text(encoding="utf-8"))
    folders = sorted(p for p in (DOCS / "claims" / "measured").iterdir() if p.is_dir())
    assert folders
    on_page = {r["id"]: r for r in doc["rows"]}
    for folder in folders:
        (row,) = json.loads((folder / "results.json").read_text(encoding="utf-8"))
        page_row = on_page[row["id"]]
        assert {v["name"]: v["values"] for v in page_row["variants"]} == \
            {v["name"]: v["values"] for v in row["variants"]}
        assert [c["check"] for c in doc["checks"] if c["row"] == row["id"]] == [c["claim"] for c in row["checks"]]
    # the measured rows decided afresh among the rest as published give the page again
    rows = rows_from_doc(doc)
    for folder in folders:
        (row,) = json.loads((folder / "results.json").read_text(encoding="utf-8"))
        rows = [row if r["id"] == row["id"] else r for r in rows]
    again = json.loads(json.dumps(build(rows, doc["header"]), allow_nan=False))
    assert again["checks"] == doc["checks"] and again["seed_claims"] == doc["seed_claims"]
