"""`glassformer demo`: the main job (until training lands: a forward pass of the seed's 猫 吃 鱼 model)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command()
    def demo() -> None:
        """Push 猫 吃 鱼 through the seed's two-layer encoder and print shapes and outputs."""
        import torch

        from ..config import ModelConfig
        from ..nn import build_model

        torch.manual_seed(0)
        cfg = ModelConfig(arch="encoder", vocab_size=3, d_model=12, n_heads=3, n_layers=2, d_ff=48,
                          activation="gelu_tanh", norm_position="post")
        model = build_model(cfg).eval()
        ids = torch.tensor([[0, 1, 2]])
        with torch.no_grad():
            out, trace = model.run_with_trace(ids, names=["x0", "enc.*.out"])
        for name, t in trace.items():
            typer.echo(f"{name:12s} {tuple(t.shape)}")
        typer.echo(f"output {tuple(out.shape)}:\n{out[0].numpy().round(4)}")
