"""MkDocs hook: every page under docs/ reaches the site's navigation, listed or not.

mkdocs.yml lists the known pages in reading order. A branch that adds a page (docs/hooks.md,
docs/real-data.md, ...) without editing the nav would otherwise leave it orphaned, and the
strict build (`omitted_files: warn`) would fail; instead the page is appended under "More",
titled by its first heading, until someone gives it a place in the nav.
"""

from __future__ import annotations

import os
from pathlib import Path

PAGE_SUFFIXES = (".md", ".ipynb")


def listed(nav) -> set[str]:
    """The file names a nav (nested lists/dicts of strings) refers to."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, dict):
        return set().union(*(listed(v) for v in nav.values()))
    if isinstance(nav, list):
        return set().union(*(listed(v) for v in nav)) if nav else set()
    return set()


def unlisted_pages(docs_dir: Path, nav) -> list[str]:
    """Pages under docs_dir (notebooks' checkpoints excluded) that the nav does not name."""
    known = listed(nav)
    pages = []
    for folder, dirs, files in os.walk(docs_dir, followlinks=True):  # docs/notebooks is a link to notebooks/
        dirs[:] = [d for d in dirs if d != ".ipynb_checkpoints"]
        rel = Path(folder).relative_to(docs_dir)
        pages += [(rel / f).as_posix() for f in files if f.endswith(PAGE_SUFFIXES)]
    return [p for p in sorted(pages) if p not in known]


def title_of(path: Path) -> str:
    """The first Markdown heading of a page, else its file name."""
    if path.suffix == ".md":
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return path.stem.replace("_", " ").replace("-", " ")


def on_config(config, **_):
    docs_dir = Path(config["docs_dir"])
    extra = unlisted_pages(docs_dir, config["nav"])
    if extra:
        config["nav"].append({"More": [{title_of(docs_dir / p): p} for p in extra]})
    return config
