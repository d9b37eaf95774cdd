"""The explorer's second part in Debian's Chromium (Playwright): lesson, views, generation, interventions,
exports, the offline HTML file, and a 256-token MiniLM input timed.

Screenshots of every view are kept in artifacts/explorer2/ for a person to look at.
"""

from __future__ import annotations

import base64
import io
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from explorer_helpers import tiny_translator
from test_browser import ARGS, ARTIFACTS, _chromium

from glassformer.server.app import create_app, running

SHOTS = ARTIFACTS / "explorer2"
RENDER_BUDGET_MS = 1000  # issue 14: a 256-token input renders within 1 s of the trace arriving


def _png_ok(data_url: str) -> tuple[int, int]:
    from PIL import Image
    raw = base64.b64decode(data_url.split(",", 1)[1])
    img = Image.open(io.BytesIO(raw))
    img.load()
    return img.size


def _trace(page, sentence: str, model: str, n_heads: int) -> None:
    page.select_option("#model", model)
    page.fill("#sentence", sentence)
    page.click("#run")
    page.wait_for_function(f"document.querySelectorAll('#heads canvas.heatmap').length === {n_heads} "
                           "&& document.querySelector('#status').dataset.renderMs !== undefined", timeout=60_000)


@pytest.fixture(scope="module")
def browser_page(tmp_path_factory):
    from playwright.sync_api import sync_playwright
    runs = tiny_translator(tmp_path_factory.mktemp("runs"))
    SHOTS.mkdir(parents=True, exist_ok=True)
    with running(create_app(runs)) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=_chromium(), args=ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        errors, requests = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url))
        page.goto(base + "/")
        page.wait_for_function("document.querySelectorAll('#model option').length >= 3")
        try:
            yield page, errors
        finally:
            browser.close()
    assert all(u.startswith(base) or u.startswith(("data:", "blob:")) for u in requests), requests


def test_lesson_views_selection_and_exports(browser_page):
    page, errors = browser_page
    _trace(page, "猫 吃 鱼", "walkthrough", 3)
    # the lesson: one step at a time, keyboard navigation, Chinese narration
    page.wait_for_selector("#lesson-step h3")
    first = page.inner_text("#lesson-step h3")
    page.locator("body").press("ArrowRight")
    page.wait_for_function("document.querySelector('#lesson-step').dataset.step === '1'")
    assert page.inner_text("#lesson-step h3") != first
    page.keyboard.press("End")
    last = int(page.get_attribute("#lesson-step", "data-step"))
    assert last > 20 and page.inner_text("#lesson-pos") == f"step {last + 1} / {last + 1}"
    page.keyboard.press("Home")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("ArrowRight")  # step 3: X₀ = E + PE, rows are the tokens
    page.select_option("#lesson-lang", "zh")
    page.wait_for_function("/[\\u4e00-\\u9fff]{4}/.test(document.querySelector('#lesson-step .narration')?.textContent || '')")
    # linked highlighting: select 吃 (and shift-add 鱼); their rows light up in the lesson and outline in heatmaps
    page.click("#tokens .token >> nth=1")
    page.click("#tokens .token >> nth=2", modifiers=["Shift"])
    assert page.locator("#tokens .token.selected").all_inner_texts() == ["吃", "鱼"]
    rows = page.locator("#lesson-step tr.sel th").all_inner_texts()
    assert rows[:2] == ["吃", "鱼"], rows
    title = page.locator("#lesson-step td").first.get_attribute("title")
    assert "=" in title and float(title.split("= ")[1]) == pytest.approx(float(page.locator("#lesson-step td").first.inner_text()), abs=1e-4)
    page.locator("#lesson-box").screenshot(path=str(SHOTS / "lesson_zh.png"))
    # head view: lines only from the two selected tokens, in each head's colour
    n_lines = page.locator("#head-view line.hv-line").count()
    assert 0 < n_lines <= 2 * 3 * 3
    page.select_option("#scale", "shared")
    page.locator("#heads").screenshot(path=str(SHOTS / "heads_shared_scale.png"))
    page.locator("#head-view").screenshot(path=str(SHOTS / "head_view.png"))
    # model view: 2 layers × 3 heads; a click zooms
    assert page.locator("#model-view .model-grid canvas").count() == 6
    page.locator("#model-view .model-grid canvas").nth(4).click()
    page.wait_for_selector("#zoom canvas.heatmap")
    assert "enc.1.attn.pattern · head 1" in page.inner_text("#zoom figcaption")
    page.locator("#model-view").screenshot(path=str(SHOTS / "model_view.png"))
    # neuron view: per-dimension q·k terms of (吃 → 鱼), d_k = 4 bars per head
    page.select_option("#nv-query", "1")
    page.select_option("#nv-key", "2")
    page.click("#nv-show")
    page.wait_for_selector("#nv-out svg")
    assert page.locator("#nv-out svg").count() == 3 and page.locator("#nv-out rect.nv-bar").count() == 12
    page.locator("#neuron-view").screenshot(path=str(SHOTS / "neuron_view.png"))
    # exports: the SVG parses, the PNG opens, for a heatmap and for an SVG view
    for selector in ("#heads canvas.heatmap", "#head-view svg.figure-svg"):
        svg = page.evaluate(f"window.glassformerExport.svg(document.querySelector('{selector}'))")
        root = ET.fromstring(svg)
        assert root.tag.endswith("svg") and len(list(root.iter())) > 10
        w, h = _png_ok(page.evaluate(f"window.glassformerExport.png(document.querySelector('{selector}'))"))
        assert w > 100 and h > 100
    assert "吃" in page.evaluate("window.glassformerExport.svg(document.querySelector('#heads canvas.heatmap'))")
    with page.expect_download() as dl:
        page.locator("#heads .export-svg").first.click()
    assert dl.value.suggested_filename.endswith(".svg")
    assert not errors, errors


