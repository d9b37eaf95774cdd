"""A font that can draw 猫 吃 鱼: find an installed CJK font, or fall back cleanly with one warning.

Matplotlib's default DejaVu Sans has no CJK glyphs (labels become empty boxes). We look for a CJK
family matplotlib already knows — Debian's `fonts-noto-cjk` (installed by scripts/system-deps.sh),
Source Han, WenQuanYi, Droid Sans Fallback — and put it in the font list with DejaVu Sans behind
it (matplotlib falls back per glyph). With none installed, token labels that hold CJK characters
are replaced by their positions (#0, #1, …), titles and other free text by `caption` (Chinese
characters as tone-marked pinyin, which DejaVu Sans draws), and one warning says what to install.

Matplotlib caches its font list; a font installed after the cache was written (scripts/system-deps.sh
runs during `make demo`, after matplotlib's first import) is not in it. When the cached list has no
CJK family, the system's font folders are searched once and any CJK font found there is added.
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


# file names of CJK fonts, for fonts installed after matplotlib's cache was written
_CJK_FILES = re.compile(r"(cjk|wqy|wenquanyi|droidsansfallback|sourcehan|uming|ukai|simhei|msyh)", re.I)


def _pick(known: set[str]) -> str | None:
    for family in CJK_FAMILIES:
        if family in known:
            return family
    for name in sorted(known):  # any other family that says it is CJK
        if "CJK" in name:
            return name
    return None


def _add_uncached_fonts() -> int:
    """Add CJK font files on disk that matplotlib's cached font list lacks; how many were added."""
    cached = {f.fname for f in font_manager.fontManager.ttflist}
    added = 0
    for path in font_manager.findSystemFonts():
        if path not in cached and _CJK_FILES.search(path.rsplit("/", 1)[-1]):
            try:
                font_manager.fontManager.addfont(path)
                added += 1
            except (OSError, RuntimeError, ValueError):  # a file FreeType cannot read: not a font to use
                continue
    return added


@functools.lru_cache(maxsize=1)
def cjk_font() -> str | None:
    """The name of an installed CJK font family matplotlib can use, or None."""
    family = _pick({f.name for f in font_manager.fontManager.ttflist})
    if family is None and _add_uncached_fonts():
        family = _pick({f.name for f in font_manager.fontManager.ttflist})
    return family


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


def caption(text: str) -> str:
    """A title or other free text that will render: as given when a CJK font is installed (or when it
    holds no CJK); otherwise Chinese characters as pinyin with tone marks (猫 -> māo) and any other
    CJK character as '#', with the same one warning as `labels`."""
    if not _CJK.search(text) or setup_fonts():
        return text
    import unicodedata

    from pypinyin import Style, pinyin
    _warn_once()
    text = unicodedata.normalize("NFKC", text)  # fullwidth forms (ＡＢ，) are ASCII in disguise
    out, read = [], False
    for ch in text:
        if _CJK.match(ch):
            reading = pinyin(ch, style=Style.TONE, errors=lambda c: "#")[0][0]
            out.append((" " if read else "") + (reading if not _CJK.search(reading) else "#"))
            read = True  # 猫吃鱼 -> māo chī yú: readings of adjacent characters apart
        else:
            out.append(ch)
            read = False
    return "".join(out)


def labels(tokens: list[str]) -> list[str]:
    """Token labels that will render: the tokens themselves, or #i for CJK tokens without a CJK font."""
    if setup_fonts() or not any(_CJK.search(t) for t in tokens):
        return list(tokens)
    _warn_once()
    return [f"#{i}" if _CJK.search(t) else t for i, t in enumerate(tokens)]
