"""docs/claims.json and the page made from it: `build(rows) -> doc`, `render(doc) -> markdown`.

`build` is the decision layer of a whole report: it takes the rows of `glassformer ablate` (the
per-seed numbers), gives each check its δ (`deltas`), its gate, its Holm level within the family
of the report's main checks, its interval and its verdict, and one reconciled verdict per seed
claim (`seed_claims`). `render` is a pure function of the resulting JSON-able dict: the page holds
nothing the file does not, so anyone can recompute every verdict from docs/claims.json alone
(`recompute` does it from the file's own fields).

Gates: a check's "gate" is null (none applies) or a sentence that starts with "met:" or
"failed:". A failed gate — a row's quality gate, a design the review found unable to test the
claim, a task at its ceiling or floor — makes the verdict "not tested", whatever the interval
says; `render` refuses a document where a failed gate carries "holds" or "does not hold".
"""

from __future__ import annotations

import math
from typing import Sequence

from . import deltas
from .gates import design_gate, learned_gate
from .registry import EXPERIMENTS
from .seed_claims import SEED_CLAIMS, claim_of, negate, reconcile
from .stats import LEVEL, finite, holm_levels
from .verdict import (FAILS, HOLDS, MIN_SEEDS, RULE, UNSURE, UNTESTED, decide, p_value, precondition)

ALPHA = 1 - LEVEL
CHECK_KEYS = ("row", "check", "seed_claim", "main", "better", "worse", "value", "higher_is_better", "delta",
              "delta_source", "level", "lo", "hi", "verdict", "gate")


def gate_failed(gate: str | None) -> bool:
    return gate is not None and gate.startswith("failed")


def _gate(row: dict, check: dict, a: list, b: list) -> str | None:
    """The check's gate: the first that failed (design, the check's, the row's quality gate, learned
    at training length, the task's ceiling/floor), else the met ones joined, else None."""
    if check.get("as_decided"):  # a check taken back from a published doc (`rows_from_doc`)
        return check["gate"]
    found = [design_gate(row["id"], check["claim"]), check.get("gate"), row.get("gate"), learned_gate(row, check)]
    if check.get("kind") != "exact":
        why = precondition(a, b, check["higher_is_better"], check.get("ceiling"), check.get("floor"))
        found.append(f"failed: {why}" if why else None)
    found = [g for g in found if g]
    failed = [g for g in found if gate_failed(g)]
    if failed:
        return failed[0]
    return "; ".join(found) or None


def _values(vs: Sequence) -> list:
    return [None if v is None or not math.isfinite(v) else float(v) for v in vs]