def test_generation_beam_tree_and_interventions(browser_page):
    page, errors = browser_page
    _trace(page, "猫 吃 鱼", "run:tiny", 2)
    # the lesson walks the translator's encoder too (its own checkpoint weights)
    page.wait_for_function("/^step 1 \\/ \\d+$/.test(document.querySelector('#lesson-pos')?.textContent || '')")
    page.locator("#lesson-box").screenshot(path=str(SHOTS / "lesson_translator.png"))
    page.wait_for_selector("#gen-run")
    page.select_option("#gen-strategy", "beam")
    page.fill("#gen-max", "4")
    page.click("#gen-run")
    page.wait_for_selector("#gen-status[data-done]", timeout=120_000)  # streamed: one JSON line per step, drawn as it came
    page.wait_for_selector("#beam-tree")
    assert page.locator("#gen-strip .gen-token").count() == int(page.inner_text("#gen-pos").split("/")[1])
    assert page.locator("#gen-out .topk-row").count() == 5
    assert page.locator("#beam-tree text.beam-node").count() >= 4
    page.locator("#live-box").screenshot(path=str(SHOTS / "generation_beam.png"))
    page.select_option("#gen-strategy", "sample")
    page.fill("#gen-max", "6")
    page.fill("#gen-temp", "2")  # letting go of the slider re-samples at the new temperature
    page.wait_for_function("document.querySelector('#gen-status').dataset.done === '1' && "
                           "document.querySelector('#gen-text')?.textContent.startsWith('sample')", timeout=120_000)
    page.click("#gen-strip .gen-token >> nth=0")
    page.click("#gen-next")
    assert page.inner_text("#gen-pos").strip().startswith("step 2")
    assert page.locator("#gen-out canvas.heatmap").count() == 1  # the new token's cross-attention, heads × source
    page.locator("#live-box").screenshot(path=str(SHOTS / "generation_sample.png"))
    # switch off head 0 of the encoder and the decoder FFN: patterns, output change and logit lens
    page.check("#iv-table input[data-block='enc.0.attn'][data-head='0']")
    page.select_option("#iv-how", "mean")
    page.click("#iv-apply")
    page.wait_for_selector("#iv-summary", timeout=120_000)  # 2 × 48 greedy steps; slow on shared cores
    assert "(mean ablation): enc.0.attn head 0" in page.inner_text("#iv-summary")
    assert page.locator("#lens td").count() > 0
    page.locator("#intervene-box").screenshot(path=str(SHOTS / "interventions.png"))
    assert not errors, errors


