"""Pictures of a forward pass (matplotlib, Agg, PNG): attention heatmaps, positional encoding, cosine drift.

`render_pictures(result, out_dir)` draws all three from a walkthrough `build()` result.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .attention import plot_attention
from .drift import plot_drift
from .fonts import cjk_font, labels, setup_fonts
from .positional import pe_matrix, plot_positional


def render_pictures(result: dict, out_dir: str | Path) -> dict[str, Path]:
    """attention.png, positional.png (sinusoidal PE only) and drift.png under `out_dir`."""
    from ..walkthrough.analysis import attention_name, layer_names, stages

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokens, cfg = result["tokens"], result["config"]
    files = {}
    attn = attention_name(result)
    patterns = [np.asarray(result["trace"][f"{p}.{attn}.pattern"]) for p in layer_names(result)]
    if patterns:
        files["attention"] = plot_attention(patterns, tokens, out / "attention.png")
    if cfg["pe"] in ("sinusoidal", "sinusoidal_half"):
        width = cfg["d_pos"] if cfg["pe_combine"] == "concat" else cfg["d_model"]
        files["positional"] = plot_positional(width, out / "positional.png", tokens, base=cfg["pe_base"],
                                              layout="half" if cfg["pe"] == "sinusoidal_half" else "interleaved")
    st = stages(result)
    x0 = st[0][1]
    norm = lambda a: a / np.linalg.norm(a, axis=-1, keepdims=True)  # noqa: E731
    drift = np.stack([np.sum(norm(x0) * norm(X), axis=-1) for _, X in st])
    pairwise = np.stack([norm(X) @ norm(X).T for _, X in st])
    files["drift"] = plot_drift(tokens, [s for s, _ in st], drift, pairwise, out / "drift.png")
    return files


__all__ = ["render_pictures", "plot_attention", "plot_drift", "plot_positional", "pe_matrix", "cjk_font",
           "labels", "setup_fonts"]
