"""Re-decide the last full run of docs/claims.md under the decision layer of issue 28, without retraining.

Usage: python scripts/claims_redecide.py [--base docs/claims.json] [DIR...] — reads docs/claims_issue12.md (the page of the last full
`make claims` run: 2.11 h from an empty cache, every row's per-seed values in its tables) and writes
docs/claims.json and docs/claims.md (`claims_doc.build` and `render`, the same functions as
`make claims`). Each DIR is the --out folder of a `glassformer ablate ID` run of a row the old
page does not have (the rows issue 28 adds) or of an old row re-measured under its redesign (it replaces the
old page's row); its results.json rows are taken as measured.

With --base FILE the rows come from a published docs/claims.json instead (`claims_doc.rows_from_doc`:
per-seed values, gates and δ as decided then), so that rows re-measured since replace theirs and every
other row stays as published; the closing table's "before" is still docs/claims_issue12.md. This is how
the rows kept in docs/claims/measured/ (issue 28 §2's learning-rate sweep) reach the page one by one
while the full rerun is pending.

What is taken from the old page and what is not:
- per-seed values exactly as printed (4 significant digits: the intervals move in the 4th digit);
- the 64 per-sentence MiniLM values of `representation-convergence` and `attention-locality`,
  which the page cut after 12, are recomputed (`layer_probes.minilm_readings`: one fixed
  pretrained model, no training, deterministic; the means are checked against the page's);
- each arm's interval is recomputed (t, or Wilson for the arms the code declares success rates),
  every check's δ, gate, Holm level, interval and verdict come from the new code;
- the text rows' gate uses the character n-gram baselines of the same split (`ngram`);
- the only ceilings that decided a verdict on the old page are `ffn`'s, given below as in ffn.py.
"""

import json
import math
import os
import re
import shutil
import sys
from pathlib import Path

from glassformer.experiments import EXPERIMENTS
from glassformer.experiments.base import SWEEP_WORDS
from glassformer.experiments.claims_doc import build, render, rows_from_doc
from glassformer.experiments.ngram import gate_text, text_baselines
from glassformer.experiments.report import atomic_text
from glassformer.experiments.stats import interval
from glassformer.experiments.verdict import Variant, mean_std

DOCS = Path(__file__).resolve().parent.parent / "docs"
SOURCE = DOCS / "claims_issue12.md"
CEILINGS = {("ffn", "an FFN (4×, ReLU) beats no FFN"): 0.9, ("ffn", "d_ff = 4× beats d_ff = 1×"): 0.98,
            ("ffn", "GELU beats ReLU at d_ff = 4×"): 0.98}
DIRECTIONS = {("residual", "seed 003: deleting the residual makes the loss diverge to NaN (6 layers)"): True}
TEXT_ROWS = {"real-heads": 64, "real-pe": 64, "real-norm": 64, "real-ffn": 64, "dk-sweet-spot": 64}
# rows whose old design issue 28 found unable to decide, until a re-measured row replaces them (status paragraph)
OLD_DESIGNS = {
    "norm-placement": "`norm-placement` (one peak rate; design gate)",
    "rnn": "`rnn`'s timing (2 CPU threads; design gate)",
    "real-heads": "`real-heads`", "real-pe": "`real-pe`", "real-norm": "`real-norm`", "real-ffn": "`real-ffn`",
    "dk-sweet-spot": "`dk-sweet-spot` (the text rows: stopped above the character 4-gram, quality gate)",
    "recall-extrapolation": "`recall-extrapolation` (accuracy past L mixes in-range positions; the learned table's "
                            "untrained rows at N(0, 0.02²))",
    "no-layernorm": "`no-layernorm` (fails at step 0 from scale)",
    "ffn-capacity": "`ffn-capacity` (no parameter-matched arm)",
}
RATE_METRIC = "diverged (1 = NaN/inf"  # the arms residual.py and norm_placement.py declare rate=True


def num(cell: str):
    cell = cell.strip()
    if cell in ("—", "", "inf", "nan", "-inf"):
        return None
    return float(cell)


def cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip()[2:-2].split(" | ")]


