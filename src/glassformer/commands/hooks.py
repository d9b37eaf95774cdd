"""`glassformer hooks`: every hook point with its shape, its equation and its seed section.

    glassformer hooks --arch llama                 # one of the presets (the families glassformer runs)
    glassformer hooks --model runs/zh-en --json    # the hooks of a real model, as JSON
    glassformer hooks --markdown docs/hooks.md     # regenerate the atlas page (a test checks it is current)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

MARKDOWN_COMMAND = "glassformer hooks --markdown docs/hooks.md"


def register(app: typer.Typer) -> None:
    @app.command()
    def hooks(
        ctx: typer.Context,
        arch: str = typer.Option("encoder-decoder", help="encoder-decoder | encoder | decoder | llama | t5"),
        model: Optional[str] = typer.Option(None, "--model", help="list a real model's hooks instead: minilm, "
                                                                 "a run folder or a Hugging Face folder"),
        json_out: bool = typer.Option(False, "--json", help="print JSON rows instead of a table"),
        markdown: Optional[Path] = typer.Option(None, "--markdown", help="write the atlas of every preset here"),
    ) -> None:
        """List the hook points a model exposes to run_with_trace and hooks()."""
        from ..errors import InputError
        from ..interp.atlas import atlas
        from ..interp.atlas import markdown as atlas_markdown
        from ._arguments import given

        arch_given = bool(given(ctx, "arch"))
        if markdown is not None:  # the atlas page lists every preset, as a table: nothing picks a model or JSON
            flags = (("--arch", arch_given), ("--model", model is not None), ("--json", json_out))
            extra = ", ".join(f for f, on in flags if on)
            if extra:
                raise InputError(f"--markdown writes the atlas of every preset as a page, so {extra} would have no"
                                 f" effect; drop {extra}, or drop --markdown to list one model")
        elif model is not None and arch_given:  # a real model's hooks are its own, whatever the preset
            raise InputError(f"--model {model} lists that model's own hooks, so --arch {arch} would have no effect;"
                             " give --arch or --model, not both")
        if markdown is not None:
            markdown.parent.mkdir(parents=True, exist_ok=True)
            markdown.write_text(atlas_markdown(MARKDOWN_COMMAND) + "\n", encoding="utf-8")
            typer.echo(f"wrote {markdown}")
            return
        if model is not None:
            from . import _interp_io as io
            rows = atlas(model=io.load(model).model)
        else:
            rows = atlas(arch)
        if json_out:
            typer.echo(json.dumps(rows, ensure_ascii=False))
            return
        width = max(len(r["name"]) for r in rows)
        for r in rows:
            typer.echo(f"{r['name']:<{width}}  {r['shape']:<44} {r['equation']}  [{r['section']}]")
