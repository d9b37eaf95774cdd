"""`glassformer case-study`: train the zh-en translator (or use --ckpt) and write the report.

    glassformer case-study                          # trains runs/case-study (stops at 100% valid exact match)
    glassformer case-study --ckpt runs/zh-en        # analyse a translator you already have
    glassformer case-study --out docs/case-study.md --figures docs/figures/case-study   # the published page
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("case-study")
    def case_study(
        ctx: typer.Context,
        ckpt: Optional[str] = typer.Option(None, help="a trained zh-en run folder (default: train one)"),
        run: Path = typer.Option(Path("runs/case-study"), help="where to train when --ckpt is not given"),
        # under runs/ by default: run in a clone, the command must not rewrite the committed docs/
        out: Path = typer.Option(Path("runs/case-study-report/case-study.md"),
                                 help="the report (docs/case-study.md is written with --out docs/case-study.md)"),
        figures: Path = typer.Option(Path("runs/case-study-report/figures"), help="folder for its figures"),
        json_path: Optional[Path] = typer.Option(None, "--json", help="also write the headline numbers here"),
    ) -> None:
        """How the zh-en translator turns 猫 into "cat" and keeps 狗 追 猫 apart from 猫 追 狗, by patching."""
        from ..interp.case_study_report import write
        from ..train.checkpoint import load_checkpoint
        from ._arguments import given
        from .translate import load_translator

        if ckpt is not None and given(ctx, "run"):  # a translator given is not trained again
            from ..errors import InputError
            raise InputError(f"--run {run} is where case-study trains a translator when no --ckpt is given, and"
                             f" --ckpt {ckpt} is; drop --run, or drop --ckpt to train one there")
        if ckpt is None:
            from ..train import TrainConfig, train
            typer.echo(f"training the zh-en translator into {run} (seed 0, until 100% exact match on valid)", err=True)
            train(TrainConfig(task="zh-en", out=str(run), seed=0, stop_at=1.0, quiet=True))
            ckpt, note = str(run), "trains the zh-en translator with seed 0 until 100% exact match on valid"
        else:
            note = f"on the translator in {ckpt}"
        load_translator(ckpt)  # one line if it is not a translator
        ck = load_checkpoint(ckpt)
        if ck.meta.get("task") != "zh-en":
            from ..errors import InputError
            raise InputError(f"{ckpt} was trained on task {ck.meta.get('task')!r}; the case study needs a zh-en translator")
        cmd = "glassformer case-study" + (f" --ckpt {ckpt}" if note.startswith("on") else "")
        if out != Path("runs/case-study-report/case-study.md"):  # the Reproduce line writes where this did
            cmd += f" --out {out.as_posix()} --figures {figures.as_posix()}"
        result = write(ck.model.eval(), ck.src_tokenizer, ck.tgt_tokenizer, out, figures, cmd, note)
        enc, cross = result["identity"]["encoder"], result["identity"]["cross"]
        typer.echo(f"猫 → cat: {enc[0]} at {enc[1]} restores {enc[2]:.2f}; top cross head {cross[0]} {cross[1]} {cross[2]:.2f}")
        typer.echo(f"roles: largest encoder-head effect {result['roles_encoder_heads_max']:.2f}, all encoder attention "
                   f"{result['roles_all_encoder_attention']:.2f}; "
                   f"last-layer cross heads {', '.join(f'{v:.2f}' for v in result['roles_cross_mean'][-1])}")
        typer.echo(f"wrote {out} and figures in {figures}")
        if json_path is not None:
            from ._interp_io import write_json
            write_json(json_path, result)
            typer.echo(f"wrote {json_path}")
