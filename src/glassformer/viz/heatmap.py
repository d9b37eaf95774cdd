"""One labelled heatmap (layers × positions, layers × heads) for the interpretability commands.

Token labels may be Chinese (猫 追 狗): `fonts.labels` picks a CJK font or falls back to #i.
Signed values (patching effects, logit attributions) share one diverging scale centred on 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .fonts import caption, labels


def plot_heatmap(values: np.ndarray, rows: list[str], cols: list[str], path: str | Path, title: str,
                 colorbar: str, signed: bool = True, annotate: bool | None = None) -> Path:
    """Write values (rows, cols) as a PNG with its labels and the numbers in the cells when small."""
    import matplotlib.pyplot as plt

    values = np.asarray(values, dtype=float)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    col_names, row_names = labels(list(cols)), labels(list(rows))
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(cols) + 2.5), max(2.5, 0.45 * len(rows) + 1.5)),
                           constrained_layout=True)
    lim = float(np.nanmax(np.abs(values))) or 1.0
    if signed:
        image = ax.imshow(values, cmap="RdBu_r", vmin=-lim, vmax=lim, aspect="auto")
    else:
        image = ax.imshow(values, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(cols)), col_names, rotation=90 if len(cols) > 10 else 0)
    ax.set_yticks(range(len(rows)), row_names)
    ax.set_title(caption(title), fontsize=10)
    if annotate if annotate is not None else values.size <= 120:
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                strong = abs(values[i, j]) > 0.6 * lim  # white on the dark ends of the scale
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if strong and signed else "black")
    fig.colorbar(image, ax=ax, label=colorbar)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
