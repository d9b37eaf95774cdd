"""One curve per dataset from several runs of bench/real/curves.py (issue 32 §2).

The suite's budgets were run at different times, each into its own folder (docs/real-data.md says
which and under what load). This takes their results.json files in order — a later file's point
replaces an earlier one's at the same budget — and writes OUT/results.json, OUT/table.md and
OUT/curves.png with curves.py's own table, figure and "first budget at which ours beats" rule:

    python bench/real/merge.py --out OUT bench/real/published-2min.json RUN5/results.json ...

A file may hold only the curves (`ours`, `plain`) of some datasets: the baselines come from whichever
file has them.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import curves  # noqa: E402  (bench/real/curves.py)


def merge(files: list[Path]) -> dict:
    merged: dict = {}
    for path in files:
        for name, r in json.loads(path.read_text(encoding="utf-8")).items():
            if name.startswith("_"):  # a note about the file, not a dataset
                continue
            key, higher = curves.metric(name)
            m = merged.setdefault(name, {"role": curves.role(name), "metric": key, "higher_is_better": higher,
                                         "ours": {}, "plain": {}, "baselines": {}})
            for arm in ("ours", "plain"):
                for minutes, value in (r.get(arm) or {}).items():
                    m[arm][minutes] = value
            m["baselines"] = r.get("baselines") or m["baselines"]
    for name, m in merged.items():
        ours = {float(k): v for k, v in m["ours"].items()}
        plain = {float(k): v for k, v in m["plain"].items()}
        m["first_beats"] = {b: curves.first_beats(ours, v["value"], m["higher_is_better"]) for b, v in m["baselines"].items()}
        if plain:
            m["first_beats"]["plain PyTorch"] = curves.first_beats(ours, plain, m["higher_is_better"])
        for arm in ("ours", "plain"):
            m[arm] = dict(sorted(m[arm].items(), key=lambda kv: float(kv[0])))
    return merged


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="folder for results.json, table.md, curves.png")
    ap.add_argument("files", nargs="+", type=Path, help="results.json files of curves.py runs, in order")
    args = ap.parse_args(argv)
    missing = [str(f) for f in args.files if not f.is_file()]
    if missing:
        sys.exit(f"error: no such results file: {', '.join(missing)}")
    results = merge(args.files)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    budgets = sorted({float(k) for r in results.values() for arm in ("ours", "plain") for k in r[arm]})
    (out / "table.md").write_text(curves.table(results, budgets), encoding="utf-8")
    curves.figure(results, out / "curves.png")
    print(f"wrote {out / 'results.json'}, {out / 'table.md'}, {out / 'curves.png'}")
    return results


if __name__ == "__main__":
    main()
