"""Pictures of a run: the loss curve and the cross-attention alignment (seed 000 §7.5).

§7.5: the decoder's "cat" finds the encoder's 猫 through cross-attention — "this is the
alignment of translation". `alignment_heatmap` draws exactly that: target tokens (rows) ×
source tokens (columns), the attention weights of the last decoder layer averaged over heads.
Both use matplotlib's Agg backend (no display needed); Chinese labels use the CJK font that
`glassformer.viz.fonts` finds.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ..viz.fonts import caption, labels  # noqa: E402  (a CJK font for 猫 吃 鱼, or #i labels and one warning)

def read_metrics(path: str | Path) -> list[dict]:
    return [json.loads(ln) for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]


def loss_curve(metrics_path: str | Path, out_png: str | Path) -> Path:
    """Training loss (label-smoothed) and held-out cross-entropy against the step; exact match if any."""
    records = read_metrics(metrics_path)
    train = [r for r in records if r.get("split") == "train"]
    valid = [r for r in records if r.get("split") == "valid"]
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    if train:
        ax.plot([r["step"] for r in train], [r["loss"] for r in train], lw=1.2, color="#3b6fb6",
                label="train loss (label-smoothed)")
    if valid:
        ax.plot([r["step"] for r in valid], [r["loss"] for r in valid], "o-", ms=3, color="#d9822b",
                label="held-out cross-entropy")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (nats per token)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3, which="both")
    handles, names = ax.get_legend_handles_labels()
    if any("exact_match" in r for r in valid):
        ax2 = ax.twinx()
        ax2.plot([r["step"] for r in valid], [100 * r.get("exact_match", 0) for r in valid], "s--", ms=3,
                 color="#2e8b57", label="held-out exact match (%)")
        ax2.set_ylabel("exact match (%)")
        ax2.set_ylim(0, 101)
        h2, l2 = ax2.get_legend_handles_labels()
        handles, names = handles + h2, names + l2
    if handles:
        ax.legend(handles, names, loc="center right", fontsize=8)
    ax.set_title("Training curve")
    fig.tight_layout()
    out = Path(out_png)
    fig.savefig(out)
    plt.close(fig)
    return out


def alignment_heatmap(weights, src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                      out_png: str | Path, title: str = "Cross-attention alignment") -> Path:
    """weights (tgt_len, src_len): row i is where target token i looked in the source."""
    import numpy as np

    w = np.asarray(weights, dtype=float)
    src_labels, tgt_labels = labels(list(src_tokens)), labels(list(tgt_tokens))
    fig, ax = plt.subplots(figsize=(1.2 + 0.9 * len(src_tokens), 1.0 + 0.6 * len(tgt_tokens)), dpi=130)
    im = ax.imshow(w, cmap="Blues", vmin=0.0, vmax=max(1e-9, float(w.max())), aspect="auto")
    ax.set_xticks(range(len(src_tokens)), labels=src_labels, fontsize=13)
    ax.set_yticks(range(len(tgt_tokens)), labels=tgt_labels, fontsize=11)
    ax.xaxis.tick_top()
    ax.set_xlabel("source (encoder)")
    ax.set_ylabel("translation (decoder)")
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=8,
                    color="white" if w[i, j] > 0.6 * w.max() else "black")
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    ax.set_title(caption(title), fontsize=10, pad=28)
    fig.tight_layout()
    out = Path(out_png)
    fig.savefig(out)
    plt.close(fig)
    return out
