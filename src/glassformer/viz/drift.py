"""Cosine drift (seed 000 §7.3) and pairwise similarity (§7.4) across the layers, as line plots."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .fonts import labels


def plot_drift(tokens: list[str], stage_labels: list[str], drift: np.ndarray, pairwise: np.ndarray,
               path: str | Path) -> Path:
    """drift (n_stages, n): cos(X0_i, X_s_i), stage 0 = X0 (all ones); pairwise (n_stages, n, n)."""
    import matplotlib.pyplot as plt

    names = labels(tokens)
    n = len(tokens)
    x = np.arange(len(stage_labels))
    fig, (ax_d, ax_p) = plt.subplots(1, 2, figsize=(12, 4.4), constrained_layout=True)
    colors = plt.get_cmap("tab10" if n <= 10 else "tab20").colors
    for i in range(n):
        ax_d.plot(x, drift[:, i], "o-", label=names[i], color=colors[i % len(colors)])
    ax_d.set_xticks(x, stage_labels)
    ax_d.set_ylim(min(-0.05, float(drift.min()) - 0.05), 1.05)
    ax_d.set_ylabel("cos(token at X₀, token at this layer)")
    ax_d.set_title("drift from X₀: how much of each token's start survives (§7.3)")
    ax_d.legend(fontsize=10, ncol=max(1, n // 8))
    ax_d.grid(alpha=0.3)

    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    if len(pairs) <= 10:  # one line per pair, as the seed's §7.4 lists them
        for i, j in pairs:
            ax_p.plot(x, pairwise[:, i, j], "o-", label=f"{names[i]}–{names[j]}")
    elif pairs:  # too many lines to read: the mean, and the band from least to most similar pair
        iu = np.triu_indices(n, 1)
        vals = pairwise[:, iu[0], iu[1]]
        ax_p.fill_between(x, vals.min(1), vals.max(1), alpha=0.25, label=f"range over {len(pairs)} pairs")
        ax_p.plot(x, vals.mean(1), "o-", label="mean over pairs")
    ax_p.set_xticks(x, stage_labels)
    ax_p.set_ylabel("cosine similarity")
    ax_p.set_title("pairwise similarity after each layer (§7.4)")
    if pairs:
        ax_p.legend(fontsize=9)
    ax_p.grid(alpha=0.3)
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
