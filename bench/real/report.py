"""Learning curves against wall-clock time and the results table of the real-data benchmark.

    python bench/real/report.py runs/real [docs/figures]

Reads what bench/real/run.sh wrote (ours-*/metrics.jsonl, plain-*.jsonl, simple.json,
ours-*-test.json) and draws docs/figures/real-g2p.png, real-lm-en.png, real-lm-zh.png; prints a
Markdown table of the test numbers.
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

METRIC = {"g2p": ("ser", "valid word error rate (G2P WER = 1 - exact match)"),
          "pinyin": ("ser", "valid phrase error rate (1 - exact match)"),
          "lm-en": ("bpc", "valid bits per character"), "lm-zh": ("bpc", "valid bits per character")}


def rows(path: Path, split: str) -> list[dict]:
    if not path.exists():
        return []
    return [r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines()) if r.get("split") == split]


def curve(root: Path, task: str, figures: Path) -> None:
    key, label = METRIC[task]
    plt.figure(figsize=(6, 3.6))
    for name, records in (("glassformer (defaults)", rows(root / f"ours-{task}" / "metrics.jsonl", "valid")),
                          ("plain PyTorch", rows(root / f"plain-{task}.jsonl", "valid"))):
        pts = [(r["elapsed_s"] / 60, r[key]) for r in records if key in r]
        if pts:
            plt.plot(*zip(*pts), marker=".", label=name)
    simple = json.loads((root / "simple.json").read_text()) if (root / "simple.json").exists() else {}
    if task in simple:
        plt.axhline(simple[task][key], color="grey", ls="--",
                    label="per-symbol majority (test)" if task in ("g2p", "pinyin") else "5-gram (test)")
    protocol = root / f"protocol-{task}.txt"  # written by run.sh
    plt.xlabel("wall-clock minutes (" + (protocol.read_text().strip() if protocol.exists()
                                          else "one thread each, run side by side") + ")")
    plt.ylabel(label)
    plt.title(task)
    plt.legend()
    plt.tight_layout()
    figures.mkdir(parents=True, exist_ok=True)
    plt.savefig(figures / f"real-{task}.png", dpi=110)
    plt.close()


# seq2seq rows: (title, sequence-error label, token-error label, published (sequence, token))
SEQ2SEQ = {"g2p": ("G2P (CMUdict, {n} words)", "WER", "PER", ("22% (Yolchuyeva 2019)", "5% (Yolchuyeva 2019)")),
           "pinyin": ("Chinese phrase → pinyin (pypinyin, {n} phrases)", "phrase error", "syllable error", ("-", "-"))}


def table(root: Path) -> str:
    simple = json.loads((root / "simple.json").read_text()) if (root / "simple.json").exists() else {}
    lines = ["| task | metric (test) | glassformer defaults | plain PyTorch | simple baseline | published |",
             "|---|---|---|---|---|---|"]
    for task in ("g2p", "pinyin", "lm-en", "lm-zh"):
        ours_path = root / f"ours-{task}-test.json"
        ours = json.loads(ours_path.read_text()) if ours_path.exists() else {}
        plain = (rows(root / f"plain-{task}.jsonl", "test") or [{}])[-1]
        s = simple.get(task, {})
        if task in SEQ2SEQ:
            title, seq_err, tok_err, published = SEQ2SEQ[task]
            pct = lambda v: f"{100 * v:.1f}%" if v is not None else "-"  # noqa: E731
            n = ours.get("n_scored", ours.get("n", "-"))  # words, where a test word has several lines
            lines.append(f"| {title.format(n=n)} | {seq_err} | {pct(ours.get('ser'))} | "
                         f"{pct(plain.get('ser'))} | {pct(s.get('ser'))} | {published[0]} |")
            lines.append(f"| | {tok_err} | {pct(ours.get('wer'))} | {pct(plain.get('per'))} | "
                         f"{pct(s.get('per'))} | {published[1]} |")
        else:
            fmt = lambda v: f"{v:.3f}" if v is not None else "-"  # noqa: E731
            lines.append(f"| char LM, fortunes-{task[3:]} | bits/char | {fmt(ours.get('bpc'))} | "
                         f"{fmt(plain.get('bpc'))} | {fmt(s.get('bpc'))} | - |")
    return "\n".join(lines)


def main(root: str, figures: str = "docs/figures") -> None:
    r = Path(root)
    for task in METRIC:
        if (r / f"ours-{task}" / "metrics.jsonl").exists() or (r / f"plain-{task}.jsonl").exists():
            curve(r, task, Path(figures))  # a task not run here keeps its earlier figure
    print(table(r))


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="Learning curves and the results table of the real-data benchmark.")
    ap.add_argument("root", help="the folder bench/real/run.sh wrote")
    ap.add_argument("figures", nargs="?", default="docs/figures", help="where the figures go (default docs/figures)")
    args = ap.parse_args()
    if not Path(args.root).is_dir():
        ap.error(f"{args.root!r} is not a folder")
    main(args.root, args.figures)
