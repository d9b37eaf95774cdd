"""CJK text in every picture (issue 31 §6).

- A CJK font installed after matplotlib wrote its font cache (scripts/system-deps.sh runs during
  `make demo`, after matplotlib's first import) is found on disk and added, not reported missing.
- With no CJK font at all, nothing a picture draws — tick labels, titles, the text beside a head
  view — asks the font for a glyph it lacks: matplotlib's own "Glyph … missing from font(s)"
  warning is the independent witness, for every plotting function.
"""

from __future__ import annotations

import shutil
import subprocess
import warnings

import matplotlib
import numpy as np
import pytest
from matplotlib import font_manager

from glassformer.viz import fonts

TOKENS = ["猫", "吃", "鱼"]
TITLE = "猫 吃 鱼 → the cat eats the fish"


def test_a_font_missing_from_the_cache_is_found_on_disk(monkeypatch):
    on_disk = subprocess.run(["fc-list", ":lang=zh", "family"], capture_output=True, text=True).stdout \
        if shutil.which("fc-list") else ""
    assert "CJK" in on_disk, "scripts/system-deps.sh installs fonts-noto-cjk; fontconfig lists none"
    stale = [f for f in font_manager.fontManager.ttflist if "CJK" not in f.name]  # the cache before the install
    monkeypatch.setattr(font_manager.fontManager, "ttflist", stale)
    fonts.cjk_font.cache_clear()
    try:
        family = fonts.cjk_font()
        assert family is not None and family in on_disk  # fontconfig names the same family
        assert family in {f.name for f in font_manager.fontManager.ttflist}  # matplotlib can now use it
    finally:
        fonts.cjk_font.cache_clear()


def test_caption_reads_chinese_as_pinyin_without_a_font(monkeypatch):
    monkeypatch.setattr(fonts, "cjk_font", lambda: None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert fonts.caption(TITLE) == "māo chī yú → the cat eats the fish"
        assert fonts.caption("猫吃鱼，ＯＫ") == "māo chī yú,OK"  # fullwidth forms are ASCII (NFKC)
        assert fonts.caption("the cat") == "the cat"


def _pictures(tmp_path):
    from glassformer.inspect.views import head_view, model_view, scatter, trend_plot
    from glassformer.train.plots import alignment_heatmap
    from glassformer.viz.attention import plot_attention
    from glassformer.viz.drift import plot_drift
    from glassformer.viz.heatmap import plot_heatmap
    from glassformer.viz.positional import plot_positional

    rng = np.random.default_rng(0)
    A = rng.dirichlet(np.ones(3), size=(2, 3))  # (heads, q, k)
    yield "alignment", lambda: alignment_heatmap(A[0], TOKENS, TOKENS + ["<eos>"][:0], tmp_path / "a.png", title=TITLE)
    yield "attention", lambda: plot_attention([A], TOKENS, tmp_path / "b.png", title=TITLE)
    yield "heatmap", lambda: plot_heatmap(rng.normal(size=(3, 3)), TOKENS, TOKENS, tmp_path / "c.png", TITLE, "x")
    yield "drift", lambda: plot_drift(TOKENS, ["X0", "layer 1"], np.ones((2, 3)), np.ones((2, 3, 3)),
                                      tmp_path / "d.png")
    yield "positional", lambda: plot_positional(8, tmp_path / "e.png", tokens=TOKENS, n_positions=3)
    yield "model view", lambda: model_view(A[None], TOKENS, tmp_path / "f.png")
    yield "head view", lambda: head_view(A[0], TOKENS, tmp_path / "g.png", title=TITLE)
    yield "trend", lambda: trend_plot({"entropy_norm": rng.random((3, 2))}, tmp_path / "h.png", title=TITLE)
    yield "scatter", lambda: scatter(rng.normal(size=(6, 2)), np.array([0, 0, 1, 1, 2, 2]), tmp_path / "i.png",
                                     title=TITLE)


def test_no_picture_asks_for_a_glyph_the_font_lacks(tmp_path, monkeypatch):
    monkeypatch.setattr(fonts, "cjk_font", lambda: None)  # a machine with no CJK font
    missing = {}
    with matplotlib.rc_context({"font.family": ["DejaVu Sans"]}):  # what such a machine draws with
        for name, draw in _pictures(tmp_path):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                draw()
            lacking = [str(w.message) for w in caught if "missing from font" in str(w.message)]
            if lacking:
                missing[name] = lacking[0]
    assert not missing, missing


@pytest.mark.parametrize("name", ["alignment", "head view"])
def test_with_the_font_the_tokens_are_drawn_as_they_are(tmp_path, name):
    """With the font, nothing is replaced: the labels are the tokens themselves."""
    fonts.cjk_font.cache_clear()
    assert fonts.cjk_font() is not None
    assert fonts.labels(TOKENS) == TOKENS and fonts.caption(TITLE) == TITLE
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dict(_pictures(tmp_path))[name]()
    assert not [w for w in caught if "missing from font" in str(w.message)]
