"""The tutorial notebooks (issue 15) run top to bottom, so none of them can rot.

Each notebook checks its own numbers as it goes (library vs a NumPy line, glassformer vs Hugging Face,
patched vs clean): an `assert` that fails inside a cell fails this test with the cell's traceback.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))
CJK = re.compile(r"[\u4e00-\u9fff]")
PICTURES = {"01": 1, "02": 3, "03": 2, "04": 2}  # the figures each notebook draws inline
CELL_TIMEOUT_S = 600  # generous for a machine shared with other work; the notebooks take seconds to a minute


def test_the_notebooks_are_there():
    assert [p.name[:2] for p in NOTEBOOKS] == ["01", "02", "03", "04"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_with_outputs_cleared_and_terms_in_chinese(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(not c.outputs and c.execution_count is None for c in code)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    headings = [c.source for c in nb.cells if c.cell_type == "markdown" and c.source.startswith("#")]
    assert CJK.search(headings[0]), "the title carries its key term in Chinese too"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom_with_pictures_inline(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    start = time.monotonic()
    NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    seconds = time.monotonic() - start
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    pictures = sum("image/png" in o.get("data", {}) for o in outputs)
    assert pictures == PICTURES[path.name[:2]], f"{pictures} pictures shown inline"
    print(f"{path.name}: {seconds:.0f} s")  # pytest -s shows each notebook's time
