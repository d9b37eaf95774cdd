"""`glassformer decompose TEXT`: the final residual stream as a sum of parts, and their direct logit effect.

    glassformer decompose --model runs/zh-en "猫 追 狗" --position 1          # what writes "cat"
    glassformer decompose --model path/to/gpt2 "the cat" --token cat --minus dog --json parts.json
    glassformer decompose --model minilm "the cat sat"                     # parts only (no head)

The first line says whether the split is exact (Pre-LN, norm-free) or linearised (Post-LN: each σ
frozen at this input) and prints the measured error |Σ parts − stream|.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def decompose(
        text: str = typer.Argument(..., help="sentence (a translator's source, a prompt, or an encoder's input)"),
        model: str = typer.Option("minilm", "--model", help="minilm, a run folder, or a Hugging Face folder"),
        position: int = typer.Option(-1, help="position to report (default: the last)"),
        token: Optional[str] = typer.Option(None, help="attribute this token's logit (default: the prediction there)"),
        minus: Optional[str] = typer.Option(None, help="attribute logit(token) − logit(minus)"),
        top: int = typer.Option(8, help="parts shown"),
        json_path: Optional[Path] = typer.Option(None, "--json", help="write every part's norm and attribution here"),
    ) -> None:
        """Split the residual stream into embedding, position, head, FFN and bias parts (and their logit effect)."""
        from ..errors import InputError
        from ..interp import decompose as split
        from . import _interp_io as io

        if top < 1:  # as lens: a slice [:0] or [:-2] would show nothing, or all but the smallest parts
            raise InputError(f"--top {top} must be at least 1")
        s = io.load(model)
        p = io.prepare(s, text)
        d = split(s.model, *p.inputs)
        if d.stream.head is None and (token is not None or minus is not None):  # no logits to attribute
            given = [f"--{n} {v}" for n, v in (("token", token), ("minus", minus)) if v is not None]
            raise InputError(f"{s.name} has no output head, so there is no logit for {' '.join(given)} to attribute;"
                             f" drop {'it' if len(given) == 1 else 'them'} (the parts are split all the same), or give"
                             " a model with a head (a run folder, GPT-2)")
        seq = d.residual.shape[1]
        if not -seq <= position < seq:
            raise InputError(f"--position {position} is outside the sequence; positions are 0..{seq - 1}")
        labels = p.tgt_labels if s.arch == "encoder-decoder" else p.src_labels
        typer.echo(f"{s.name}: {len(d.components)} parts; {'exact' if d.exact else 'linearised'}: "
                   f"max |Σ parts − stream| = {d.error:.2e}. {d.note}")
        norms = sorted(((k, float(v[0, position].norm())) for k, v in d.components.items()), key=lambda kv: -kv[1])
        typer.echo(f"largest parts at position {position} ({labels[position]}), by norm: "
                   + ", ".join(f"{k} {v:.2f}" for k, v in norms[:top]))
        data = {"model": s.name, "text": text, "exact": d.exact, "error": d.error, "note": d.note,
                "position": position, "norms": dict(norms)}
        if d.stream.head is not None:
            vocab = _vocab(s, d.output.shape[-1])
            tok = vocab(token) if token is not None else int(d.output[0, position].argmax())
            neg = vocab(minus) if minus is not None else None
            a = d.logit_attribution(tok, minus=neg)
            what = f"logit({s.tgt_token(tok)})" + (f" − logit({s.tgt_token(neg)})" if neg is not None else "")
            typer.echo(f"direct attribution of {what} at {labels[position]} = {float(a.actual[0, position]):.3f} "
                       f"(Σ parts − logit = {a.error:.1e}, final norm's σ frozen):")
            for k, v in a.ranked(0, position)[:top]:
                typer.echo(f"  {k:<28} {v:+.3f}")
            data["attribution"] = {"target": what, "parts": dict(a.ranked(0, position)), "error": a.error}
        if json_path is not None:
            io.write_json(json_path, data)
            typer.echo(f"wrote {json_path}")


def _vocab(s, size: int):
    """token string -> id, through the specimen's own id -> token map."""
    from ..errors import InputError
    table = {s.tgt_token(i): i for i in range(size)}

    def lookup(t: str) -> int:
        if t not in table:
            raise InputError(f"{t!r} is not a token of {s.name}'s output vocabulary "
                             f"(e.g. {', '.join(list(table)[4:12])})")
        return table[t]
    return lookup
