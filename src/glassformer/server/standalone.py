"""One trace as a single offline HTML file: the explorer's page with its scripts, style and data inlined.

`glassformer export-html` writes it; it opens from disk with no server and no network (no CDN:
every asset is the package's own static file). The views that need the model running — the
lesson in Chinese, generation, interventions, the neuron view — stay with `glassformer serve`;
the trace's own views (heatmaps, head and model views, PE, the English lesson tables) all work.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from .app import static_dir


def standalone_html(data: dict) -> str:
    """The page with `data` (an /api/trace response) as `window.GLASSFORMER_DATA`."""
    static = static_dir()
    page = (static / "index.html").read_text(encoding="utf-8")
    style = (static / "style.css").read_text(encoding="utf-8")
    page = page.replace('<link rel="stylesheet" href="/static/style.css">', f"<style>\n{style}</style>")
    # "</" inside a <script> would end it early; JSON allows the escaped form
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")

    def inline(m: re.Match) -> str:
        code = (static / m.group(1)).read_text(encoding="utf-8")
        before = f"<script>window.GLASSFORMER_DATA = {payload};</script>\n  " if m.group(1) == "app.js" else ""
        return f"{before}<script>\n{code}</script>"
    page = re.sub(r'<script src="/static/([\w.-]+\.js)"></script>', inline, page)
    if "/static/" in page:
        raise RuntimeError("the page still refers to a served asset; inline it in standalone_html")
    return page


def write_standalone(data: dict, path: str | Path) -> Path:
    """Write the file atomically: a half-written export never replaces a good one."""
    path = Path(path)
    text = standalone_html(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
