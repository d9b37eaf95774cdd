"""The documentation site (issue 15): `mkdocs build --strict` succeeds and reaches every page.

The build runs without executing the notebooks (GLASSFORMER_DOCS_EXECUTE=false): test_notebooks.py
executes them already, and `make docs` executes them for the published site.
"""

from __future__ import annotations

import glob
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
sys.path.insert(0, str(ROOT / "scripts"))
import mkdocs_nav  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "GLASSFORMER_DOCS_EXECUTE": "false", "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(out)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # strict: any warning fails the build
    return out


def _page(site: Path, source: str) -> Path:
    """Where mkdocs writes the page of docs/<source> (use_directory_urls)."""
    stem = source.rsplit(".", 1)[0]
    return site / ("index.html" if stem == "index" else f"{stem}/index.html")


def test_every_page_under_docs_is_built_and_linked_from_the_navigation(site):
    home = (site / "index.html").read_text(encoding="utf-8")
    pages = sorted(p for ext in ("md", "ipynb") for p in glob.glob(f"**/*.{ext}", root_dir=DOCS, recursive=True))
    assert "claims.md" in pages and "benchmarks.md" in pages and "notebooks/01_walkthrough.ipynb" in pages
    for source in pages:
        assert _page(site, source).is_file(), source
        if source != "index.md":
            href = source.rsplit(".", 1)[0] + "/"
            assert f'href="{href}"' in home, f"{source} is not in the site's navigation"


def test_notebooks_claims_and_benchmarks_are_rendered(site):
    nb = _page(site, "notebooks/01_walkthrough.ipynb").read_text(encoding="utf-8")
    assert "max |library − NumPy|" in nb and "猫 吃 鱼" in nb  # the notebook's code and prose
    claims = _page(site, "claims.md").read_text(encoding="utf-8")
    anchors = re.findall(r'\]\(#([^)]+)\)', (DOCS / "claims.md").read_text(encoding="utf-8"))
    assert anchors  # the summary table links to each claim's section
    for a in anchors:  # every link of the summary lands on a heading of the rendered page
        assert f'href="#{a}"' in claims and f'id="{a}"' in claims, a
    assert (site / "claims" / "pe_order_loss.png").is_file() and (site / "benchmarks.png").is_file()


def test_api_reference_comes_from_the_docstrings(site):
    import glassformer.trace as trace

    page = _page(site, "api/trace.md").read_text(encoding="utf-8")
    first_line = trace.hooks.__doc__.strip().splitlines()[0]
    assert "run_with_trace" in page and first_line.split("`")[0].strip() in page


def test_a_page_missing_from_the_nav_is_appended_not_lost(tmp_path):
    (tmp_path / "index.md").write_text("# Home\n", encoding="utf-8")
    (tmp_path / "hooks.md").write_text("# Hook atlas\n\ntext\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "notes.md").write_text("no heading\n", encoding="utf-8")
    config = {"docs_dir": str(tmp_path), "nav": [{"Home": "index.md"}]}
    mkdocs_nav.on_config(config)
    assert config["nav"][-1] == {"More": [{"Hook atlas": "hooks.md"}, {"notes": "sub/notes.md"}]}
