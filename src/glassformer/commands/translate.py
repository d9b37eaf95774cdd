"""`glassformer translate`: translate sentences with a trained encoder-decoder.

    glassformer translate --ckpt runs/zh-en 猫 吃 鱼          → the cat eats the fish
    glassformer translate --ckpt runs/zh-en --json 猫吃鱼 "你 爱 我"
    {"source": "猫吃鱼", "translation": "the cat eats the fish"}
    {"source": "你 爱 我", "translation": "you love me"}

Each argument is one sentence: quote a sentence that has spaces ("猫 吃 鱼").

    glassformer translate --ckpt runs/mine --input sentences.txt --json > out.jsonl
    cat sentences.txt | glassformer translate --ckpt runs/mine --input -

A piece never seen in training is read as <unk> with one warning naming it (--strict refuses
the sentence instead); a bad line gets {"source", "error"} and the others are translated.
"""

from __future__ import annotations

import json
from typing import List, Optional

import typer

from ..errors import InputError


def sentences_from_args(args: list[str]) -> list[str]:
    """One sentence per argument; an empty one is a mistake."""
    if not args:
        raise InputError("no sentence given; e.g. glassformer translate --ckpt runs/zh-en \"猫 吃 鱼\"")
    for a in args:
        if not a.strip():
            raise InputError("an empty sentence was given; every argument must be a sentence to translate")
    return args


def load_translator(ckpt_dir: str, device: str = "cpu"):
    from ..train.checkpoint import load_checkpoint
    ck = load_checkpoint(ckpt_dir, device=device)
    if ck.config.arch != "encoder-decoder":
        raise InputError(f"{ck.path} holds {'an' if ck.config.arch.startswith('e') else 'a'} {ck.config.arch} model, not a translator; "
                         "use `glassformer generate` for language models")
    if ck.src_tokenizer is None:
        raise InputError(f"{ck.path} has no tokenizer files; it cannot read text")
    return ck


def register(app: typer.Typer) -> None:
    @app.command()
    def translate(
        sentences: List[str] = typer.Argument(None, help="sentence(s) to translate"),
        ckpt: str = typer.Option(..., help="run folder or checkpoint folder"),
        input_path: Optional[str] = typer.Option(None, "--input", help="a file of sentences, one per line; - for stdin"),
        beam: int = typer.Option(1, help="beam size (1: greedy)"),
        json_out: bool = typer.Option(False, "--json",
                                      help='one JSON line per input: {"source", "translation"} or {"source", "error"}'),
        strict: bool = typer.Option(False, "--strict", help="refuse a sentence with a piece unseen in training"
                                    " (default: read it as <unk> and warn once)"),
        quiet: bool = typer.Option(False, "--quiet", help="no progress bar"),
        precision: str = typer.Option("fp32", help="weights while decoding: fp32 | int8 (per-channel weight-only) |"
                                      " bf16 (fast only on CPUs with native bf16)"),
        device: str = typer.Option("cpu", help="cpu | cuda"),
    ) -> None:
        """Translate SENTENCE... or --input FILE (batched, in input order; a bad line never stops the rest)."""
        from ..streaming import read_lines, translate_lines
        from ..unknown import UnknownPolicy

        from ..nn.precision import check as check_precision
        check_precision(precision, "--precision")
        if beam < 1:
            raise InputError(f"--beam {beam} must be at least 1 (1 is greedy decoding)")
        if input_path is not None and sentences:
            raise InputError("give sentences as arguments or --input FILE, not both")
        lines = read_lines(input_path) if input_path is not None else \
            ((s, None) for s in sentences_from_args(list(sentences or [])))
        ck = load_translator(ckpt, device)
        policy = UnknownPolicy(ck.src_tokenizer, strict, side="source", warn=lambda m: typer.echo(m, err=True))
        single = input_path is None and len(sentences) == 1
        failed = 0
        with _progress(enabled=input_path is not None and not quiet) as advance:
            for number, rec in enumerate(translate_lines(ck.model, policy, ck.tgt_tokenizer, lines, beam, device,
                                                         advance, precision), start=1):
                if json_out:
                    failed += "error" in rec  # the exit status says the same whatever the output format
                    typer.echo(json.dumps(rec, ensure_ascii=False))
                elif "error" in rec:
                    failed += 1
                    if single:
                        raise InputError(rec["error"])
                    typer.echo("", nl=True)  # keeps output line N for input line N
                    typer.echo(f"error: line {number}: {rec['error']}", err=True)
                elif input_path is not None or single:
                    typer.echo(rec["translation"])
                else:
                    typer.echo(f"{rec['source']} → {rec['translation']}")
        if failed:
            raise typer.Exit(2)


class _progress:
    """A rich bar on stderr counting lines translated (no total: stdin may not end)."""

    def __init__(self, enabled: bool):
        self.enabled, self.bar = enabled, None

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
        self.bar = Progress(SpinnerColumn(), TextColumn("{task.completed} lines translated"), TimeElapsedColumn(),
                            console=Console(stderr=True), transient=True)
        self.bar.start()
        task = self.bar.add_task("translate", total=None)
        return lambda n: self.bar.advance(task, n)

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.stop()
