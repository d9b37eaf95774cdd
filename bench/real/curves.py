"""The time-to-quality suite (issue 32): quality against minutes on every real dataset, ours and
the simple baselines, with the dataset-level hold-out of datasets.json.

    python bench/real/curves.py                       # every dataset, 2 5 10 30 minutes (hours)
    python bench/real/curves.py --minutes 0.2         # a smoke run
    python bench/real/curves.py --datasets kana lm-pydoc --minutes 2 --threads 1 --out runs/suite

For each dataset (bench/real/prepare.py writes its files under OUT/data, once):
- ours: `glassformer train` with the defaults (--task, --data, --max-minutes M, and --threads
  only if given) for each M, then `glassformer eval --ckpt RUN --data TEST --json` on the test split;
- the simple baselines, computed here on the same split (train/baselines.py, the code `train`
  prints its baseline with): transductions, the per-token majority or memorisation (chosen on a
  validation slice of the training file), the longest match (a test source cut into the longest
  training sources, a character left over read with the package's character dictionary where
  there is one: the first dictionary reading) and, where many pairs align one source character to
  one target word, the per-character majority in a +-2 context (bench/real/simple.py); LMs, the best
  interpolated character n-gram, n = 1..7, Kneser-Ney or absolute discounting (chosen on a
  validation slice); the slice is the last 5% of the training file (at most 1,000 pairs);
- plain PyTorch (bench/real/plain_torch.py) at equal time: one run of max(M) minutes whose best
  validation checkpoint is scored on the test split at each M (its recipe does not depend on the
  budget, so this is a run per budget).

Quality is exact match on the test split for a transduction (higher is better) and bits per
character for an LM (lower is better; a line end is one character). Writes OUT/results.json (every
number), OUT/table.md and OUT/curves.png, with the first budget at which ours beats each baseline.
Resumable: a finished run (its test JSON written) or baseline is not run again; --sample N makes
every dataset its first N training items and N/10 test items (for a smoke test).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import prepare  # noqa: E402  (bench/real/prepare.py)
import simple  # noqa: E402  (bench/real/simple.py)

DEFAULT_MINUTES = (2.0, 5.0, 10.0, 30.0)
VALID = 0.05  # the baselines' validation slice: the end of the training file
VALID_MAX_PAIRS = 1000


def tag(minutes: float) -> str:
    return f"{minutes:g}"


def role(name: str) -> str:
    return "development" if name in prepare.SPEC["development"] else "evaluation"


def metric(name: str) -> tuple[str, bool]:
    """(the quality measure, whether higher is better)."""
    return ("bpc", False) if prepare.kind(name) == "lm" else ("exact_match", True)


def better(a: float, b: float, higher: bool) -> bool:
    return a > b if higher else a < b


def first_beats(ours: dict[float, float], baseline, higher: bool) -> float | None:
    """The first budget (minutes) at which ours is strictly better than the baseline: a number (a
    baseline that does not depend on the budget) or a curve {minutes: value} compared at equal
    minutes. None if ours never is; budgets missing on either side are skipped."""
    for m in sorted(ours):
        theirs = baseline.get(m) if isinstance(baseline, dict) else baseline
        if theirs is not None and ours[m] is not None and better(ours[m], theirs, higher):
            return m
    return None


# ---- data ----
def _read(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _head_items(lines: list[str], n: int, tsv: bool) -> list[str]:
    """The first n items: lines, or for a TSV the lines of the first n sources (a source on several
    lines is one item with several right answers)."""
    if not tsv:
        return lines[:n]
    seen, out = set(), []
    for ln in lines:
        src = ln.split("\t", 1)[0]
        if src not in seen and len(seen) == n:
            break
        seen.add(src)
        out.append(ln)
    return out


def data_files(name: str, out: Path, sample: int | None) -> tuple[Path, Path]:
    """The train and test files of a dataset under OUT, written once (sub-sampled with --sample)."""
    full = prepare.files(name, out / "data")
    if not all(f.is_file() and f.stat().st_size for f in full):
        prepare.build(name, out / "data")
    if not sample:
        return full
    small = prepare.files(name, out / f"data-sample{sample}")
    if not all(f.is_file() for f in small):
        small[0].parent.mkdir(parents=True, exist_ok=True)
        tsv = prepare.kind(name) != "lm"
        for src, dst, n in ((full[0], small[0], sample), (full[1], small[1], max(sample // 10, 20))):
            prepare.write_lines(dst, _head_items(_read(src), n, tsv))
    return small


# ---- the simple baselines ----
def _pairs(lines: list[str]) -> list[tuple[str, str]]:
    return [tuple(ln.split("\t", 1)) for ln in lines if ln.strip()]


def baselines_of(name: str, train_file: Path, test_file: Path) -> dict[str, dict]:
    """{baseline name: {"value": quality on the test split, "description": ...}}."""
    from glassformer.train import baselines

    train, test = _read(train_file), _read(test_file)
    n_valid = max(1, int(len(train) * VALID))
    out = {}
    if prepare.kind(name) == "lm":
        raw = {"train": train[:-n_valid], "valid": train[-n_valid:], "test": test}
        b = baselines.ngram(raw)
        out["n-gram"] = {"value": b["test"]["bpc"], "description": b["description"], "order": b["order"],
                         "method": b["method"], "valid": b["valid"]["bpc"]}
        return out
    n_valid = min(n_valid, VALID_MAX_PAIRS)
    pairs, test_pairs = _pairs(train), _pairs(test)
    raw = {"train": pairs[:-n_valid], "valid": pairs[-n_valid:], "test": test_pairs}
    b = baselines.transduction(raw, variants=("per_token", "lookup"))
    out["majority"] = {"value": b["test"]["exact_match"], "description": b["description"],
                       "wer": b["test"].get("wer"), "valid": b["valid"]["exact_match"]}
    chars = prepare.CHAR_READINGS[name]() if name in prepare.CHAR_READINGS else {}
    lm_ = longest_match(pairs, test_pairs, chars)
    out["longest match"] = {"value": lm_["exact_match"], "wer": lm_.get("wer"), "description":
                            "each test source cut greedily into the longest pieces that are training sources, "
                            "their training targets joined; a character left over gets its first reading in the "
                            "package's character dictionary" + (" (pykakasi's, pypinyin's)" if chars else "")
                            + " or is copied"}
    aligned = sum(len(s) == len(t.split()) for s, t in pairs) / max(len(pairs), 1)
    if aligned >= 0.2:  # one source character to one target word in many pairs: G2P, pinyin
        c = simple.g2p_majority(pairs, test_pairs)
        out["context majority"] = {"value": 1 - c["ser"], "per": c["per"], "description":
                                   "each source character's most frequent target word in a +-2 character context, "
                                   "backing off to +-1, then to one neighbour (bench/real/simple.py)"}
    return out


def longest_match(train: list[tuple[str, str]], test: list[tuple[str, str]], chars: dict[str, str] | None = None,
                  longest: int = 16) -> dict:
    """train/baselines.py's longest match with the package's character dictionary `chars` (the
    first dictionary reading of a character no training source starts), scored as the model is."""
    from glassformer.train.baselines import LongestMatch
    from glassformer.train.evaluate import score_outputs

    guess = LongestMatch(train, chars, longest)
    return score_outputs(test, {s: guess(s) for s, _ in test})


# ---- the neural runs ----
def run_logged(cmd: list[str], log: Path, env: dict | None = None) -> None:
    with log.open("w", encoding="utf-8") as f:
        done = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
    if done.returncode != 0:
        tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
        raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}); the end of {log}:\n{tail}")


def glassformer() -> list[str]:
    return [sys.executable, "-m", "glassformer"]


def eval_json(text: str) -> dict:
    """The metrics object `glassformer eval --json` printed, among any warnings in the same log."""
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                pass
    return json.loads(text[text.index("{"):text.rindex("}") + 1])  # printed over several lines


def ours(name: str, minutes: float, train_file: Path, test_file: Path, out: Path, threads: int | None) -> dict:
    """Our defaults with a budget of `minutes`, scored on the test split (skipped when done)."""
    run = out / "ours" / f"{name}-{tag(minutes)}"
    result = out / "ours" / f"{name}-{tag(minutes)}-test.json"
    if result.is_file():
        return json.loads(result.read_text(encoding="utf-8"))
    if run.exists():
        shutil.rmtree(run)  # an unfinished run: start it again
    run.parent.mkdir(parents=True, exist_ok=True)
    task = "lm" if prepare.kind(name) == "lm" else "tsv"
    cmd = glassformer() + ["train", "--task", task, "--data", str(train_file), "--out", str(run),
                           "--max-minutes", str(minutes), "--quiet"]
    if threads:
        cmd += ["--threads", str(threads)]
    t0 = time.monotonic()
    run_logged(cmd, run.parent / f"{name}-{tag(minutes)}-train.log")
    train_s = time.monotonic() - t0
    eval_log = run.parent / f"{name}-{tag(minutes)}-eval.log"
    run_logged(glassformer() + ["eval", "--ckpt", str(run), "--data", str(test_file), "--json"], eval_log)
    scores = eval_json(eval_log.read_text(encoding="utf-8"))
    scores.pop("hypotheses", None)
    steps = [json.loads(ln).get("step") for ln in (run / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
             if ln.strip().startswith("{")] if (run / "metrics.jsonl").is_file() else []
    scores["steps"] = max([s for s in steps if isinstance(s, int)], default=None)
    scores["train_wall_s"] = train_s
    result.write_text(json.dumps(scores, indent=1), encoding="utf-8")
    return scores


def plain(name: str, minutes: list[float], data_dir: Path, out: Path, threads: int | None) -> dict[float, dict]:
    """Plain PyTorch scored at each budget of one run (skipped when every budget is in its log)."""
    log = out / "plain" / f"{name}.jsonl"

    def read() -> dict[float, dict]:
        if not log.is_file():
            return {}
        rows = [json.loads(ln) for ln in log.read_text(encoding="utf-8").splitlines() if ln.strip()]
        return {float(r["minutes"]): r for r in rows if r.get("split") == "test" and "minutes" in r}

    have = read()
    if all(m in have for m in minutes):
        return have
    log.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PLAIN_THREADS=str(threads or os.cpu_count() or 1))
    run_logged([sys.executable, str(HERE / "plain_torch.py"), name, str(data_dir), str(log),
                ",".join(tag(m) for m in minutes)], log.with_suffix(".log"), env)
    return read()


# ---- the report ----
def quality(name: str, scores: dict) -> float | None:
    key, _ = metric(name)
    if key == "exact_match":
        return scores.get("exact_match")
    return scores.get("bpc")


def plain_quality(name: str, row: dict) -> float | None:
    return row.get("bpc") if prepare.kind(name) == "lm" else 1 - row["ser"]


def fmt(x: float | None, name: str) -> str:
    if x is None:
        return "–"
    return f"{x:.3f}" if prepare.kind(name) == "lm" else f"{100 * x:.1f}%"


def table(results: dict, minutes: list[float]) -> str:
    heads = [f"ours {tag(m)} min" for m in minutes] + [f"plain {tag(m)} min" for m in minutes]
    lines = ["| " + " | ".join(["dataset", "role", "metric", *heads, "simple baselines", "ours first beats"]) + " |",
             "|---|---|---|" + "---:|" * len(heads) + "---|---|"]
    for name, r in results.items():
        cells = [fmt(r[arm].get(tag(m)), name) for arm in ("ours", "plain") for m in minutes]
        base = "; ".join(f"{b} {fmt(v['value'], name)}" for b, v in r["baselines"].items())
        beats = "; ".join(f"{b}: {'never' if m is None else tag(m) + ' min'}" for b, m in r["first_beats"].items())
        unit = "bits/char ↓" if r["metric"] == "bpc" else "exact match ↑"
        lines.append("| " + " | ".join([name, r["role"][:3], unit, *cells, base, beats or "–"]) + " |")
    return "\n".join(lines) + "\n"


def figure(results: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    n = len(results)
    cols = min(n, 4)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
    for ax, (name, r) in zip(axes.flat, results.items()):
        for label, curve, style in (("ours", r["ours"], "o-"), ("plain PyTorch", r["plain"], "s--")):
            pts = sorted((float(m), v) for m, v in curve.items() if v is not None)
            if pts:
                ax.plot([m for m, _ in pts], [v for _, v in pts], style, label=label)
        for i, (b, v) in enumerate(r["baselines"].items()):
            ax.axhline(v["value"], color=f"C{2 + i}", linestyle=":", label=b)
        ax.set_xscale("log")
        ticks = sorted({float(m) for m in r["ours"]} | {float(m) for m in r["plain"]})
        ax.set_xticks(ticks, [tag(m) for m in ticks])
        ax.minorticks_off()
        ax.set_title(f"{name} ({r['role'][:3]})", fontsize=10)
        ax.set_xlabel("training minutes")
        ax.set_ylabel("test bits/char (lower better)" if r["metric"] == "bpc" else "test exact match")
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def summarise(name: str, ours_scores: dict[float, dict], plain_rows: dict[float, dict], base: dict) -> dict:
    key, higher = metric(name)
    ours_curve = {m: quality(name, s) for m, s in ours_scores.items()}
    plain_curve = {m: plain_quality(name, r) for m, r in plain_rows.items()}
    beats = {b: first_beats(ours_curve, v["value"], higher) for b, v in base.items()} if ours_curve else {}
    if plain_curve and ours_curve:
        beats["plain PyTorch"] = first_beats(ours_curve, plain_curve, higher)
    return {"role": role(name), "kind": prepare.kind(name), "metric": key, "higher_is_better": higher,
            "ours": {tag(m): v for m, v in ours_curve.items()}, "plain": {tag(m): v for m, v in plain_curve.items()},
            "baselines": base, "first_beats": beats,
            "ours_detail": {tag(m): s for m, s in ours_scores.items()},
            "plain_detail": {tag(m): r for m, r in plain_rows.items()}}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/suite", help="output folder (default runs/suite)")
    ap.add_argument("--minutes", type=float, nargs="+", default=list(DEFAULT_MINUTES),
                    help="training budgets in minutes (default 2 5 10 30)")
    ap.add_argument("--datasets", nargs="+", default=prepare.NAMES, choices=prepare.NAMES, metavar="NAME",
                    help=f"default: all ({', '.join(prepare.NAMES)})")
    ap.add_argument("--role", choices=("development", "evaluation"), help="only the datasets of this role")
    ap.add_argument("--threads", type=int, help="--threads for ours and PLAIN_THREADS (default: ours the recipe's "
                                                "choice, plain every core)")
    ap.add_argument("--sample", type=int, help="first N training items and N/10 test items of each dataset")
    ap.add_argument("--no-plain", action="store_true", help="skip the plain PyTorch baseline")
    ap.add_argument("--baselines-only", action="store_true", help="only the data and the simple baselines (seconds)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    minutes = sorted(set(args.minutes))
    names = [n for n in args.datasets if not args.role or role(n) == args.role]
    results_path = out / "results.json"
    results = json.loads(results_path.read_text(encoding="utf-8")) if results_path.is_file() else {}
    for name in names:
        train_file, test_file = data_files(name, out, args.sample)
        cache = out / "baselines" / f"{name}.json"
        if cache.is_file():
            base = json.loads(cache.read_text(encoding="utf-8"))
        else:
            base = baselines_of(name, train_file, test_file)
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps(base, indent=1), encoding="utf-8")
        ours_scores = {}
        for m in ([] if args.baselines_only else minutes):
            ours_scores[m] = ours(name, m, train_file, test_file, out, args.threads)
            print(f"{name} ({role(name)}): ours {tag(m)} min: {metric(name)[0]} {quality(name, ours_scores[m]):.4f}",
                  flush=True)
        plain_rows = {} if args.no_plain or args.baselines_only else plain(name, minutes, train_file.parent, out, args.threads)
        results[name] = summarise(name, ours_scores, {m: plain_rows[m] for m in minutes if m in plain_rows}, base)
        results_path.write_text(json.dumps(results, indent=1), encoding="utf-8")
    order = [n for n in prepare.NAMES if n in results]
    results = {n: results[n] for n in order}
    shown = sorted({float(m) for r in results.values() for m in r["ours"]})
    (out / "table.md").write_text(table(results, shown), encoding="utf-8")
    figure(results, out / "curves.png")
    print((out / "table.md").read_text(encoding="utf-8"))
    print(f"wrote {results_path}, {out / 'table.md'}, {out / 'curves.png'}")
    return results


if __name__ == "__main__":
    main()
