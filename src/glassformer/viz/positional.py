"""The sinusoidal positional encoding as pictures (seed 000 §3.2–3.3).

Three panels: the PE matrix (position × dimension); the waves of a few dimensions, from the fast
ones (wavelength 2π ≈ 6.28, "which neighbour") to the slow ones ("which part of the text");
and the wavelength 2π·10000^(2i/d) of every sin/cos pair on a log scale — §3.3's "multi-scale".
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from ..nn.positional import SinusoidalPE
from .fonts import labels


def pe_matrix(width: int, positions, base: float = 10000.0, layout: str = "interleaved") -> np.ndarray:
    """PE (len(positions), width), computed by the model's own SinusoidalPE (an int means 0..n-1)."""
    pos = torch.arange(positions) if isinstance(positions, int) else torch.as_tensor(positions)
    with torch.no_grad():
        return SinusoidalPE(width, base, layout)(pos).double().numpy()


def plot_positional(width: int, path: str | Path, tokens: list[str] | None = None, n_positions: int = 64,
                    base: float = 10000.0, layout: str = "interleaved") -> Path:
    import matplotlib.pyplot as plt

    pe = pe_matrix(width, n_positions, base, layout)
    fig, (ax_m, ax_w, ax_l) = plt.subplots(1, 3, figsize=(16, 4.6), constrained_layout=True,
                                           gridspec_kw={"width_ratios": [1.1, 1.6, 1.0]})
    img = ax_m.imshow(pe, aspect="auto", cmap="RdBu_r", vmin=-1, vmax=1, interpolation="nearest")
    ax_m.set_xlabel("dimension (even: sin, odd: cos)")
    ax_m.set_ylabel("position")
    ax_m.set_title(f"PE matrix, d_model = {width}")
    fig.colorbar(img, ax=ax_m, shrink=0.8)

    half = width // 2
    picks = sorted({0, 1, half // 4, half // 2, half - 1} & set(range(half)))
    pos = np.linspace(0, n_positions - 1, 20 * n_positions)  # the waves are continuous in pos
    waves = pe_matrix(width, pos, base, layout)
    for i in picks:
        dim = 2 * i if layout == "interleaved" else i
        wavelength = 2 * math.pi * base ** (2 * i / width)
        ax_w.plot(pos, waves[:, dim], label=f"dim {dim} (sin, i={i}): λ = {wavelength:,.1f}")
    if tokens:
        names = labels(tokens)
        k = min(len(tokens), n_positions)
        ax_w.scatter(np.arange(k), pe[:k, 0], color="black", zorder=3, s=18, label="the sentence's tokens")
        for p in range(min(k, 8)):
            ax_w.annotate(names[p], (p, pe[p, 0]), textcoords="offset points", xytext=(2, 6), fontsize=10)
    ax_w.set_xlabel("position")
    ax_w.set_ylabel("PE value")
    ax_w.set_title("waves at several dimensions: fast (local) to slow (global)")
    ax_w.legend(fontsize=8, loc="lower left")

    i = np.arange(half)
    lam = 2 * math.pi * base ** (2 * i / width)
    ax_l.semilogy(i, lam, "o-")
    ax_l.axhline(2 * math.pi, color="grey", ls=":", lw=1)
    ax_l.axhline(2 * math.pi * base, color="grey", ls=":", lw=1)
    ax_l.text(0, 2 * math.pi * 1.3, "2π ≈ 6.28", fontsize=8)
    ax_l.text(0, 2 * math.pi * base * 0.55, f"{base:g}·2π ≈ {2 * math.pi * base:,.0f}", fontsize=8)
    ax_l.set_xlabel("pair index i (dims 2i, 2i+1)")
    ax_l.set_ylabel("wavelength (positions)")
    ax_l.set_title("wavelength 2π·10000^(2i/d) (§3.3)")
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
