"""Seed 000 §4.4's mechanism, measured at initialisation: which stream's variance grows with depth?

The seed explains Post-LN's instability thus: "Post-LN 中，残差路径的输入可能被前面层的累积效应偏移，
导致子层接收到的信号方差越来越大" (in Post-LN the sublayers receive a signal whose variance keeps
growing). At initialisation that can be read off without training (seconds): run random tokens
through a deep stack and record, at every layer, the variance of (a) the residual stream entering
the layer and (b) the input of its attention sublayer. Xiong et al. (2020, §3) derive the opposite
picture: Post-LN normalises the stream after every block, so its sublayers see variance ≈ 1 at
every depth, while Pre-LN's stream x_l = x_{l−1} + F(LN(x_{l−1})) grows about linearly with l
(its sublayers still see LN(x), variance ≈ 1). Growth is log2(variance at the last layer /
variance at layer 2): layer 1 receives the embedding, whose scale is the embedding's, not the
stack's. One random initialisation per seed.
"""

from __future__ import annotations

import math

import torch

from ..nn import build_model
from .base import Context, Outcome, tiny_config
from .runner import set_seed
from .verdict import Check, Variant

ID = "ln-init-variance"
SECTION = "seed 000 §4.4 (Xiong et al. 2020 §3)"
CLAIM = ("Post-LN: the input of the residual path is shifted by the accumulated effect of the earlier layers, "
         "so the signal each sublayer receives has an ever larger variance.")
SEEDS = 10  # one forward pass per seed
VOCAB = 64


def readings(position: str, n_layers: int, d_model: int, seed: int) -> dict[str, list[float]]:
    """Variance per layer of the stream entering each layer and of its attention sublayer's input."""
    set_seed(seed)
    model = build_model(tiny_config(VOCAB, d_model=d_model, n_heads=4, d_ff=4 * d_model, n_layers=n_layers,
                                    norm_position=position))
    model.eval()
    stream, sub = [], []
    hooks = []
    for layer in model.dec:
        hooks.append(layer.register_forward_pre_hook(lambda m, args: stream.append(float(args[0].var()))))
        hooks.append(layer.self_attn.register_forward_pre_hook(lambda m, args: sub.append(float(args[0].var()))))
    last = []
    hooks.append(model.dec[-1].register_forward_hook(lambda m, args, out: last.append(float(out.var()))))
    try:
        ids = torch.randint(3, VOCAB, (8, 64), generator=torch.Generator().manual_seed(seed))
        with torch.no_grad():
            model(ids)
    finally:
        for h in hooks:
            h.remove()
    return {"stream": stream + last, "sublayer": sub}


def growth(xs: list[float]) -> float:
    """log2 of the last value over the second (the first is the embedding's own scale)."""
    return math.log2(xs[-1] / xs[1])


def run(ctx: Context) -> Outcome:
    depth, width = ctx.pick(4, 12), ctx.pick(64, 256)
    per = {pos: [readings(pos, depth, width, s) for s in ctx.seeds] for pos in ("post", "pre")}
    variants = []
    for pos, label in (("post", "Post-LN"), ("pre", "Pre-LN")):
        for part, what in (("sublayer", "attention sublayer input"), ("stream", "residual stream")):
            variants.append(Variant(f"{label}: {what} growth", f"log2 variance, layer {depth} (stream: the output) "
                                    "over layer 2", [growth(r[part]) for r in per[pos]]))
    variants.append(Variant("no change", "0", [0.0] * len(ctx.seeds)))
    checks = [
        Check("the seed's mechanism: in Post-LN the signal the sublayers receive grows with depth (≥ 2×)",
              "Post-LN: attention sublayer input growth", "no change", True, 1.0),
        Check("(what grows instead) Pre-LN's residual stream grows with depth (≥ 2×)",
              "Pre-LN: residual stream growth", "no change", True, 1.0, main=False,
              published="Xiong et al. 2020 §3: Pre-LN's x_L has variance growing linearly in L; Post-LN's is 1"),
        Check("(control) Pre-LN's sublayers see LayerNorm's output: no growth of 2× there either",
              "Pre-LN: attention sublayer input growth", "no change", True, 1.0, main=False),
    ]
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    profile = {f"{pos} {part}": [round(mean([r[part][i] for r in per[pos]]), 2) for i in range(depth)]
               for pos in per for part in ("sublayer", "stream")}
    setup = (f"Decoder-only stacks of {depth} layers, d_model {width}, 4 heads, d_ff {4 * width}, embed_scale on, "
             f"glassformer's default initialisation; 8 × 64 random tokens, one forward pass, no training. Variance "
             f"per layer (mean over seeds): {profile}.")
    notes = ("At initialisation only: the seed's sentence is about what happens as the stack deepens, which the "
             "initial forward pass already shows. Training can change the picture (Xiong et al. measure the "
             "gradients, which `ln-gradients` does).")
    return Outcome(variants, checks, setup, notes=notes)
