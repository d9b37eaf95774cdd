"""`glassformer ablate-heads TEXT`: remove one head at a time and measure what the model loses.

    glassformer ablate-heads --model runs/zh-en "猫 追 狗"                       # decoder self-attention heads
    glassformer ablate-heads --model runs/zh-en "猫 追 狗" --attn cross_attn --how mean
    glassformer ablate-heads --model minilm "the cat sat on the mat" --deletions --json heads.json

The score is the one `patch` uses on the clean input (translator: log p of its own translation;
language model: log p of the text's next tokens; encoder: cosine to the intact output); each cell is
how much it drops. --deletions adds seed 003's deletion experiments (no residual, no norm, ...).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("ablate-heads")
    def ablate_heads(
        text: str = typer.Argument(..., help="the sentence to run"),
        model: str = typer.Option("minilm", "--model", help="minilm, a run folder, or a Hugging Face folder"),
        how: str = typer.Option("zero", help="zero | mean (over this sentence's positions)"),
        attn: Optional[str] = typer.Option(None, help="attn | self_attn | cross_attn (default: the stack's self-attention)"),
        deletions: bool = typer.Option(False, "--deletions", help="also run seed 003's deletion experiments"),
        json_path: Optional[Path] = typer.Option(None, "--json", help="write the drops here"),
        out: Optional[Path] = typer.Option(None, "--out", help="PNG heatmap layers × heads"),
    ) -> None:
        """Ablate every head alone and report the drop in the model's score."""
        import torch

        from ..errors import InputError
        from ..interp import ablate
        from ..interp import deletions as run_deletions
        from ..interp.sites import stream_of
        from . import _interp_io as io

        if how not in ("zero", "mean"):
            raise InputError(f"--how {how!r} is not one of zero, mean (resample needs a second input; use the API)")
        s = io.load(model)
        p = io.prepare(s, text)
        metric, meaning = io.score(s, p)
        st = stream_of(s.model)
        site = st.attention(0, attn)
        with torch.no_grad():
            base = float(metric(s.model(*p.inputs)).mean())
        L, H = len(st.layers), site.module.n_heads
        drops = torch.tensor([[base - float(metric(ablate(s.model, *p.inputs, heads=[(l, h)], how=how,
                                                           attn=site.kind)).mean()) for h in range(H)] for l in range(L)])
        typer.echo(f"{s.name}: {how}-ablating each {site.kind} head on «{text}»; score: {meaning} = {base:.3f}")
        if s.arch == "encoder-decoder":
            typer.echo(f"translation: «{io.translation(s, p)}»")
        typer.echo(" " * 10 + " ".join(f"{'head' + str(h):>7}" for h in range(H)))
        for l in range(L):
            typer.echo(f"{st.stack}.{l:<6} " + " ".join(f"{v:>7.3f}" for v in drops[l].tolist()))
        data = {"model": s.name, "text": text, "how": how, "attention": site.kind, "score": meaning,
                "base": base, "drops": drops.tolist()}
        if deletions:
            rows = run_deletions(s.model, *p.inputs)
            typer.echo("seed 003 deletions (whole model, one component kind removed):")
            for r in rows:
                extra = f", top-1 agreement {r['top1_agreement']:.2f}" if "top1_agreement" in r else ""
                typer.echo(f"  no {r['what']:<10} cosine to intact output {r['cosine']:.3f}{extra}")
            data["deletions"] = rows
        if json_path is not None:
            io.write_json(json_path, data)
            typer.echo(f"wrote {json_path}")
        if out is not None:
            from ..viz.heatmap import plot_heatmap
            plot_heatmap(drops.numpy(), [f"{st.stack}.{l}" for l in range(L)], [f"head{h}" for h in range(H)], out,
                         f"{s.name}: drop in score with one {site.kind} head {how}-ablated", "score drop")
            typer.echo(f"wrote {out}")
