"""`glassformer lens TEXT`: what each layer would predict if it were the last (the logit lens).

    glassformer lens --model runs/zh-en "猫 追 狗"          # the decoder, target = its translation
    glassformer lens --model path/to/gpt2 "The cat sat on the" --json lens.json --out lens.png
    glassformer lens --model minilm "the cat sat"           # no head: read through the embedding
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def lens(
        text: str = typer.Argument(..., help="sentence (a translator's source, a prompt, or an encoder's input)"),
        model: str = typer.Option("minilm", "--model", help="minilm, a run folder, or a Hugging Face folder"),
        top: int = typer.Option(1, help="tokens shown per layer and position"),
        json_path: Optional[Path] = typer.Option(None, "--json", help="write layers, tokens and probabilities here"),
        out: Optional[Path] = typer.Option(None, "--out", help="PNG heatmap: P(final prediction) per layer × position"),
    ) -> None:
        """Read every layer's residual stream through the final norm and the head (logit lens)."""
        import torch

        from ..errors import InputError
        from ..interp import logit_lens
        from . import _interp_io as io

        if top < 1:
            raise InputError(f"--top {top} must be at least 1")
        s = io.load(model)
        p = io.prepare(s, text)
        ll = logit_lens(s.model, *p.inputs)
        probs = ll.probs()[:, 0]  # (layer, seq, vocab)
        if top > probs.shape[-1]:  # topk cannot pick more tokens than there are
            raise InputError(f"--top {top} is more than the {probs.shape[-1]} tokens of {s.name}'s vocabulary;"
                             f" give at most {probs.shape[-1]}")
        final = probs[-1].argmax(-1)
        p_final = probs[:, torch.arange(len(final)), final].numpy()  # (layer, seq)
        topk = probs.topk(top, dim=-1)
        cols = p.tgt_labels if s.arch != "decoder" else p.src_labels
        typer.echo(f"{s.name}: logit lens through the {ll.unembedding}; columns: {' '.join(cols)}")
        if s.arch == "encoder-decoder":
            typer.echo(f"target: the model's translation «{io.translation(s, p)}» (teacher-forced)")
        rows = []
        for l, label in enumerate(ll.labels):
            cells = ["/".join(s.tgt_token(i) for i in topk.indices[l, j]) + f" {float(topk.values[l, j, 0]):.2f}"
                     for j in range(len(cols))]
            rows.append({"layer": label, "top": [[s.tgt_token(i) for i in topk.indices[l, j]] for j in range(len(cols))],
                         "p_top": topk.values[l].tolist(), "p_final_prediction": p_final[l].tolist()})
            typer.echo(f"{label:>8}  " + "  ".join(cells))
        if json_path is not None:
            io.write_json(json_path, {"model": s.name, "text": text, "unembedding": ll.unembedding,
                                      "positions": cols, "layers": rows})
            typer.echo(f"wrote {json_path}")
        if out is not None:
            from ..viz.heatmap import plot_heatmap
            plot_heatmap(p_final, ll.labels, cols, out, f"{s.name}: P(final prediction) read at each layer",
                         "probability", signed=False)
            typer.echo(f"wrote {out}")

