"""`glassformer translate`: translate sentences with a trained encoder-decoder.

    glassformer translate --ckpt runs/zh-en 猫 吃 鱼          → the cat eats the fish
    glassformer translate --ckpt runs/zh-en --json 猫吃鱼 "你 爱 我"
    {"source": "猫吃鱼", "translation": "the cat eats the fish"}
    {"source": "你 爱 我", "translation": "you love me"}

Each argument is one sentence: quote a sentence that has spaces ("猫 吃 鱼").
"""

from __future__ import annotations

import json
from typing import List

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
        beam: int = typer.Option(1, help="beam size (1: greedy)"),
        json_out: bool = typer.Option(False, "--json", help='one JSON line per input: {"source", "translation"}'),
        device: str = typer.Option("cpu", help="cpu | cuda"),
    ) -> None:
        """Translate SENTENCE... with a trained translator (greedy, or beam search with --beam K)."""
        from ..train.evaluate import translate_texts

        if beam < 1:
            raise InputError(f"--beam {beam} must be at least 1 (1 is greedy decoding)")
        texts = sentences_from_args(list(sentences or []))
        ck = load_translator(ckpt, device)
        outs = translate_texts(ck.model, ck.src_tokenizer, ck.tgt_tokenizer, texts, beam_size=beam, device=device)
        for src, hyp in zip(texts, outs):
            if json_out:
                typer.echo(json.dumps({"source": src, "translation": hyp}, ensure_ascii=False))
            elif len(texts) == 1:
                typer.echo(hyp)
            else:
                typer.echo(f"{src} → {hyp}")