def build(rows: list[dict], header: dict) -> dict:
    """The report's decision layer (see the module docstring); rows in registry order."""
    drafts, rates = [], []
    for row in rows:
        by_name = {v["name"]: v for v in row["variants"]}
        for c in row["checks"]:
            exact = c.get("kind") == "exact"
            a = _values(by_name[c["better"]]["values"])
            b = None if exact else _values(by_name[c["worse"]]["values"])
            sc = claim_of(row["id"], c["claim"])
            if c.get("as_decided"):  # taken back from a published doc: its δ and source as printed
                hib = c["relation"] == ">=" if exact else c["higher_is_better"]
                delta, source = c["threshold"] if exact else c["min_effect"], c["delta_source"]
            elif exact:
                hib = c["relation"] == ">="
                delta, source = c["threshold"], "threshold of an exact check (fixed in code before any run)"
            else:
                hib = c["higher_is_better"]
                d = deltas.delta_for(row["id"], c["claim"], c["min_effect"], EXPERIMENTS.get(row["id"], row["id"]))
                delta, source = d.value, d.source
            rate = (not exact and by_name[c["better"]].get("interval") == "wilson"
                    and by_name[c["worse"]].get("interval") == "wilson")
            entry = {"row": row["id"], "check": c["claim"], "seed_claim": sc.text if sc else None,
                     "main": bool(c["main"]), "better": a, "worse": b, "value": None,
                     "higher_is_better": hib, "delta": delta, "delta_source": source, "level": None,
                     "lo": None, "hi": None, "verdict": UNSURE, "gate": _gate(row, c, a, b or [])}
            if rate:
                rates.append(f"{row['id']}: {c['claim']}")
            drafts.append((entry, rate))
    family = [i for i, (e, rate) in enumerate(drafts) if in_family(e)]
    ps = [p_value(drafts[i][0]["better"], drafts[i][0]["worse"], drafts[i][0]["higher_is_better"],
                  drafts[i][0]["delta"], drafts[i][1]) for i in family]
    levels = dict(zip(family, holm_levels(ps, ALPHA)))
    checks = []
    for i, (e, rate) in enumerate(drafts):
        e["level"] = None if e["worse"] is None else (1 - levels[i] if i in levels else LEVEL)
        decide_entry(e, rate)
        checks.append(e)
    doc = {"title": header.get("title", "Do the seeds' claims hold? — `glassformer ablate`"),
           "header": header, "method": RULE, "alpha": ALPHA, "family_size": len(family),
           "min_seeds": MIN_SEEDS, "rate_checks": rates, "checks": checks,
           "seed_claims": _seed_claims(checks), "rows": [_row_meta(r) for r in rows]}
    return doc


def rows_from_doc(doc: dict) -> list[dict]:
    """The rows `build` was given, taken back from its document: `build(rows_from_doc(doc), header)`
    gives the same checks, levels and verdicts. Lets a report replace some rows with new
    measurements and keep the others as published (scripts/claims_redecide.py --base).

    A check keeps the gate and δ it was decided under (`as_decided`): the design, quality and
    learned gates are the code's reading of the row's run, and δ was fixed before that run; the
    code may since have changed them for rows measured again. The arms a check compares are found by their
    per-seed values (the file names the values, not the arms; two arms with the same values
    decide a check the same way)."""
    rows = []
    for meta in doc["rows"]:
        row = {k: meta[k] for k in ("id", "claim", "seed_section", "setup", "notes", "seconds", "quick", "seeds")}
        row["plots"] = [list(p) for p in meta["plots"]]
        row["variants"] = [dict(v, rate=v["interval"] == "wilson") for v in meta["variants"]]
        arms = [(v["name"], _values(v["values"])) for v in row["variants"]]

        def arm(values: list, what: str) -> str:
            for name, vs in arms:
                if vs == values:
                    return name
            raise ValueError(f"{row['id']}: no arm has the per-seed values of {what}")

        row["checks"] = []
        for e in (c for c in doc["checks"] if c["row"] == meta["id"]):
            c = {"claim": e["check"], "main": e["main"], "gate": e["gate"], "delta_source": e["delta_source"],
                 "as_decided": True}
            if e["worse"] is None:
                c.update(kind="exact", better=arm(e["better"], e["check"]),
                         relation=">=" if e["higher_is_better"] else "<=", threshold=e["delta"])
            else:
                c.update(kind="difference", better=arm(e["better"], e["check"]), worse=arm(e["worse"], e["check"]),
                         higher_is_better=e["higher_is_better"], min_effect=e["delta"])
            row["checks"].append(c)
        rows.append(row)
    return rows


def in_family(e: dict) -> bool:
    """Main checks with an interval and enough seeds, whose gate did not fail."""
    return (e["main"] and e["worse"] is not None and not gate_failed(e["gate"])
            and len(finite(e["better"])) >= MIN_SEEDS and len(finite(e["worse"])) >= MIN_SEEDS)


