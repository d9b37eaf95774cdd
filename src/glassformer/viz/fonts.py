"""A font that can draw 猫 吃 鱼: find an installed CJK font, or fall back cleanly with one warning.

Matplotlib's default DejaVu Sans has no CJK glyphs (labels become empty boxes). We look for a CJK
family matplotlib already knows — Debian's `fonts-noto-cjk` (installed by scripts/system-deps.sh),
Source Han, WenQuanYi, Droid Sans Fallback — and put it in the font list with DejaVu Sans behind
it (matplotlib falls back per glyph). With none installed, token labels that hold CJK characters
are replaced by their positions (#0, #1, …) and one warning says what to install.
"""

from __future__ import annotations

import functools
import re
import warnings

import matplotlib

matplotlib.use("Agg")  # files only, never a window
from matplotlib import font_manager  # noqa: E402

# Preferred first: sans before serif, Simplified Chinese before the other CJK variants.
CJK_FAMILIES = ("Noto Sans CJK SC", "Noto Sans CJK TC", "Noto Sans CJK JP", "Noto Sans SC",
                "Source Han Sans SC", "Source Han Sans CN", "WenQuanYi Zen Hei", "WenQuanYi Micro Hei",
                "Droid Sans Fallback", "Noto Serif CJK SC", "AR PL UMing CN", "SimHei", "Microsoft YaHei")
_CJK = re.compile(r"[\u2e80-\u9fff\uf900-\ufaff\uff00-\uffef]")
INSTALL_HINT = "install a CJK font (Debian: apt-get install fonts-noto-cjk)"


@functools.lru_cache(maxsize=1)
def cjk_font() -> str | None:
    """The name of an installed CJK font family matplotlib can use, or None."""
    known = {f.name for f in font_manager.fontManager.ttflist}
    for family in CJK_FAMILIES:
        if family in known:
            return family
    for name in sorted(known):  # any other family that says it is CJK
        if "CJK" in name:
            return name
    return None


def setup_fonts() -> bool:
    """Point matplotlib at the CJK font (with DejaVu Sans as per-glyph fallback); False if none."""
    family = cjk_font()
    if family is None:
        return False
    matplotlib.rcParams["font.family"] = [family, "DejaVu Sans"]
    matplotlib.rcParams["axes.unicode_minus"] = False  # CJK fonts often lack U+2212
    return True


@functools.lru_cache(maxsize=1)
def _warn_once() -> None:
    warnings.warn(f"no CJK font found; token labels are shown as positions #0, #1, … ({INSTALL_HINT})",
                  stacklevel=3)


def labels(tokens: list[str]) -> list[str]:
    """Token labels that will render: the tokens themselves, or #i for CJK tokens without a CJK font."""
    if setup_fonts() or not any(_CJK.search(t) for t in tokens):
        return list(tokens)
    _warn_once()
    return [f"#{i}" if _CJK.search(t) else t for i, t in enumerate(tokens)]