def parse(text: str) -> tuple[list[dict], dict[str, str]]:
    rows, before = [], {}
    for block in re.split(r"\n(?=## `)", text)[1:]:
        head = re.match(r"## `([^`]+)` — (.+)", block)
        rid, verdict = head.group(1), head.group(2).strip()
        before[rid] = verdict
        claim = re.search(r"\*\*Claim\*\* \((.*?)\): (.*)", block)
        run = re.search(r"\*\*Run\*\*: (.*)\.", block).group(1)
        setup = re.search(r"\*\*Setup\*\*: (.*)", block).group(1)
        notes = re.search(r"\*\*Reading\*\*: (.*)", block)
        seconds = float(re.search(r"\*Time: ([\d.]+) s\.\*", block).group(1))
        plots = re.findall(r"!\[(.*?)\]\(claims/(.*?)\)", block)
        variants, checks = [], []
        for line in block.splitlines():
            if not line.startswith("| ") or line.startswith("|---"):
                continue
            c = cells(line)
            if len(c) == 6 and c[0] != "variant":
                name, metric, values = c[0], c[1], [num(x) for x in c[2].replace(", …", "").split(", ")]
                variants.append({"name": name, "metric": metric, "values": values,
                                 "rate": metric.startswith(RATE_METRIC)})
            elif len(c) == 9 and c[0] != "check":
                bar = c[5]
                exact = bar.startswith(("<=", ">="))
                checks.append({"claim": c[0], "better": c[1], "worse": c[2], "printed_d": num(c[3]),
                               "kind": "exact" if exact else "difference", "main": c[6] == "yes",
                               "relation": bar[:2] if exact else None,
                               "threshold": float(bar[3:]) if exact else None,
                               "min_effect": None if exact else float(bar), "published": c[7],
                               "old_verdict": c[8]})
        n_seeds = max(len(v["values"]) for v in variants) if not run.startswith("exact") else 1
        rows.append({"id": rid, "claim": claim.group(2), "seed_section": claim.group(1), "setup": setup,
                     "notes": notes.group(1) if notes else "", "plots": [[f, cap] for cap, f in plots],
                     "seconds": seconds, "quick": False, "seeds": list(range(5 if n_seeds == 64 else n_seeds)),
                     "variants": variants, "checks": checks})
    return rows, before


def minilm_values(rows: list[dict]) -> None:
    """The per-sentence MiniLM arms the page cut after 12 values, recomputed and checked; and the MiniLM arms
    and checks of issue 28 §4 (attention among the words only, the cross-sentence baseline), taken from the
    rows' own modules (`minilm_arms`) — a fixed pretrained model, so no training is needed to add them. The
    new checks are held in "_new_checks" until `finish` has read the old ones."""
    from glassformer.experiments import attention_locality, representation_convergence
    from glassformer.experiments.layer_probes import minilm_readings
    mini = minilm_readings(64)
    fresh = {
        "MiniLM: x0": [r["cosine"][0] for r in mini],
        "MiniLM: last layer": [r["cosine"][-1] for r in mini],
        "MiniLM: last − x0": [r["cosine"][-1] - r["cosine"][0] for r in mini],
        "MiniLM: last − first distance": [r["distance"][-1] - r["distance"][0] for r in mini],
        "MiniLM: last − first entropy": [r["entropy"][-1] - r["entropy"][0] for r in mini],
        "no change": [0.0] * 64,
    }
    modules = {"representation-convergence": representation_convergence, "attention-locality": attention_locality}
    for row in rows:
        if row["id"] not in modules:
            continue
        for v in row["variants"]:
            if v["name"] in fresh:
                shown = [x for x in v["values"] if x is not None]
                got = fresh[v["name"]]
                assert all(abs(a - b) <= 5e-4 * max(1, abs(b)) for a, b in zip(shown, got)), v["name"]
                v["values"] = got
        variants, checks = modules[row["id"]].minilm_arms(mini)
        names = {v["name"] for v in row["variants"]}
        row["variants"] += [{"name": v.name, "metric": v.metric, "values": v.values, "rate": v.rate}
                            for v in variants if v.name not in names]
        by_name = {v.name: v for v in variants}
        by_name["no change"] = Variant("no change", "0", fresh["no change"])
        new = [c.evaluate(by_name) for c in checks]
        row["checks"] = [c for c in row["checks"] if not c["claim"].startswith("MiniLM")]
        row["_new_checks"] = new
        key, what = ("distance_content", "MiniLM's mean attention distance per layer among the words only "
                     "(no [CLS]/[SEP])") if row["id"] == "attention-locality" else \
            ("cross", "MiniLM's cross-sentence cosine per layer (x0 first; the anisotropy baseline)")
        per_layer = [round(sum(r[key][i] for r in mini) / len(mini), 3) for i in range(len(mini[0][key]))]
        row["setup"] += f" Added by issue 28 §4 (no retraining: MiniLM only): {what} {per_layer}."
        row["notes"] = modules[row["id"]].NOTES if row["id"] == "attention-locality" else \
            row["notes"] + " " + representation_convergence.MINILM_KIND


