"""Attention heatmaps: one panel per layer × head, queries down, keys across (seed 000 §7.3, §8.3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .fonts import caption, labels


def plot_attention(patterns: list[np.ndarray], tokens: list[str], path: str | Path,
                   title: str = "Attention weights A = softmax(QKᵀ/√d_k)") -> Path:
    """patterns[l]: (heads, q, k) of layer l. Writes one PNG with a layers × heads grid."""
    import matplotlib.pyplot as plt

    names = labels(tokens)
    n_layers, n_heads, n = len(patterns), patterns[0].shape[0], len(tokens)
    cell = max(2.6, 0.32 * n + 1.2)
    fig, axes = plt.subplots(n_layers, n_heads, figsize=(cell * n_heads + 1.2, cell * n_layers + 0.8),
                             squeeze=False, constrained_layout=True)
    image = None
    for l, layer in enumerate(patterns):
        for h in range(n_heads):
            ax = axes[l][h]
            image = ax.imshow(layer[h], vmin=0.0, vmax=1.0, cmap="viridis")
            ax.set_title(f"layer {l + 1} · head {h + 1}", fontsize=10)
            ax.set_xticks(range(n), names, fontsize=9, rotation=90 if n > 8 else 0)
            ax.set_yticks(range(n), names, fontsize=9)
            if h == 0:
                ax.set_ylabel("query")
            if l == n_layers - 1:
                ax.set_xlabel("key")
            if n <= 8:  # the numbers themselves, as the seed's tables show them
                for i in range(n):
                    for j in range(n):
                        v = layer[h, i, j]
                        ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8,
                                color="black" if v > 0.6 else "white")
    fig.colorbar(image, ax=axes, shrink=0.8, label="weight (each row sums to 1)")
    fig.suptitle(caption(title))
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
