"""The walkthrough in a terminal, with rich: one titled table per step, the chapter's layout (§7.3)."""

from __future__ import annotations

import numpy as np
from rich import box
from rich.console import Console
from rich.rule import Rule
from rich.table import Table as RichTable
from rich.text import Text

from .steps import Step, Table


def fmt(x) -> str:
    """Numbers as the seed prints them: 4 decimals; text (dimension table) as is."""
    if isinstance(x, str):
        return x
    if float(x) < -1e30:  # a masked key: the most negative float stands for −∞ (softmax weight 0)
        return "−∞"
    return f"{float(x):.4f}"


def _table(t: Table, max_cols: int) -> RichTable:
    cols, values, cut = t.view(max_cols)
    rt = RichTable(box=box.SIMPLE_HEAD, padding=(0, 1), title=t.caption or None, title_justify="left",
                   show_edge=False)
    rt.add_column("", style="bold")
    for c in cols:
        rt.add_column(c, justify="right")
    if cut:
        rt.add_column(f"… ({len(t.cols)} cols)", justify="left", style="dim")
    if t.row_sums:
        rt.add_column("Σ", justify="right", style="green")
    for label, row, full in zip(t.rows, values, t.values):
        cells = [fmt(v) for v in row] + ([""] if cut else [])
        if t.row_sums:
            cells.append(f"={float(np.sum(full)):.2f}")
        rt.add_row(label, *cells)
    return rt


def header_lines(result: dict) -> list[str]:
    """What ran: the sentence's tokens, the model, where the embeddings came from."""
    cfg = result["config"]
    d_k = cfg["d_k"] or cfg["d_model"] // cfg["n_heads"]
    layers = cfg["n_layers"] if result.get("stack", "enc") == "enc" or cfg["arch"] == "encoder-decoder" \
        else cfg["n_dec_layers"] or cfg["n_layers"]
    lines = [
        f"tokens: {' '.join(result['tokens'])}  ({len(result['tokens'])} tokens)",
        f"model: {cfg['arch']}, d_model {cfg['d_model']}, {cfg['n_heads']} heads, d_k {d_k}, d_ff {cfg['d_ff']}, "
        f"{layers} layers, {cfg['norm_position']}-{cfg['norm']}, {cfg['activation']}, pe {cfg['pe']}, "
        + (f"weights from checkpoint {result['ckpt']}" if result.get("ckpt") else f"weights seed {result.get('seed')}"),
    ]
    if cfg["arch"] == "encoder-decoder":
        lines.append("note: the encoder is traced (seed §7 follows the encoder; the decoder is not shown)")
    rand = [t for t, s in result.get("embedding_source", {}).items() if s == "random"]
    if rand:
        lines.append(f"note: seeded random embeddings for {', '.join(rand)} (the seed gives none for them)")
    return lines


def seed_figure_lines(result: dict) -> list[str]:
    """Ours beside the seed's §7.2/§7.4 numbers, at the seed's precision."""
    figs = result["analysis"].get("seed_figures")
    if not figs:
        return []
    lines = []
    for f in figs:
        if isinstance(f["seed"], list):
            ours = "[" + ", ".join(f"{v:.2f}" for v in f["ours"]) + "]"
            seed = "[" + ", ".join(f"{v:.2f}" for v in f["seed"]) + "]"
        else:
            ours, seed = f"{f['ours']:.4f}", f"{f['seed']:.4f}"
        mark = "✓" if ours == seed else "✗"
        lines.append(f"{f['figure']} = {ours}   seed: {seed} {mark}")
    lines.append("(the attention and layer numbers of §7.3–7.4 come from the author's unpublished weights; "
                 "these weights are drawn from --seed, so only the figures above can match)")
    return lines


def render_terminal(result: dict, steps: list[Step], console: Console | None = None, max_cols: int = 12) -> None:
    console = console or Console(highlight=False)
    console.print(Rule("glassformer walkthrough — seed 000 chapter 7"))
    for line in header_lines(result):
        console.print(line)
    for step in steps:
        if step.level == 1:
            console.print()
            console.print(Rule(step.title, style="cyan"))
            continue
        console.print()
        title = Text(step.title, style="bold")
        if step.shape:
            title.append(f"   [{step.shape}]", style="magenta")
        if step.formula:
            title.append(f"   {step.formula}", style="dim")
        console.print(title)
        if step.text:
            console.print(Text(step.text, style="italic"))
        for t in step.tables:
            console.print(_table(t, max_cols))
    figs = seed_figure_lines(result)
    if figs:
        console.print()
        console.print(Rule("Seed figures (§7.2, §7.4)", style="cyan"))
        for line in figs:
            console.print(line)