def finish(rows: list[dict]) -> None:
    """Arm intervals, each check's direction, ceilings and the text gates, as `run_one` would."""
    for row in rows:
        by_name = {v["name"]: v for v in row["variants"]}
        for v in row["variants"]:
            v["mean"], _ = mean_std(v["values"])
            v["ci_low"], v["ci_high"] = interval(v["values"], v["rate"])
            v["interval"] = "wilson" if v["rate"] else "t"
        for c in row["checks"]:
            if c["kind"] == "exact":
                continue
            ma, _ = mean_std(by_name[c["better"]]["values"])
            mb, _ = mean_std(by_name[c["worse"]]["values"])
            raw = ma - mb
            if raw == 0:  # d = 0 carries no sign: the direction as written in the module
                c["higher_is_better"] = DIRECTIONS[(row["id"], c["claim"])]
                c["ceiling"], c["floor"] = CEILINGS.get((row["id"], c["claim"])), None
                continue
            # the page prints d in the claimed direction: its sign against mean(A) − mean(B) is the direction
            assert c["printed_d"] is not None and abs(abs(raw) - abs(c["printed_d"])) <= \
                1e-3 * max(abs(raw), 1e-9) + 1e-3, (row["id"], c["claim"], raw, c["printed_d"])
            c["higher_is_better"] = (raw > 0) == (c["printed_d"] > 0)
            c["ceiling"] = CEILINGS.get((row["id"], c["claim"]))
            c["floor"] = None
        row["checks"] += row.pop("_new_checks", [])
        row["gate"] = None
        if row["id"] in TEXT_ROWS:
            L = TEXT_ROWS[row["id"]]
            arms = {v["name"]: v["values"] for v in row["variants"]
                    if " @ " not in v["name"] or v["name"].endswith(f" @ {L}")}
            row["gate"] = gate_text(arms, text_baselines())["text"]


def closing(doc: dict, before: dict[str, str]) -> str:
    from glassformer.experiments.seed_claims import SEED_CLAIMS
    lines = ["## Before → after, per seed claim", "",
             "*Before*: the row verdicts of docs/claims_issue12.md (bootstrap intervals, no multiplicity "
             "control, one verdict per row, δ fixed per module). *After*: this page.", "",
             "| seed claim | before (rows) | after | why |", "|---|---|---|---|"]
    by_text = {s["seed_claim"]: s for s in doc["seed_claims"]}
    for sc in SEED_CLAIMS:
        s = by_text.get(sc.text)
        if s is None:
            continue
        rows = sorted({c["row"] for c in doc["checks"] if c["seed_claim"] == sc.text})
        was = "; ".join(f"`{r}` {before.get(r, 'new')}" for r in rows)
        gates = sorted({c["gate"].split(":")[0] + ": " + c["gate"].split(":", 1)[1].strip()[:90] + "…"
                        for c in doc["checks"] if c["seed_claim"] == sc.text and c["gate"]
                        and c["gate"].startswith("failed")})
        why = s["why"] + (" Gates: " + " / ".join(gates) if gates else "")
        lines.append(f"| {sc.section}: {sc.english} | {was} | **{s['verdict']}** | {why} |")
    return "\n".join(lines)


SINCE = "\n\nSince then, re-measured under issue 28 §2's learning-rate sweep"


BASELINES_SENTENCE = r"Character n-gram baselines on the fortunes-en split the text rows use \([^)]*\): .*?5-gram \d+\.\d+\."