def decide_entry(e: dict, rate: bool) -> None:
    """value, lo, hi and verdict of one check entry from its own fields."""
    if e["worse"] is None:  # a one-number exact check: no interval, no family
        v = e["better"][0]
        e["value"] = v
        e["lo"] = e["hi"] = v
        ok = v is not None and (v >= e["delta"] if e["higher_is_better"] else v <= e["delta"])
        e["verdict"] = UNTESTED if gate_failed(e["gate"]) else (HOLDS if ok else FAILS if v is not None else UNSURE)
        return
    verdict, d, lo, hi = decide(e["better"], e["worse"], e["higher_is_better"], e["delta"], level=e["level"],
                                rate=rate, gate_failed=gate_failed(e["gate"]))
    e.update(value=d, lo=lo, hi=hi, verdict=verdict)


def recompute(doc: dict) -> list[str]:
    """Every check's verdict again, from the file's fields alone (levels included)."""
    rates = set(doc["rate_checks"])
    out = []
    for c in doc["checks"]:
        e = dict(c)
        decide_entry(e, f"{c['row']}: {c['check']}" in rates)
        out.append(e["verdict"])
    return out


def _seed_claims(checks: list[dict]) -> list[dict]:
    out = []
    for sc in SEED_CLAIMS:
        mine = [c for c in checks if c["seed_claim"] == sc.text]
        if not mine:
            continue
        ids = lambda cs: [f"{c['row']}: {c['check']}" for c in cs]  # noqa: E731
        against = [c for c in mine if (c["row"], c["check"]) in sc.against]
        deciding = [c for c in mine if (c["row"], c["check"]) in sc.decides] if sc.decides else \
            [c for c in mine if c["main"] and c not in against]
        deciding += against
        rest = [c for c in mine if c not in deciding]
        verdicts = [negate(c["verdict"]) if c in against else c["verdict"] for c in deciding]
        out.append({"seed_claim": sc.text, "section": sc.section, "verdict": reconcile(verdicts),
                    "decided_by": ids(deciding), "negated": ids(against), "supporting": ids(rest), "why": sc.why})
    return out


def recompute_seed_claims(doc: dict) -> list[str]:
    """Every seed claim's reconciled verdict again, from the file's own fields: the verdicts of the checks
    it lists in `decided_by`, those also in `negated` read the other way round (`seed_claims`)."""
    by_id = {f"{c['row']}: {c['check']}": c["verdict"] for c in doc["checks"]}
    out = []
    for s in doc["seed_claims"]:
        negated = set(s.get("negated", []))
        out.append(reconcile([negate(by_id[i]) if i in negated else by_id[i] for i in s["decided_by"]]))
    return out


def _row_meta(row: dict) -> dict:
    keep = ("id", "claim", "seed_section", "setup", "notes", "plots", "seconds", "quick", "seeds", "variants")
    meta = {k: row.get(k) for k in keep}
    meta["variants"] = [{k: v.get(k) for k in ("name", "metric", "values", "mean", "ci_low", "ci_high", "interval")}
                        for v in row["variants"]]
    meta["plots"] = [list(p) for p in row.get("plots") or []]
    return meta


# ---- the page ----
def _fmt(v) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e4):
            return f"{v:.3g}"
        return f"{v:.4g}"
    return str(v)


def _ci(lo, hi) -> str:
    return "—" if lo is None or hi is None else f"[{_fmt(lo)}, {_fmt(hi)}]"


def _level(c: dict) -> str:
    return "exact" if c["level"] is None else f"{100 * c['level']:.3g}%"


def _anchor(text: str) -> str:
    return text.replace(" ", "-")


