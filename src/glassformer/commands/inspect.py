"""`glassformer inspect` and `glassformer head-roles`: look inside MiniLM, a checkpoint or an HF folder."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer

from ..errors import InputError


def register(app: typer.Typer) -> None:
    @app.command()
    def inspect(
        ctx: typer.Context,
        sentence: str = typer.Argument(..., help="The sentence to run through the model."),
        model: str = typer.Option("minilm", "--model", help="minilm, a checkpoint dir, or a local BERT/GPT-2 HF folder."),
        json_path: Optional[Path] = typer.Option(None, "--json", help="Write tokens, patterns and head roles here."),
        out: Optional[Path] = typer.Option(None, "--out", help="Folder for the model-view and head-view PNGs."),
        layer: int = typer.Option(0, help="Layer of the head view."),
        head: int = typer.Option(0, help="Head of the head view."),
    ) -> None:
        """Attention of every layer and head for SENTENCE, with each head's role (Clark et al. 2019)."""
        import numpy as np

        from ..inspect import inspect_sentence, load_subject
        from ..inspect.roles import ROLE_NAMES

        if json_path is not None:  # a path we cannot write fails now, not after all the work
            json_path.parent.mkdir(parents=True, exist_ok=True)
            if json_path.is_dir() or not os.access(json_path.parent, os.W_OK):
                raise InputError(f"--json {json_path} cannot be written (a folder, or read-only); give a file path")
        subject = load_subject(model)
        result = inspect_sentence(subject, sentence)
        P = np.array(result["patterns"])
        L, H = P.shape[:2]
        if not (0 <= layer < L and 0 <= head < H):
            raise InputError(f"--layer {layer} --head {head} is outside the model; layers 0..{L - 1}, heads 0..{H - 1}")
        from ._arguments import flag_as_typed, given, typed
        picked = given(ctx, "layer", "head")
        # after the range check, which names a wrong value first; they choose the one head drawn as the
        # head view, and only --out draws
        if picked and out is None:
            shown = typed(ctx, *picked)
            raise InputError(f"{shown} {'picks' if len(picked) == 1 else 'pick'} the head view drawn into --out, and"
                             f" no --out is given; give --out DIR, or drop {'/'.join(flag_as_typed(ctx, n) for n in picked)}"
                             " (the printed roles cover every head)")
        typer.echo(f"{subject.name}: {L} layers × {H} heads, tokens: {' '.join(result['tokens'])}")
        roles = result["head_roles"]["roles"]
        scores = result["head_roles"]["scores"]
        for l in range(L):
            cells = []
            for h in range(H):
                r = roles[l][h]
                if r == "mixed":  # the strongest positional role, which fell short of the threshold
                    s = max((scores[k][l][h] or 0.0) for k in ("prev", "next", "self", "cls", "sep"))
                else:
                    s = scores[r][l][h]
                cells.append(f"{r}:{s:.2f}" if s is not None else r)
            typer.echo(f"layer {l}: " + "  ".join(cells))
        typer.echo("roles: " + ", ".join(f"{k} = {v}" for k, v in ROLE_NAMES.items()))
        if json_path is not None:
            json_path.write_text(json.dumps(result, ensure_ascii=False))
            typer.echo(f"wrote {json_path}")
        if out is not None:
            from ..inspect import views
            mv = views.model_view(P, result["tokens"], out / "model_view.png", np.array(roles, dtype=object))
            hv = views.head_view(P[layer, head], result["tokens"], out / f"head_view_L{layer}_H{head}.png",
                                 f"{subject.name} layer {layer} head {head}: {roles[layer][head]}")
            typer.echo(f"wrote {mv} and {hv}")

    @app.command("head-roles")
    def head_roles(
        model: str = typer.Option("minilm", "--model", help="minilm, a checkpoint dir, or a local HF folder."),
        # under runs/ by default, never the committed docs/ (docs/head_roles.md says its own flags)
        report: Path = typer.Option(Path("runs/head-roles/head_roles.md"), help="Markdown report to write."),
        figures: Path = typer.Option(Path("runs/head-roles/figures"), help="Folder for the report's figures."),
        sentences: Optional[Path] = typer.Option(None, help="One sentence a line (default: the bundled set)."),
        method: str = typer.Option("pca", help="Projection of head outputs: pca or tsne."),
        neuron_layer: Optional[int] = typer.Option(None, help="Layer whose FFN neurons to describe (default: middle)."),
    ) -> None:
        """Head roles and the per-layer entropy/distance trend over a sentence set, as a report."""
        from ..inspect import bundled_sentences, load_subject
        from ..inspect.analysis import analyze, findings, layer_count, write_report

        if method not in ("pca", "tsne"):
            raise InputError(f"--method {method!r} is not one of pca, tsne")
        if sentences is not None:
            from ..data.files import read_text
            texts = list(read_text(sentences))
        else:
            texts = bundled_sentences()
        if len(texts) < 3:
            raise InputError(f"{sentences} has {len(texts)} sentences; give at least 3")
        subject = load_subject(model)
        if subject.model.config.n_layers < 2:  # a trend over depth needs two depths (np.polyfit fails)
            raise InputError(f"head-roles reports per-layer trends; {model} has "
                             f"{subject.model.config.n_layers} layer, give a model with at least 2")
        n_layers = layer_count(subject)
        if neuron_layer is not None and not 0 <= neuron_layer < n_layers:
            raise InputError(f"--neuron-layer {neuron_layer} is outside the model; {model} has layers 0..{n_layers - 1}"
                             f" (default: the middle one, {n_layers // 2})")
        a = analyze(subject, texts, neuron_layer=neuron_layer, method=method, fig_dir=figures)
        cmd = f"glassformer head-roles --model {model} --report {report} --figures {figures} --method {method}"
        write_report(a, report, cmd)
        f = findings(a)
        typer.echo(f"wrote {report}; consistent roles: {f['consistent_roles']}")
        for k in ("entropy_norm", "distance", "distance_content"):
            typer.echo(f"{k}: per layer {f[k]['per_layer']} (Spearman with depth {f[k]['spearman']:+.2f})")
