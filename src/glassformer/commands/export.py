"""`glassformer export`: a trained run as a Hugging Face, CTranslate2 or ONNX folder.

    glassformer export --ckpt runs/zh-en --format hf --out exported/zh-en
    glassformer export --ckpt runs/zh-en --format ctranslate2 --out ct2/zh-en --int8
    glassformer export --ckpt runs/lm --format onnx --out onnx/lm

The Hugging Face family is chosen from the model's config and printed with the rewrites it needed
(interop/export.py); the folder is written to a temporary sibling, checked against the model
(logits, read back from the files), and renamed into place. An existing --out is kept unless --force.
"""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def export(
        ckpt: str = typer.Option(..., help="run folder (its best/, else checkpoint/) or checkpoint folder"),
        fmt: str = typer.Option("hf", "--format", help="hf | ctranslate2 | onnx"),
        out: str = typer.Option(..., help="folder to write (refused if it exists, unless --force)"),
        force: bool = typer.Option(False, "--force", help="replace an existing --out"),
        int8: bool = typer.Option(False, "--int8", help="CTranslate2 int8 weights (--format ctranslate2)"),
    ) -> None:
        """Export a trained model to Hugging Face transformers, CTranslate2 or ONNX."""
        from ..interop.export_folder import FORMATS, check_out, save
        from ..train.checkpoint import load_checkpoint

        if fmt not in FORMATS:  # before reading anything
            from ..errors import InputError
            raise InputError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
        check_out(out, force)
        ck = load_checkpoint(ckpt)  # damaged, incomplete or NaN checkpoints stop here in one line
        if ck.meta.get("tokenizers") and "tokenizer.json" in ck.meta["tokenizers"]:
            tokenizers = {"lm": ck.src_tokenizer}
        elif ck.src_tokenizer is not None:
            tokenizers = {"src": ck.src_tokenizer, "tgt": ck.tgt_tokenizer}
        else:
            tokenizers = None
        report = save(ck.model, out, fmt, tokenizers, force=force, int8=int8, source=str(ck.path))
        typer.echo(f"family: {report['family']} ({report['class']})")
        for note in report["notes"]:
            typer.echo(f"  {note}")
        for key, label in (("max_abs_logit_error", "logits vs ours"), ("onnx_max_abs_logit_error", "ONNX Runtime vs ours")):
            if key in report:
                typer.echo(f"  {label}: max abs error {report[key]:.2e}")
        if "onnx_errors" in report:
            kinds = {"full": "whole sequences", "stepwise": "one token at a time through the past key values"}
            typer.echo("  ONNX checks: " + "; ".join(f"{kinds[k]} {v:.2e}" for k, v in report["onnx_errors"].items())
                       + f"; files {', '.join(report['files'])}")
        if "ctranslate2_greedy_equal" in report:
            typer.echo(f"  CTranslate2 greedy tokens equal ours on the probe: {report['ctranslate2_greedy_equal']}")
        typer.echo(f"wrote {fmt} folder: {out}")