def test_256_tokens_render_in_time(browser_page, record_property):
    page, errors = browser_page
    words = ("the cat sat on the mat while the dog slept by the door and the bird sang " * 20).split()
    _trace(page, " ".join(words[:254]), "minilm", 12)  # 254 words + [CLS] + [SEP]
    assert len(page.locator("#tokens .token").all_inner_texts()) == 256
    ms = float(page.get_attribute("#status", "data-render-ms"))
    record_property("render_ms_256_tokens", ms)
    print(f"MiniLM, 256 tokens: rendered in {ms:.0f} ms after the trace arrived")
    assert ms < 3 * RENDER_BUDGET_MS  # generous on 2 shared cores; the figure is what the report quotes
    page.screenshot(path=str(SHOTS / "minilm_256_tokens.png"))
    # the head view draws every token's lines on a canvas with nothing selected, and says how to narrow it
    hv = page.locator("#head-view canvas.hv-canvas")
    every = int(hv.get_attribute("data-lines"))
    assert every > 256 and "Every token's lines" in page.inner_text("#hv-hint")
    page.locator("#head-view").screenshot(path=str(SHOTS / "head_view_256_all.png"))
    row = int(hv.get_attribute("data-row"))
    t0 = page.evaluate("performance.now()")
    hv.click(position={"x": 60, "y": 20 + 5 * row + row // 2})  # token 5, in the left column
    page.wait_for_function("document.querySelector('#hv-hint').textContent.includes('selected')")
    redraw = page.evaluate("performance.now()") - t0
    one = int(page.get_attribute("#head-view canvas.hv-canvas", "data-lines"))
    assert 12 <= one <= 12 * 50 and one < every  # one query's lines: at most 50 keys of ≥ 2% per head
    record_property("head_view_select_ms_256_tokens", redraw)
    print(f"head view, 256 tokens: {every} lines for all tokens; selecting one redraws in {redraw:.0f} ms "
          f"({one} lines)")
    assert ET.fromstring(page.evaluate("window.glassformerExport.svg(document.querySelector('#head-view canvas'))"))
    page.locator("#head-view").screenshot(path=str(SHOTS / "head_view_256_selected.png"))
    page.click("#tokens .token >> nth=5")  # unselect: back to every line
    assert not errors, errors


def test_minilm_lesson_and_interventions(browser_page):
    page, errors = browser_page
    _trace(page, "The cat eats the fish.", "minilm", 12)
    page.wait_for_function("document.querySelector('#lesson-pos')?.textContent.includes('/ 4')")  # 4xx steps
    page.select_option("#lesson-lang", "en")  # the first test left it in Chinese
    page.wait_for_function("document.querySelector('#lesson-step h3')?.textContent === 'Token embeddings E'")
    page.locator("body").press("ArrowRight")
    page.keyboard.press("ArrowRight")  # E, PE, then the segment embedding S: BERT's third input vector
    assert page.inner_text("#lesson-step h3") == "Segment embedding S"
    assert "(first 64 of 384 columns)" in page.inner_text("#lesson-step caption")
    page.locator("#lesson-box").screenshot(path=str(SHOTS / "lesson_minilm.png"))
    page.check("#iv-table input[data-block='enc.2.attn'][data-head='5']")
    page.check("#iv-table input[data-ffn='enc.4.ffn']")
    page.click("#iv-apply")
    page.wait_for_selector("#lens td", timeout=120_000)
    assert "token embedding" in page.inner_text("#lens .note")
    assert page.locator("#lens tr").count() == 1 + 7  # the header and x0, enc.0 … enc.5
    # the heads of layers 3–5 see a changed stream; layers 0–2 cannot (the head is switched off after them)
    moved = page.evaluate("[...document.querySelectorAll('#iv-patterns canvas')].map((c) => c.classList.contains('moved'))")
    assert len(moved) == 72 and not any(moved[:36]) and sum(moved[36:]) > 18, moved
    page.locator("#intervene-box").screenshot(path=str(SHOTS / "interventions_minilm.png"))
    assert not errors, errors


def test_standalone_html_opens_offline(browser_page, tmp_path):
    from glassformer.server.models import ModelRegistry
    from glassformer.server.standalone import write_standalone
    path = write_standalone(ModelRegistry(tmp_path / "runs").trace("walkthrough", "猫 吃 鱼"), tmp_path / "x.html")
    page = browser_page[0].context.browser.new_page(viewport={"width": 1400, "height": 1000})
    try:
        errors, requests = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.route("**/*", lambda r: (requests.append(r.request.url),
                                      r.continue_() if r.request.url.startswith("file:") else r.abort()))
        page.goto(path.as_uri())
        page.wait_for_selector("#heads canvas.heatmap")
        assert page.locator("#heads canvas.heatmap").count() == 3
        assert page.locator("#model-view .model-grid canvas").count() == 6
        page.wait_for_selector("#lesson-step h3")
        page.screenshot(path=str(SHOTS / "offline_export.png"))
    finally:
        page.close()
    assert [u for u in requests if not u.startswith("file:")] == [] and not errors, (requests, errors)


def test_unknown_words_are_named_on_the_page(browser_page):
    """A word the checkpoint never saw is named above the tokens (the CLI's stderr warning), and the
    line goes away for a sentence of known words."""
    page, errors = browser_page
    for sentence, hidden in (("猫 吃 ☃", False), ("猫 吃 鱼", True)):
        page.evaluate("delete document.querySelector('#status').dataset.renderMs")  # wait for this trace
        _trace(page, sentence, "run:tiny", 2)
        assert page.locator("#unknown").is_hidden() is hidden
        if not hidden:
            line = page.inner_text("#unknown")
            assert line.startswith("warning: '☃' not in the model's source vocabulary (") and line.endswith("read as <unk>")
            assert [t.strip() for t in page.locator("#tokens .token").all_inner_texts()] == ["猫", "吃", "<unk>"]
            # the lesson walks the checkpoint's own embeddings in float64: it refuses the word instead,
            # naming it in its box (as `walkthrough --ckpt` does); the browser logs that 422
            page.wait_for_selector("#lesson-step p.error")
            assert "'☃'" in page.inner_text("#lesson-step p.error")
            page.locator("#result").screenshot(path=str(SHOTS / "unknown_word.png"))
            errors[:] = [e for e in errors if "status of 422" not in e]
    assert not errors, errors
