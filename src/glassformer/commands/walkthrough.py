"""`glassformer walkthrough [SENTENCE]`: seed 000 chapter 7 — every number of a forward pass, printed.

A thin shell over `glassformer.walkthrough` (build, steps, renderers) and `glassformer.viz`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

LANGS = ("en", "zh", "none")


def register(app: typer.Typer) -> None:
    @app.command()
    def walkthrough(
        ctx: typer.Context,
        sentence: Optional[list[str]] = typer.Argument(
            None, help="Whitespace-separated tokens (quoted or not), or unsegmented Chinese (segmented "
                       "with jieba). Default: the seed's 猫 吃 鱼."),
        seed: int = typer.Option(0, "--seed", help="Seed for every weight (and for --random-embeddings);"
                                                    " not with --ckpt."),
        ckpt: Optional[str] = typer.Option(None, "--ckpt", help="Trace a trained checkpoint instead "
                                           "(its model, tokenizer and embeddings); excludes the model flags."),
        random_embeddings: bool = typer.Option(
            False, "--random-embeddings",
            help="Give tokens the seed has no embedding for (anything but 猫, 吃, 鱼, or any token when the "
                 "width is not 12) a seeded random vector in [0, 1). Without it such a token is an error."),
        lang: str = typer.Option("en", "--lang", help="Plain-language narration: en, zh, or none."),
        json_path: Optional[Path] = typer.Option(None, "--json", help="Write {tokens, config, params, trace}."),
        html_path: Optional[Path] = typer.Option(None, "--html", help="Write one self-contained HTML file."),
        md_path: Optional[Path] = typer.Option(None, "--markdown", help="Write a Markdown report."),
        out: Path = typer.Option(Path("runs/walkthrough"), "--out",
                                 help="Folder for the PNG pictures (not with --no-plots)."),
        plots: bool = typer.Option(True, "--plots/--no-plots", help="Draw the PNG pictures."),
        quiet: bool = typer.Option(False, "--quiet", help="Do not print the steps (files only)."),
        max_cols: int = typer.Option(12, "--max-cols", help="Columns shown per table (the rest elided)."),
        d_model: Optional[int] = typer.Option(None, "--d-model", help="Model width (seed: 12)."),
        heads: Optional[int] = typer.Option(None, "--heads", help="Attention heads h (seed: 3)."),
        d_k: Optional[int] = typer.Option(None, "--d-k", help="Per-head width (default d_model / h)."),
        layers: Optional[int] = typer.Option(None, "--layers", help="Encoder layers (seed: 2)."),
        d_ff: Optional[int] = typer.Option(None, "--d-ff", help="FFN width (seed: 48)."),
        pe: Optional[str] = typer.Option(None, "--pe", help="sinusoidal (seed), sinusoidal_half, learned, "
                                         "relative, rope, alibi, none."),
        norm: Optional[str] = typer.Option(None, "--norm", help="layernorm (seed), rmsnorm, batchnorm, none."),
        norm_position: Optional[str] = typer.Option(None, "--norm-position", help="post (seed) or pre."),
        norm_eps: Optional[float] = typer.Option(None, "--norm-eps", help="Norm epsilon (default 1e-5)."),
        activation: Optional[str] = typer.Option(None, "--activation", help="gelu_tanh (seed), gelu, relu, "
                                                 "silu, swiglu, geglu, reglu."),
        final_norm: Optional[bool] = typer.Option(None, "--final-norm/--no-final-norm",
                                                  help="Norm after the last layer (default: only Pre-LN)."),
        residual: Optional[bool] = typer.Option(None, "--residual/--no-residual", help="Residual connections."),
        scale_scores: Optional[bool] = typer.Option(None, "--scale-scores/--no-scale-scores",
                                                    help="Divide QKᵀ by √d_k (seed §1.5)."),
        embed_scale: Optional[bool] = typer.Option(None, "--embed-scale/--no-embed-scale",
                                                   help="Multiply embeddings by √d_model (the paper)."),
    ) -> None:
        """Trace a sentence through the seed's 2-layer encoder (seed 000 ch. 7) and print every step.

        Default: 猫 吃 鱼 with the seed's §7.2 embeddings, sinusoidal PE, d_model 12, 3 heads, d_k 4, d_ff 48, 2 Post-LN layers, GELU (tanh), weights drawn from --seed.

        Embeddings: the seed gives only 猫, 吃, 鱼 (12-dimensional). Any other token, or any token when the width is not 12, is an error unless --random-embeddings draws a seeded vector in [0, 1) for it (announced in the output); --ckpt uses a trained model's own.
        """
        from ..errors import GlassformerError, InputError

        try:
            if lang not in LANGS:
                raise InputError(f"--lang {lang!r} is not one of {', '.join(LANGS)}")
            if max_cols < 1:
                raise InputError(f"--max-cols {max_cols} must be at least 1")
            from ._arguments import given, typed
            chosen = given(ctx, "seed", "out", "lang", "max_cols")
            if "out" in chosen and not plots:  # --out is only the pictures' folder
                raise InputError(f"--out {out} is the folder of the pictures, and --no-plots draws none; drop --out,"
                                 " or drop --no-plots")
            shaping = [typed(ctx, n) for n in chosen if n in ("lang", "max_cols")]
            # the steps they shape are printed, or written by --markdown / --html; a call that produces
            # nothing at all is refused as a whole in _run
            if shaping and quiet and md_path is None and html_path is None and (plots or json_path is not None):
                one = len(shaping) == 1
                raise InputError(f"{' '.join(shaping)} {'shapes' if one else 'shape'} the printed steps and the"
                                 " --markdown/--html reports, and --quiet with neither shows no steps; drop"
                                 f" {'it' if one else 'them'}, or drop --quiet, or give --markdown FILE or --html FILE")
            flags = dict(d_model=d_model, n_heads=heads, d_k=d_k, n_layers=layers, d_ff=d_ff, pe=pe, norm=norm,
                         norm_position=norm_position, norm_eps=norm_eps, activation=activation,
                         final_norm=final_norm, residual=residual, scale_scores=scale_scores,
                         embed_scale=embed_scale)
            # an untyped --seed is None: build() refuses a typed one with --ckpt, whose weights are trained
            _run(" ".join(sentence) if sentence else None, seed if "seed" in chosen else None, ckpt, random_embeddings,
                 None if lang == "none" else lang, json_path, html_path, md_path, out if plots else None, quiet,
                 max_cols, flags)
        except GlassformerError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2)
        except OSError as e:
            typer.echo(f"error: cannot write {e.filename}: {e.strerror}", err=True)
            raise typer.Exit(2)


def _run(sentence, seed, ckpt, random_embeddings, lang, json_path, html_path, md_path, out, quiet, max_cols,
         flags) -> None:
    import shutil
    import sys

    from rich.console import Console

    from ..walkthrough import build
    from ..walkthrough.render_files import render_html, render_markdown, write_json
    from ..walkthrough.render_terminal import render_terminal
    from ..walkthrough.steps import build_steps

    result = build(sentence, seed=seed, ckpt=ckpt, random_embeddings=random_embeddings, **flags)
    if quiet and out is None and json_path is None and md_path is None and html_path is None:
        # refused after build(): a mistake in the sentence or the model flags is the one to name first
        from ..errors import InputError
        raise InputError("--quiet --no-plots with no --json, --markdown or --html prints and writes nothing; drop"
                         " --quiet to print the steps, drop --no-plots to draw the pictures, or give a file to write")
    steps = build_steps(result, lang)
    pictures = None
    if out is not None:
        from ..viz import render_pictures
        pictures = render_pictures(result, out)
    if not quiet:
        width = None if sys.stdout.isatty() else max(shutil.get_terminal_size((160, 24)).columns, 160)
        render_terminal(result, steps, Console(highlight=False, width=width), max_cols=max_cols)
    written = []
    if json_path is not None:
        written.append(("JSON", write_json(result, json_path)))
    if md_path is not None:
        written.append(("Markdown", render_markdown(result, steps, md_path, pictures, max_cols)))
    if html_path is not None:
        written.append(("HTML", render_html(result, steps, html_path, pictures, max_cols)))
    typer.echo("")
    if pictures:
        typer.echo("pictures: " + ", ".join(str(p) for p in pictures.values()))
    for kind, path in written:
        typer.echo(f"{kind}: {path}")
