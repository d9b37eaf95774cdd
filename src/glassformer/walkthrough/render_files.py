"""The walkthrough as files: JSON (the contract), Markdown, and one self-contained HTML page.

The HTML has no link to anything outside itself — styles inline, pictures embedded as base64
data URIs — so it opens offline and can be mailed as one file.
"""

from __future__ import annotations

import base64
import html
import json
from pathlib import Path

from .render_terminal import fmt, header_lines, seed_figure_lines
from .steps import Step, Table


def _writable(path: str | Path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def write_json(result: dict, path: str | Path) -> Path:
    p = _writable(path)
    p.write_text(json.dumps(result, ensure_ascii=False), encoding="utf-8")
    return p


# ---- Markdown ----
def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|")  # a token may be a pipe; it must not split the row


def _md_table(t: Table, max_cols: int) -> list[str]:
    cols, values, cut = t.view(max_cols)
    head = [t.caption or ""] + [_md_cell(c) for c in cols] + (["…"] if cut else []) + (["Σ"] if t.row_sums else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, row, full in zip(t.rows, values, t.values):
        cells = [_md_cell(label)] + [_md_cell(fmt(v)) for v in row] + ([""] if cut else [])
        if t.row_sums:
            cells.append(f"={float(sum(full)):.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return lines + [""]


def render_markdown(result: dict, steps: list[Step], path: str | Path, pictures: dict | None = None,
                    max_cols: int = 12) -> Path:
    p = _writable(path)
    lines = ["# glassformer walkthrough — seed 000 chapter 7", ""]
    lines += [f"- {line}" for line in header_lines(result)] + [""]
    for step in steps:
        if step.level == 1:
            lines += [f"## {step.title}", ""]
            continue
        shape = f" `[{step.shape}]`" if step.shape else ""
        lines += [f"### {step.title}{shape}", ""]
        if step.formula:
            lines += [f"`{step.formula}`", ""]
        if step.text:
            lines += [f"> {step.text}", ""]
        for t in step.tables:
            lines += _md_table(t, max_cols)
    figs = seed_figure_lines(result)
    if figs:
        lines += ["## Seed figures (§7.2, §7.4)", ""] + [f"- {f}" for f in figs] + [""]
    if pictures:
        lines += ["## Pictures", ""]
        for name, pic in pictures.items():
            rel = Path(pic).resolve()
            try:
                rel = rel.relative_to(p.parent.resolve())
            except ValueError:
                pass
            lines += [f"![{name}]({rel.as_posix()})", ""]
    p.write_text("\n".join(lines), encoding="utf-8")
    return p


# ---- HTML ----
_CSS = """
body { font-family: "Noto Sans CJK SC", "Noto Sans", "PingFang SC", "Microsoft YaHei", sans-serif;
       max-width: 1100px; margin: 2em auto; padding: 0 1em; color: #222; }
h2 { border-bottom: 2px solid #48a; padding-bottom: .2em; margin-top: 2em; }
h3 { margin-bottom: .2em; } .shape { color: #a3a; font-weight: normal; font-size: .9em; }
.formula { font-family: monospace; color: #555; } .say { font-style: italic; color: #335; }
table { border-collapse: collapse; margin: .4em 0 1em; font-size: .85em; }
th, td { padding: 2px 8px; text-align: right; border-bottom: 1px solid #ddd; }
th:first-child, td:first-child { text-align: left; font-weight: bold; }
caption { text-align: left; font-weight: bold; color: #555; } td.sum { color: #282; }
img { max-width: 100%; border: 1px solid #ddd; margin: .5em 0; }
"""


def _html_table(t: Table, max_cols: int) -> str:
    cols, values, cut = t.view(max_cols)
    e = html.escape
    head = "".join(f"<th>{e(c)}</th>" for c in [""] + list(cols))
    head += "<th>…</th>" if cut else ""
    head += "<th>Σ</th>" if t.row_sums else ""
    body = []
    for label, row, full in zip(t.rows, values, t.values):
        cells = "".join(f"<td>{e(fmt(v))}</td>" for v in row) + ("<td></td>" if cut else "")
        if t.row_sums:
            cells += f'<td class="sum">={float(sum(full)):.2f}</td>'
        body.append(f"<tr><td>{e(label)}</td>{cells}</tr>")
    cap = f"<caption>{e(t.caption)}</caption>" if t.caption else ""
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def render_html(result: dict, steps: list[Step], path: str | Path, pictures: dict | None = None,
                max_cols: int = 12) -> Path:
    p = _writable(path)
    e = html.escape
    parts = ['<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
             "<title>glassformer walkthrough</title>", f"<style>{_CSS}</style></head><body>",
             "<h1>glassformer walkthrough — seed 000 chapter 7</h1><ul>"]
    parts += [f"<li>{e(line)}</li>" for line in header_lines(result)] + ["</ul>"]
    for step in steps:
        if step.level == 1:
            parts.append(f"<h2>{e(step.title)}</h2>")
            continue
        shape = f' <span class="shape">[{e(step.shape)}]</span>' if step.shape else ""
        parts.append(f"<h3>{e(step.title)}{shape}</h3>")
        if step.formula:
            parts.append(f'<div class="formula">{e(step.formula)}</div>')
        if step.text:
            parts.append(f'<p class="say">{e(step.text)}</p>')
        parts += [_html_table(t, max_cols) for t in step.tables]
    figs = seed_figure_lines(result)
    if figs:
        parts.append("<h2>Seed figures (§7.2, §7.4)</h2><ul>")
        parts += [f"<li>{e(f)}</li>" for f in figs] + ["</ul>"]
    if pictures:
        parts.append("<h2>Pictures</h2>")
        for name, pic in pictures.items():
            data = base64.b64encode(Path(pic).read_bytes()).decode("ascii")
            parts.append(f'<img alt="{e(name)}" src="data:image/png;base64,{data}">')
    parts.append("</body></html>")
    p.write_text("\n".join(parts), encoding="utf-8")
    return p
