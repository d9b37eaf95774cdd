"""`glassformer patch CLEAN CORRUPTED`: which layer, position or head carries the difference.

    glassformer patch --model runs/zh-en "猫 追 狗" "狗 追 猫"                       # decoder layers × target positions
    glassformer patch --model runs/zh-en "猫 追 狗" "狗 追 猫" --hook "enc.*.out"     # encoder layers × source words
    glassformer patch --model runs/zh-en "猫 追 狗" "狗 追 猫" --hook "dec.*.cross_attn.z" --per head
    glassformer patch --model path/to/gpt2 "A B C" "A D C" --attribution --json patch.json --out patch.png

Each cell: the corrupted run with that one clean activation put back; 1 = the clean answer restored,
0 = no effect (activation patching). --attribution adds the gradient estimate and their agreement.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def patch(
        clean: str = typer.Argument(..., help="the clean sentence"),
        corrupted: str = typer.Argument(..., help="the corrupted sentence (same number of tokens)"),
        model: str = typer.Option("minilm", "--model", help="minilm, a run folder, or a Hugging Face folder"),
        hook: Optional[str] = typer.Option(None, help="hook pattern (default: every layer's output of the last stack); "
                                                      "`glassformer hooks` lists names"),
        per: str = typer.Option("position", help="position | head | all"),
        attribution: bool = typer.Option(False, "--attribution", help="also run attribution patching and compare"),
        json_path: Optional[Path] = typer.Option(None, "--json", help="write the effects here"),
        out: Optional[Path] = typer.Option(None, "--out", help="PNG heatmap of the effects"),
    ) -> None:
        """Activation patching of CLEAN into CORRUPTED at every matching hook × position (or head)."""
        from ..interp import agreement, attribution_patch
        from ..interp import patch as run_patch
        from . import _interp_io as io

        s = io.load(model)
        c = io.prepare(s, clean)
        own = io.prepare(s, corrupted)  # the corrupted input's own output (translator: its translation)
        # a translator's corrupted run is teacher-forced on the clean translation: only the source differs
        bad = io.prepare(s, corrupted, target=_target(c)) if s.arch == "encoder-decoder" else own
        metric, meaning = io.score(s, c, own)
        hook = hook or ("enc.*.out" if s.arch == "encoder" else "dec.*.out")
        result = run_patch(s.model, c.inputs, bad.inputs, hook=hook, per=per, metric=metric)
        labels = _labels(s, result.hooks[0], per, result.labels, c)
        typer.echo(f"{s.name}: patching «{clean}» into «{corrupted}»; metric: {meaning}")
        if s.arch == "encoder-decoder":
            typer.echo(f"translations: «{io.translation(s, c)}» vs «{io.translation(s, own)}»")
        typer.echo(f"metric clean {result.clean_metric:.3f}, corrupted {result.corrupted_metric:.3f}; "
                   "cells: fraction restored")
        _table(result.hooks, labels, result.effects)
        data = {"model": s.name, "clean": clean, "corrupted": corrupted, "metric": meaning, "labels": labels,
                **result.to_dict()}
        if attribution:
            approx = attribution_patch(s.model, c.inputs, bad.inputs, hook=hook, per=per, metric=metric)
            agree = agreement(result, approx)
            typer.echo("attribution patching (gradient estimate):")
            _table(approx.hooks, labels, approx.effects)
            typer.echo(f"agreement: Pearson r {agree['pearson']:.3f}, max |difference| {agree['max_abs_diff']:.3f}, "
                       f"same top place: {agree['same_top']}")
            data["attribution"] = {"effects": approx.effects.tolist(), **agree}
        if json_path is not None:
            io.write_json(json_path, data)
            typer.echo(f"wrote {json_path}")
        if out is not None:
            from ..viz.heatmap import plot_heatmap
            plot_heatmap(result.effects.numpy(), result.hooks, labels, out,
                         f"{s.name}: patching «{clean}» into «{corrupted}»", "fraction of the clean metric restored")
            typer.echo(f"wrote {out}")


def _target(prepared):
    """A translator's full clean target (start token + the tokens it predicts)."""
    import torch
    return torch.cat([prepared.inputs[1][0], prepared.next_ids[-1:]])


def _labels(s, name: str, per: str, raw: list[str], c) -> list[str]:
    """Token labels for positions: source tokens for the encoder and cross-attention keys/values."""
    if per != "position":
        return raw
    leaf = name.rsplit(".", 1)[-1]
    on_source = name.startswith("enc") or (".cross_attn." in name and leaf in ("k", "v"))
    tokens = c.src_labels if on_source or s.arch == "encoder" else c.tgt_labels
    return tokens if len(tokens) == len(raw) else raw


def _table(rows: list[str], cols: list[str], values) -> None:
    width = max(6, *(len(c) for c in cols))
    typer.echo(" " * 26 + " ".join(f"{c:>{width}}" for c in cols))
    for name, row in zip(rows, values.tolist()):
        typer.echo(f"{name:>25} " + " ".join(f"{v:>{width}.2f}" for v in row))
