"""`glassformer generate`: continue a prompt with a trained language model.

    glassformer generate --ckpt runs/lm --prompt "Once upon" --max-new-tokens 80 --temperature 0.8 --top-k 20

--temperature 0 is greedy decoding; otherwise sampling with optional top-k / top-p (nucleus).
Each new token reads at most the last --window tokens: by default the length of the windows the model
trained on (its run's block_size), so a long text never puts tokens at positions the model never saw
(docs/real-data.md, "Generating past the trained window"); --window 0 reads the whole text.
"""

from __future__ import annotations

import math
from typing import Optional

import typer

from .. import limits
from ..errors import InputError


def register(app: typer.Typer) -> None:
    @app.command()
    def generate(
        ctx: typer.Context,
        ckpt: str = typer.Option(..., help="run folder or checkpoint folder of a language model"),
        prompt: str = typer.Option(..., help="text to continue"),
        max_new_tokens: int = typer.Option(64, help="tokens to add at most"),
        temperature: float = typer.Option(1.0, help="0: greedy; <1 sharper, >1 flatter"),
        top_k: Optional[int] = typer.Option(None, help="sample among the k most likely tokens"),
        top_p: Optional[float] = typer.Option(None, help="sample within probability mass p"),
        seed: int = typer.Option(0, help="sampling seed"),
        strict: bool = typer.Option(False, "--strict", help="refuse a prompt with a piece unseen in training"
                                    " (default: read it as <unk> and warn)"),
        precision: str = typer.Option("fp32", help="weights while decoding: fp32 | int8 (per-channel weight-only) |"
                                      " bf16 (fast only on CPUs with native bf16)"),
        device: str = typer.Option("cpu", help="cpu | cuda"),
        window: Optional[int] = typer.Option(None, help="each new token reads at most this many tokens before it"
                                             " (default: the block size the model trained on; 0: the whole text)"),
    ) -> None:
        """Continue --prompt with a trained language model and print the text."""
        import torch

        from ..generate import generate as run_generate
        from ..train.checkpoint import load_checkpoint, trained_window

        from ..nn.precision import check as check_precision
        check_precision(precision, "--precision")
        if max_new_tokens < 1:
            raise InputError(f"--max-new-tokens {max_new_tokens} must be at least 1")
        if not math.isfinite(temperature) or temperature < 0:
            raise InputError(f"--temperature {temperature} must be a finite number >= 0 (0 is greedy)")
        if top_k is not None and top_k < 1:
            raise InputError(f"--top-k {top_k} must be at least 1")
        if top_p is not None and not 0 < top_p <= 1:
            raise InputError(f"--top-p {top_p} must be in (0, 1]")
        if window is not None and window < 0:
            raise InputError(f"--window {window} must be at least 1, or 0 to read the whole text")
        from ._arguments import given, typed
        unused = given(ctx, "top_k", "top_p", "seed") if temperature == 0 else []
        if unused:  # greedy decoding takes the most likely token: nothing is sampled
            shown = typed(ctx, *unused)
            raise InputError(f"--temperature 0 is greedy decoding, which samples nothing, so {shown} would have no"
                             f" effect; drop {'it' if len(unused) == 1 else 'them'}, or give a --temperature above 0")
        ck = load_checkpoint(ckpt, device=device)
        if ck.config.arch != "decoder":
            raise InputError(f"{ck.path} holds {'an' if ck.config.arch.startswith('e') else 'a'} {ck.config.arch} model; generate needs a language model "
                             "(train one with --task lm); use `glassformer translate` for translators")
        vocab = ck.config.vocab_size
        if top_k is not None and top_k > vocab:  # the sampler would keep every token (clamped to the vocabulary)
            raise InputError(f"--top-k {top_k} is more than the {vocab} tokens of the model's vocabulary; give at most"
                             f" {vocab} (--top-k {vocab} keeps every token)")
        from ..unknown import UnknownPolicy
        tok = ck.src_tokenizer
        ids = [tok.bos_id, *UnknownPolicy(tok, strict, warn=lambda m: typer.echo(m, err=True)).encode(prompt)]
        limits.check_tokens(len(ids) + max_new_tokens, f"the prompt ({len(ids)} tokens with <bos>) plus "
                            f"--max-new-tokens {max_new_tokens}")
        if window is None:  # the windows it trained on: positions past them were never seen
            window = trained_window(ck.meta)
        window = window or None
        total = len(ids) + max_new_tokens
        limits.check_positions(min(total, window or total), ck.config, "the prompt plus --max-new-tokens",
                               "give a shorter input, or a --window of at most max_len")
        if window is not None and total > window and precision != "fp32":
            raise InputError(f"--precision {precision}: past the window of {window} tokens (--window; by default "
                             "the block size the model trained on) each token re-reads the window in fp32; use "
                             "--precision fp32, or --window 0 to read the whole text")
        x = torch.tensor([ids], device=device)
        g = torch.Generator(device=device).manual_seed(seed)
        greedy = temperature == 0
        out = run_generate(ck.model, x, max_new_tokens=max_new_tokens, strategy="greedy" if greedy else "sample",
                           temperature=temperature if not greedy else 1.0, top_k=top_k, top_p=top_p,
                           eos_id=tok.eos_id, generator=g, precision=precision, window=window)
        typer.echo(tok.decode(out[0].tolist()))
        if window is not None and out.shape[1] > window:
            typer.echo(f"(each token read the {window} before it: the windows the model trained on; "
                       "--window 0 reads the whole text)", err=True)