def baselines_sentence() -> str:
    """The n-gram baselines as the rows' gates compute them now (fitted on the training split less the
    sweep's tuning tail), so that the status paragraph and the gates quote the same 4-gram."""
    return ("Character n-gram baselines on the fortunes-en split the text rows use (held-out nats/char, "
            "interpolated absolute discounting, fitted on the training split less the sweep's tuning tail, "
            "as in the rows' gates): " + ", ".join(f"{n + 1}-gram {b:.3f}" for n, b in enumerate(text_baselines()))
            + ".")


# issue 28 §7: what the text rows' quality gate costs, measured, and where each text row stands
GATE_COST = (
    "What the text rows' quality gate costs, measured (a pilot on 2026-12-04, "
    "`scripts/claims_gate_pilot.py ARM STEPS LR`: one arm, one seed, one thread, the other core busy): `real-heads`' 2-layer d_model-64 model with 4 heads at its chosen rate "
    "reaches 2.096 nats/char after 600 steps (the row's mean), 1.942 after 1,500 and 1.857 after 3,000 (50 and "
    "189 s), still above the 4-gram's 1.813 (the 1,500-step run repeated: 1.932: each "
    "process times its GEMM routes anew, so its float rounding and the trained loss differ; with "
    "GLASSFORMER_GEMM=blas two 300-step runs agree to every printed digit, 2.2898, against 2.3023 and 2.2945 timed); a 4-layer d_model-128 model 1.840 after 1,500 steps (262 s) and "
    "1.740 after 3,000 (691 s), below it. Pilots on 2026-12-05 (the rows' own trainer and schedule, one thread, "
    "held-out loss on the rows' test windows): at d_model 128 × 2 layers, h = 8 at 3e-3 reads 1.785 after 4,000 "
    "steps and h = 16 at 1e-2 1.745 after 5,000, below the gate; at d_model 64 × 2, h = 16 at 1e-2 is still at "
    "1.818 after 8,000; with no positional encoding d_model 128 plateaus near 2.32 (4,000 steps), so `real-pe`'s "
    "`none` arm cannot meet the gate at any budget tried. So the text rows move to d_model 128 and 5,000 steps "
    "(text_task.D_MODEL, STEPS), one row at a time: `dk-sweet-spot` and `real-heads` (h = 1, 8, 16) are measured "
    "there (their gates met; their seconds are the sums of their runs' one-core times, from the cached runs' file "
    "times, not one process's wall time). They share runs: dk-sweet-spot's d_k = 16 arm is real-heads' h = 8 and "
    "its d_k = 128 arm real-heads' h = 1 (one config, spec, seed and test windows, trained once). `real-ffn` is "
    "measured there too (its d_ff = 4× arm is that h = 8 arm); its gate is read on that arm alone: its first "
    "reading failed on the no-FFN (1.926) and d_ff = 1× (1.837) arms, the two the claim says are weaker, and after "
    "a pilot that trained each for twice the budget (1.871 and 1.783, seed 0) they were left out of it, said in "
    "its gate (decided after the reading, not before). "
    "`real-pe` is measured there too (d_model 128, 5,000 steps, its loss at 4L on the positions past L only; "
    "`none` left out of its gate, with that plateau as the reason, written before its runs; the sinusoidal arm "
    "is the common model, its sweep shared): every gated arm under the 4-gram (worst: learned, 1.748), its "
    "seconds the one-core time of its 61 runs over three sessions (run.json says how they were summed). "
    "`real-norm` is measured at d_model 128 × 4 layers and 3,000 steps, where a pilot put four layers under the "
    "4-gram (its Post-LN-without-warmup arm, the one the claim says fails, left out of its gate before its runs): "
    "the three gated arms under the 4-gram (worst: Pre-LN without warmup, 1.770), the fourth at 1.884; its "
    "seconds the one-core time of its 54 runs over two sessions, summed from each run's own timer (run.json "
    "says so). The single runs "
    "of the rows measured at d_model "
    "128 are in docs/claims/runs/ (`glassformer ablate ID --out DIR --runs docs/claims/runs` rebuilds such a "
    "row from them in seconds).")