def render(doc: dict) -> str:
    """docs/claims.md from docs/claims.json, and nothing else."""
    for c in doc["checks"]:
        if gate_failed(c["gate"]) and c["verdict"] in (HOLDS, FAILS):
            raise ValueError(f"{c['row']}: {c['check']!r}: its gate failed but it says {c['verdict']!r}")
    h = doc["header"]
    lines = [f"# {doc['title']}", ""]
    if h.get("intro"):
        lines += [h["intro"], ""]
    if h.get("status"):
        lines += [h["status"], ""]
    lines += ["## Verdict rule", "", doc["method"], "",
              f"**The family.** {doc['family_size']} main checks (of {sum(c['main'] for c in doc['checks'])} main, "
              f"{len(doc['checks'])} in all) have an interval, enough seeds and no failed gate; Holm holds them "
              f"to α = {doc['alpha']:.2g} together. Each check's level is in its row; a check outside the family "
              "is shown at 95% (side checks) or is exact.", "",
              "## One verdict per seed claim", "",
              "Of the deciding checks, those not tested are ignored; none left: not tested; all hold: holds; all do "
              "not hold: does not hold; otherwise inconclusive. A sentence that says something does not matter is "
              "decided by the check of its negation, marked so, whose verdict is read the other way round.", "",
              "| seed claim | verdict | decided by | why these decide |", "|---|---|---|---|"]
    for s in doc["seed_claims"]:
        neg = set(s.get("negated", []))
        decided = "; ".join(f"{i} (negation: its 'holds' refutes the sentence)" if i in neg else i
                            for i in s["decided_by"])
        lines.append(f"| {s['seed_claim']} | **{s['verdict']}** | {decided or '—'} | {s['why']} |")
    lines += ["", "## Every check (sub-claims)", "",
              "| row | check | main | d (or value) | interval | level | δ | δ source | gate | verdict |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for c in doc["checks"]:
        lines.append(f"| [`{c['row']}`](#{c['row']}) | {c['check']} | {_fmt(c['main'])} | {_fmt(c['value'])} | "
                     f"{'—' if c['level'] is None else _ci(c['lo'], c['hi'])} | {_level(c)} | {_fmt(c['delta'])} | "
                     f"{c['delta_source']} | {c['gate'] or '—'} | **{c['verdict']}** |")
    lines.append("")
    for r in doc["rows"]:
        lines += _row_section(r, [c for c in doc["checks"] if c["row"] == r["id"]])
    if h.get("closing"):
        lines += [h["closing"], ""]
    return "\n".join(lines)


def _row_section(r: dict, checks: list[dict]) -> list[str]:
    n = len(r["seeds"] or [])
    run = "quick (code check, not a verdict)" if r["quick"] else ("exact (deterministic)" if n == 1 else f"full, {n} seeds")
    lines = [f"## `{r['id']}`", "", f"**Row claim** ({r['seed_section']}): {r['claim']}", "",
             f"**Run**: {run}.", "", f"**Setup**: {r['setup']}", "",
             "| arm | metric | values (one per seed) | mean | interval |", "|---|---|---|---|---|"]
    for v in r["variants"]:
        kind = " (Wilson)" if v["interval"] == "wilson" else " (t)" if v["interval"] == "t" else ""
        lines.append(f"| {v['name']} | {v['metric']} | {', '.join(_fmt(x) for x in v['values'])} | {_fmt(v['mean'])} | "
                     f"{_ci(v['ci_low'], v['ci_high'])}{kind} |")
    lines += ["", "| check | seed sentence | d (or value) | interval | level | δ | verdict |", "|---|---|---|---|---|---|---|"]
    for c in checks:
        lines.append(f"| {c['check']}{'' if c['main'] else ' (side)'} | {c['seed_claim'] or '—'} | {_fmt(c['value'])} | "
                     f"{'—' if c['level'] is None else _ci(c['lo'], c['hi'])} | {_level(c)} | {_fmt(c['delta'])} | "
                     f"**{c['verdict']}** |")
    gates = sorted({c["gate"] for c in checks if c["gate"]})
    lines.append("")
    if gates:
        lines += ["**Gates**: " + " / ".join(gates), ""]
    for file, caption in r["plots"] or []:
        lines += [f"![{caption}](claims/{file})", f"*{caption}*", ""]
    if r.get("notes"):
        lines += [f"**Reading**: {r['notes']}", ""]
    if r.get("seconds") is not None:
        lines += [f"*Time: {r['seconds']:.1f} s.*", ""]
    return lines
