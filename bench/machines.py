"""One targets table per machine kind the benchmark ran on (issue 11: "quote the range, not the best
machine"). Each `glassformer bench --json` run is one machine; this puts their target tables side by
side, each under the CPU and flags it ran on, into docs/benchmarks.md between two markers:

    python bench/machines.py docs/benchmarks-avx512.json=AVX-512 docs/benchmarks-avx2.json=AVX2 \\
        --into docs/benchmarks.md
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

BEGIN, END = "<!-- machines: written by python bench/machines.py -->", "<!-- /machines -->"


def _shown(row: dict) -> str:
    v = row["value"]
    # a fraction where the goal's first clause is one ("≥ 80 %"); "≥ 1.0×, ≥ 95 % of …" is a ratio
    return f"{v:.0%}" if row["goal"].split(",")[0].strip().endswith("%") else (f"{v:.2f}" if "linear" in row["goal"] else f"{v:.2f}×")


def section(results: dict, label: str, source: str) -> list[str]:
    """The targets of one run under its machine: CPU, flags, threads, load, date."""
    m = results["machine"]
    flags = " ".join(m["cpu_flags"]) if "cpu_flags" in m else "not recorded by this run"
    caps = ", ".join(f"{k}={v}" for k, v in m.get("isa_env", {}).items()) or "none"
    out = [f"### {label}: {m['cpu']}", "",
           f"CPU flags: {flags}; {m['torch_threads']} torch threads; caps: {caps}; load average"
           f" {m.get('load_average', float('nan')):.1f} → {m.get('load_average_end', float('nan')):.1f};"
           f" {results['started']}{' (--quick)' if results.get('quick') else ''}; full report: [{source}]({source}).",
           "", "| target | measured | goal | met |", "|---|---:|---|---|"]
    out += [f"| {r['target']} | {_shown(r)} | {r['goal']} | {'yes' if r['met'] else '**no**'} |"
            for r in results["targets"]]
    b = results.get("generation", {}).get("batch_1", {}).get("bound")
    if b:
        out += ["", f"Batch-1 decoding: {b['decode_s_per_token'] * 1e3:.2f} ms per token against a weight-streaming"
                f" pass of {b['stream_s_per_token'] * 1e3:.2f} ms ({b['stream_GB_per_s']:.1f} GB/s):"
                f" {b['fraction']:.0%} of the bound (HF GPT-2 {b['hf_fraction']:.0%})."]
    out += _winners(results.get("gemm_routes", []), "GEMM route per shape class (rows ≤ × K × N / threads)", True)
    out += _winners(results.get("decode_routes", []), "Decode-step GEMMs (rows ≤ × K × N / threads)", True)
    return out


def _winners(rows: list[dict], title: str, threads: bool) -> list[str]:
    """One line: which route won which shape classes."""
    wins: dict[str, list[str]] = {}
    for r in rows:
        wins.setdefault(r["winner"], []).append(f"{r['rows']}×{r['K']}×{r['N']}" + (f"/{r['threads']}t" if threads else "")
                                                + (" (fwd+bwd)" if r.get("training") else ""))
    if not wins:
        return []
    return ["", f"{title}: " + "; ".join(f"{name} won {', '.join(shapes)}" for name, shapes in sorted(wins.items())) + "."]


def render(runs: list[tuple[Path, str]], into: Path) -> str:
    lines = [BEGIN, "## One table per machine kind", ""]
    for path, label in runs:
        results = json.loads(path.read_text(encoding="utf-8"))
        report = path.with_suffix(".md") if path.with_suffix(".md").is_file() else path
        lines += section(results, label, report.relative_to(into.parent).as_posix()) + [""]
    return "\n".join(lines + [END])


def write_into(runs: list[tuple[Path, str]], into: Path) -> None:
    """Replace the block between the markers (or insert it after the first paragraph)."""
    text = into.read_text(encoding="utf-8")
    block = render(runs, into)
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        title, _, body = text.partition("\n\n")
        text = f"{title}\n\n{block}\n\n{body}"
    into.write_text(text, encoding="utf-8")


def main(argv: list[str]) -> int:
    if "--into" not in argv or argv.index("--into") + 1 >= len(argv):
        print("error: give RESULTS.json=LABEL ... --into docs/benchmarks.md", file=sys.stderr)
        return 2
    i = argv.index("--into")
    into, specs = Path(argv[i + 1]), argv[:i] + argv[i + 2:]
    runs = []
    for spec in specs:
        path, _, label = spec.partition("=")
        if not Path(path).is_file() or not label:
            print(f"error: {spec!r} is not an existing RESULTS.json=LABEL", file=sys.stderr)
            return 2
        runs.append((Path(path), label))
    write_into(runs, into)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
