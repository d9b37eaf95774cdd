"""The explorer in a real browser: Debian's headless Chromium driven by Playwright.

Type a sentence, pick a model, press Trace, and see the heatmaps appear; hover a cell and read
its value; the screenshot is saved to artifacts/explorer.png for a person to look at.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from glassformer.server.app import create_app, running

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run", "--disable-quic"]
ARTIFACTS = Path(__file__).resolve().parent.parent / "artifacts"


def _chromium() -> str:
    path = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    if path is None:
        pytest.fail("Debian's chromium is not installed (expected /usr/bin/chromium); "
                    "run `bash scripts/system-deps.sh` as root or `apt-get install -y chromium`")
    return path


def test_type_a_sentence_and_see_the_heatmaps(tmp_path):
    from playwright.sync_api import sync_playwright

    exe = _chromium()
    ARTIFACTS.mkdir(exist_ok=True)
    with running(create_app(tmp_path / "runs")) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=exe, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            requests = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(base + "/")
            page.wait_for_function("document.querySelectorAll('#model option').length >= 2")

            # the walkthrough model (the default): 猫 吃 鱼, two layers of three heads, step tables
            page.fill("#sentence", "猫 吃 鱼")
            page.click("#run")
            page.wait_for_selector("canvas.heatmap", timeout=30_000)
            assert page.locator("#heads canvas.heatmap").count() == 3
            assert page.locator("#steps details.step").count() > 10
            assert page.locator("#pe canvas.heatmap").count() == 1
            page.screenshot(path=str(ARTIFACTS / "explorer_walkthrough.png"), full_page=True)

            # MiniLM: 12 heads per layer; hovering a cell shows its value
            page.select_option("#model", "minilm")
            page.fill("#sentence", "The cat sat on the mat.")
            page.click("#run")
            page.wait_for_function("document.querySelectorAll('#heads canvas.heatmap').length === 12", timeout=30_000)
            assert page.locator("#tokens .token").all_inner_texts()[:3] == ["[CLS]", "the", "cat"]
            page.select_option("#layer", "0")  # layer 0 holds the previous-token head
            page.wait_for_function("document.querySelectorAll('#heads canvas.heatmap').length === 12")
            canvas = page.locator("#heads canvas.heatmap").nth(2)
            geo = {k: float(canvas.get_attribute(f"data-{k}")) for k in ("cell", "left", "top")}
            # the centre of cell (query 2 "cat", key 1 "the"); the canvas is drawn at 1:1 scale
            canvas.hover(position={"x": geo["left"] + 1.5 * geo["cell"], "y": geo["top"] + 2.5 * geo["cell"]})
            tip = page.locator("#tooltip")
            tip.wait_for(state="visible")
            text = tip.inner_text()
            assert text.startswith("cat → the: ") and float(text.split(": ")[1]) > 0.5, text
            page.screenshot(path=str(ARTIFACTS / "explorer.png"), full_page=False)

            # a bad request shows the server's one-line message
            page.fill("#sentence", "a " * 280)
            page.click("#run")
            page.wait_for_selector("#status.error")
            assert "the limit is 256" in page.inner_text("#status")
        finally:
            browser.close()
    assert all(u.startswith(base) for u in requests), [u for u in requests if not u.startswith(base)]
    assert (ARTIFACTS / "explorer.png").stat().st_size > 20_000
