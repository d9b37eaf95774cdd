"""Put one re-measured text row on the claims page: docs/claims/measured/ROW/ from an `ablate` folder.

Usage: python scripts/claims_merge_row.py ROW OUT [--seconds S --note TEXT] [--measured DIR] [--no-page]

OUT is the --out folder of `glassformer ablate ROW --out OUT --runs docs/claims/runs` (its results.json and
run.json). A row assembled from archived runs took seconds to assemble, so the seconds the page shows (and
sums into its budget, issue 28 §7) are S, the one-core time of the runs only this row needs, and TEXT says
how they were summed. Both files get S — the page's seconds and run.json's must agree, or run.json carries
the note that says why (tests/test_claims_runs.py checks every measured folder) — then the page is
regenerated from the published docs/claims.json with every measured folder (scripts/claims_redecide.py
--base), unless --no-page. Without --seconds, S is the sum of the seconds each of the row's runs kept when it
trained (Context.memo, since 2026-12-06; a run of this row that a later session takes back from the archive
keeps its time there), and the note is written from what was summed; a run another row trained, or one from the
archive with no time, is counted where it trained; a row with a run that trained but kept no time (older code)
needs --seconds and --note.
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from glassformer.experiments.base import run_digest

ROOT = Path(__file__).resolve().parent.parent


def merge(row: str, out: Path, seconds: float, note: str, measured: Path) -> Path:
    results, run = (json.loads((out / name).read_text(encoding="utf-8")) for name in ("results.json", "run.json"))
    if [r["id"] for r in results] != [row]:
        sys.exit(f"{out}/results.json holds {[r['id'] for r in results]}, not the row {row!r}: give the --out folder "
                 f"of `glassformer ablate {row}`")
    if len(note) < 40:
        sys.exit("--note: say how the seconds were summed (which runs, from what times), in a sentence or more")
    for r in results:
        r["seconds"] = seconds
    run.update(seconds=seconds, seconds_note=note,
               command=run["command"].replace(f"{ROOT}/", ""))  # the archive named as in the repository
    folder = measured / row
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in (("results.json", results), ("run.json", run)):
        (folder / name).write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
    return folder


def _sweep_runs(summary: Path) -> list[str]:
    """The digests of a learning-rate sweep's runs (base.sweep_lr), from its summary's identity: each run
    is the sweep's arm at one swept rate and one of its seeds."""
    kept = json.loads(summary.read_text(encoding="utf-8"))
    arm = kept["identity"]["sweep_of"]
    runs = [{**arm, "spec": {**arm["spec"], "lr": float(lr)}, "seed": seed}
            for lr in kept["value"] for seed in kept["identity"]["seeds"]]
    return [run_digest(i) for i in runs]


def run_seconds(row: str, out: Path, archive: Path = ROOT / "docs" / "claims" / "runs") -> tuple[float, str]:
    """The one-core seconds of the runs `ablate ROW --out OUT` trained itself, from each run's own timer, and
    a note that says what was summed. A run the row took from the archive, or that another row trained, is
    not counted (it is counted where it trained)."""
    runs = out / "cache" / "runs"
    timed, reused, untimed = [], [], []

    def count(name: str, digest: str, whole_sweep: bool = False) -> None:
        shared = runs / "shared" / f"full.{digest}.json"
        file = shared if shared.exists() or not whole_sweep else archive / shared.name
        kept = json.loads(file.read_text(encoding="utf-8")) if file.exists() else {}
        if "seconds" in kept and kept.get("row") == row:
            timed.append((kept["seconds"], kept.get("threads", 1)))
        elif kept.get("row", row) != row or (not whole_sweep and (archive / shared.name).exists()):
            reused.append(name)
        else:
            untimed.append(name)

    pointers = sorted(p.name for p in (runs / row).glob("full.*.json"))
    for name in pointers:
        parts = name.split(".")
        if len(parts) >= 4 and parts[-3].startswith("s") and parts[-3][1:].isdigit():
            count(name, parts[-2])
        elif not any(other.startswith(name.rsplit(".", 2)[0] + ".") and other.count(".") > name.count(".")
                     for other in pointers):
            # a whole sweep taken from the archive (a later session's resume): its runs were never
            # opened here, so they are found from the sweep's identity, each run's own file and time
            for digest in _sweep_runs(runs / "shared" / f"full.{parts[-2]}.json"):
                count(f"{name} (its run {digest})", digest, whole_sweep=True)
    if untimed:
        sys.exit(f"{len(untimed)} runs of {row} kept no time ({untimed[0]}, …: trained by older code, or their "
                 f"files in {runs / 'shared'} are gone): give --seconds and --note")
    total = sum(sec for sec, _ in timed)
    threads = sorted({t for _, t in timed})
    note = (f"one-core seconds of the {len(timed)} runs this row trained, each timed by itself when it trained "
            f"(Context.memo; {', '.join(map(str, threads)) or 'no'} thread(s) per run; a run trained in an earlier "
            f"session keeps its time in its archived file), summed; {len(reused)} runs taken from the archive or "
            "trained by another row are counted where they trained")
    return round(total, 1), note


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("row")
    ap.add_argument("out", type=Path)
    ap.add_argument("--seconds", type=float)
    ap.add_argument("--note")
    ap.add_argument("--measured", type=Path, default=ROOT / "docs" / "claims" / "measured")
    ap.add_argument("--no-page", action="store_true")
    args = ap.parse_args()
    if (args.seconds is None) != (args.note is None):
        sys.exit("give --seconds and --note together, or neither (the runs' own times are summed)")
    if args.seconds is None:
        args.seconds, args.note = run_seconds(args.row, args.out)
    folder = merge(args.row, args.out, args.seconds, args.note, args.measured)
    print(f"{folder}: results.json and run.json at {args.seconds:.0f} s")
    if args.no_page:
        return
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as base:
        base.write(subprocess.run(["git", "show", "HEAD:docs/claims.json"], cwd=ROOT, check=True,
                                  capture_output=True, text=True).stdout)
    folders = sorted(str(p) + "/" for p in args.measured.iterdir() if p.is_dir())
    try:
        subprocess.run([sys.executable, str(ROOT / "scripts" / "claims_redecide.py"), "--base", base.name, *folders],
                       cwd=ROOT, check=True)
    finally:
        Path(base.name).unlink()


if __name__ == "__main__":
    main()
