"""Pictures of attention: the model view (every head in a grid) and the head view (one head).

The model view puts layer l, head h at row l, column h, each a heatmap of its pattern (queries
down, keys across), so a column of [CLS] stripes or a diagonal just below the main one (a
previous-token head, §2.6) is visible at a glance. The head view draws one head as lines from
each query token (left) to each key token (right), thicker where the weight is larger.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from ..viz.fonts import caption, labels  # noqa: E402  (CJK tokens: a CJK font, or the fallback)
from .roles import ROLES  # noqa: E402


def model_view(P: np.ndarray, tokens: Sequence[str], path: str | Path,
               roles: np.ndarray | None = None, title: str = "") -> Path:
    """Grid of heatmaps, P (layer, head, seq, seq); the role of each head in its title."""
    L, H, S, _ = P.shape
    fig, axes = plt.subplots(L, H, figsize=(1.3 * H + 1, 1.3 * L + 1), squeeze=False)
    for l in range(L):
        for h in range(H):
            ax = axes[l, h]
            ax.imshow(P[l, h], cmap="viridis", vmin=0, vmax=1, interpolation="nearest")
            ax.set_xticks([]), ax.set_yticks([])
            label = f"L{l}H{h}" + (f" {roles[l, h]}" if roles is not None else "")
            ax.set_title(label, fontsize=6)
    fig.suptitle(caption(title or " ".join(tokens)), fontsize=8)
    fig.tight_layout()
    return _save(fig, path)


def head_view(pattern: np.ndarray, tokens: Sequence[str], path: str | Path, title: str = "") -> Path:
    """One head: query tokens (left) joined to key tokens (right), line width ∝ weight; and its heatmap."""
    S, tokens = len(tokens), labels(list(tokens))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9, max(3, 0.28 * S + 1)),
                                   gridspec_kw={"width_ratios": [1, 1.2]})
    y = -np.arange(S)
    for i in range(S):
        for j in range(S):
            w = float(pattern[i, j])
            if w > 0.02:
                ax1.plot([0, 1], [y[i], y[j]], color="tab:blue", alpha=min(1.0, w), lw=3 * w)
    for i, t in enumerate(tokens):
        ax1.text(-0.05, y[i], t, ha="right", va="center", fontsize=8)
        ax1.text(1.05, y[i], t, ha="left", va="center", fontsize=8)
    ax1.text(-0.05, 0.9, "query", ha="right", fontsize=8, weight="bold")
    ax1.text(1.05, 0.9, "key", ha="left", fontsize=8, weight="bold")
    ax1.set_xlim(-0.6, 1.6), ax1.set_ylim(-S + 0.5, 1.4), ax1.axis("off")
    im = ax2.imshow(pattern, cmap="viridis", vmin=0, vmax=1)
    ax2.set_xticks(range(S), tokens, rotation=90, fontsize=7)
    ax2.set_yticks(range(S), tokens, fontsize=7)
    ax2.set_xlabel("key"), ax2.set_ylabel("query")
    fig.colorbar(im, ax=ax2, fraction=0.046)
    fig.suptitle(caption(title), fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def role_grid(mean_scores: dict[str, np.ndarray], majority: np.ndarray, frac: np.ndarray,
              path: str | Path) -> Path:
    """One heatmap per role: mean score of every head over the sentence set; majority roles listed."""
    fig, axes = plt.subplots(2, (len(ROLES) + 1) // 2, figsize=(11, 5.5), squeeze=False)
    for ax, r in zip(axes.flat, ROLES):
        im = ax.imshow(np.nan_to_num(mean_scores[r]), cmap="magma", vmin=0, vmax=1)
        ax.set_title(r), ax.set_xlabel("head"), ax.set_ylabel("layer")
        ax.set_xticks(range(majority.shape[1])), ax.set_yticks(range(majority.shape[0]))
        ax.tick_params(labelsize=7)
        for (l, h), name in np.ndenumerate(majority):
            if name == r and frac[l, h] >= 0.8:
                ax.text(h, l, "●", ha="center", va="center", color="cyan", fontsize=7)
    fig.suptitle("mean role score per head over the sentences (● = that role in ≥ 80% of them)", fontsize=9)
    fig.colorbar(im, ax=axes.ravel().tolist(), fraction=0.02)
    return _save(fig, path)


def trend_plot(trends: dict[str, np.ndarray], path: str | Path, title: str = "") -> Path:
    """Per-layer mean ± std over sentences of entropy and attention distance."""
    keys = [k for k in ("entropy_norm", "distance", "distance_content") if k in trends]
    fig, axes = plt.subplots(1, len(keys), figsize=(4 * len(keys), 3.2), squeeze=False)
    for ax, k in zip(axes[0], keys):
        v = np.asarray(trends[k])  # (sentence, layer)
        x = np.arange(v.shape[1])
        ax.errorbar(x, np.nanmean(v, 0), yerr=np.nanstd(v, 0), marker="o", capsize=3)
        ax.set_xlabel("layer"), ax.set_title(k), ax.set_xticks(x)
    fig.suptitle(caption(title), fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def scatter(Y: np.ndarray, labels: np.ndarray, path: str | Path, title: str = "") -> Path:
    """2-D projection of head outputs coloured by head."""
    fig, ax = plt.subplots(figsize=(5, 4.5))
    colours = plt.get_cmap("tab20")  # 20 distinct colours: one per head for up to 20 heads
    for i, lab in enumerate(np.unique(labels)):
        m = labels == lab
        ax.scatter(Y[m, 0], Y[m, 1], s=6, color=colours(i % 20), label=f"head {lab}")
    ax.legend(fontsize=6, markerscale=2, ncol=2)
    ax.set_title(caption(title), fontsize=9)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