def swept_status(base_status: str, rows: list[dict], added: set[str]) -> str:
    """The base page's status paragraph up to its own "Since then" part, and that part anew: every row
    taken from a run folder (`added`), with its wall time, which of them chose their rates by the §2
    sweep, and what the other rows still used."""
    head = re.sub(BASELINES_SENTENCE, baselines_sentence(), base_status.split(SINCE)[0])
    met = {row["id"] for row in rows if row["id"] in added and (row.get("gate") or "").startswith("met:")}
    for row in met:  # a row re-measured past its quality gate is no longer "under the old designs"
        head = head.replace(f"; `{row}`", "").replace(f"`{row}`; ", "")
    old = re.search(r" Still measured under the old designs, and said so in their gates or notes: "
                    r"(.*?\.)(?= [A-Z]|$)", head)
    if old and set(re.findall(r"`([\w-]+)`", old[1])) <= met:  # the last of them too: the sentence goes
        head = head.replace(old[0], "")
    # the budgets of the last full run, not of the rows measured since (GATE_COST says which train longer)
    head = head.replace("Budgets: the text rows train 600 steps", "Budgets of that run: the text rows trained 600 steps")
    folders = [r for r in rows if r["id"] in added]
    if not folders:
        return head
    swept = [r for r in folders if SWEEP_WORDS in r["setup"] or "peak rate per arm" in r["setup"]
             or "from the sweep" in r["setup"]]
    fixed = [r for r in folders if r not in swept]
    return (head + SINCE + " (" + SWEEP_WORDS + "), one `glassformer ablate ID --out DIR` each from an empty cache, "
            "one thread, while other jobs shared this 2-core machine (wall seconds), replacing the rows above: "
            + ", ".join(f"`{r['id']}` ({r['seconds']:.0f} s)" for r in swept)
            + (". Re-measured the same way, with no learning rate to choose (a fixed rate or none): "
               + ", ".join(f"`{r['id']}` ({r['seconds']:.0f} s)" for r in fixed) if fixed else "")
            + ". Their folders are docs/claims/measured/ROW/. " + _rest_sentence(added) + " " + GATE_COST
            + " " + budget_sentence(rows))


def budget_sentence(rows: list[dict]) -> str:
    """Issue 28 §7: the whole report's compute, as the rows on this page measured it."""
    total = sum(r.get("seconds") or 0 for r in rows)
    slow = sorted(rows, key=lambda r: -(r.get("seconds") or 0))[:4]
    return (f"Budget (issue 28 §7: `make claims` from an empty cache in ≤ 3 h on 2 cores): the wall times of the "
            f"rows on this page sum to {total / 3600:.1f} h (as each row's own run measured it; most ran on one thread with "
            f"another job on the other core), so `make claims` at --jobs 2 would take about "
            f"{total / 7200:.1f} h: **over the goal**. Most of the rise is the §2 sweep (8 runs per arm before "
            f"its 5 seeds) and the text rows' quality gate (5,000 steps where a row meets it); the longest rows: "
            + ", ".join(f"`{r['id']}` {r['seconds'] / 3600:.1f} h" for r in slow) + ". Nothing was cut for it.")


def sweeping_rows() -> list[str]:
    """The rows whose code sweeps a learning rate per arm (`base.best_lr`, directly or via the text
    rows' `run_arms`), read from their modules' source."""
    import inspect

    from glassformer.experiments.registry import module
    return [exp_id for exp_id in EXPERIMENTS
            if re.search(r"\b(best_lr|run_arms)\(", inspect.getsource(module(exp_id)))]


def _rest_sentence(added: set[str]) -> str:
    """What the rows that sweep a rate and were not re-measured still used (none, once all are)."""
    rest = [r for r in sweeping_rows() if r not in added]
    if not rest:
        return ("Every row whose code sweeps a rate is now measured under this sweep; the other rows train at "
                "a fixed rate their setup names, or train nothing.")
    return ("Every other row that sweeps a rate (" + ", ".join(f"`{r}`" for r in rest) + ") was measured under "
            "the earlier sweep (3 rates, 1 seed, chosen on training loss: it chose its top rate, 3e-3, for nearly "
            "every arm) and waits for the full rerun (`make claims`).")


def first_status(rows: list[dict], added: set[str], remeasured: list[str]) -> str:
    """The status paragraph of a page made from docs/claims_issue12.md and the given run folders."""
    new_rows = [r["id"] for r in rows if r["id"] in added and r["id"] not in remeasured]
    old_design = [f"{OLD_DESIGNS[i]}" for i in OLD_DESIGNS if i not in remeasured]
    seconds = {r["id"]: r.get("seconds") for r in rows if r["id"] in added}
    return (
        "## Status of this page\n\n"
        "Regenerated by `scripts/claims_redecide.py` (issue 28) under the new decision layer. Rows not re-measured "
        "keep the per-seed numbers of the last full run (docs/claims_issue12.md: `make claims` from an empty cache, "
        "2.11 h at --jobs 2 on 2 cores), as printed there (4 significant digits), except the 64 per-sentence MiniLM "
        "values, recomputed (a fixed pretrained model, deterministic). Every verdict below can be recomputed from "
        "docs/claims.json alone (`claims_doc.recompute`). " + baselines_sentence() + " "
        "Budgets: the text rows train 600 steps (cut from 1000 for time after the first full report; that cut "
        "flipped two verdicts, which issue 28 says the old status paragraph did not disclose); `khop` 1000 steps, "
        "`recall-extrapolation` 1500. " + GATE_COST
        + (" Re-measured under the full protocol, each with `glassformer ablate ID --out DIR` from an empty cache "
           "(seconds: one process's wall time on this 2-core machine while other jobs shared it), "
           "replacing the old page's rows (under their redesigns where issue 28 asked for one): "
           + ", ".join(f"`{r}` ({seconds[r]:.0f} s)" for r in remeasured) + "." if remeasured else "")
        + (" Rows issue 28 adds, run the same way and appended as measured: "
           + ", ".join(f"`{r}` ({seconds[r]:.0f} s)" for r in new_rows) + "." if new_rows else "")
        + (" Still measured under the old designs, and said so in their gates or notes: " + "; ".join(old_design)
           + "." if old_design else ""))


def main() -> None:
    args = sys.argv[1:]
    base = None
    if args[:1] == ["--base"]:
        if len(args) < 2:
            raise SystemExit("--base needs a file: the docs/claims.json to start from")
        base, args = json.loads(Path(args[1]).read_text(encoding="utf-8")), args[2:]
    text = SOURCE.read_text(encoding="utf-8")
    rows, before = parse(text)
    if base is None:
        minilm_values(rows)
        finish(rows)
    else:
        rows = rows_from_doc(base)
    old, added, remeasured = {r["id"] for r in rows}, set(), []
    for d in map(Path, args):
        for row in json.loads((d / "results.json").read_text(encoding="utf-8")):
            if row["quick"] or row["id"] in added:
                raise SystemExit(f"{d}: row {row['id']!r} is a --quick run or given twice; "
                                 "give the --out folder of one full run per row")
            if row["id"] in old:  # a row of the old page re-measured under its redesign replaces the old one
                rows = [r for r in rows if r["id"] != row["id"]]
                remeasured.append(row["id"])
            rows.append(row)
            added.add(row["id"])
            for file, _ in row.get("plots") or []:  # the page links docs/claims/FILE: bring the run's picture
                shutil.copyfile(d / "claims" / file, DOCS / "claims" / file)
    rows = [r for i in EXPERIMENTS for r in rows if r["id"] == i]
    if base is not None:
        status = swept_status(base["header"]["status"], rows, added)
    else:
        status = first_status(rows, added, remeasured)
    header = {"title": "Do the seeds' claims hold? — `glassformer ablate`", "status": status,
              "intro": f"Load average when this page was written: {os.getloadavg()[0]:.1f}."}
    doc = build(rows, header)
    doc["header"]["closing"] = closing(doc, before)
    page = render(doc)
    atomic_text(DOCS / "claims.json", json.dumps(doc, indent=1, ensure_ascii=False, allow_nan=False) + "\n")
    atomic_text(DOCS / "claims.md", page)
    verdicts = [c["verdict"] for c in doc["checks"]]
    print(f"docs/claims.json: {len(doc['checks'])} checks, family {doc['family_size']}, "
          + ", ".join(f"{v} {verdicts.count(v)}" for v in ("holds", "does not hold", "inconclusive", "not tested"))
          + f"; {len(doc['seed_claims'])} seed claims", file=sys.stderr)


if __name__ == "__main__":
    main()
