"""Xiong et al. 2020 ("On Layer Normalization in the Transformer Architecture"), behind seed 000 §4.4.

The seed says Post-LN needs warmup because gradients blow up and Pre-LN does not. Xiong et al.
explain it at initialisation: with Post-LN the gradient of the FFN weights is largest in the last
layer (Theorem 1: O(d·sqrt(ln d)) there, whatever the depth), so a fixed learning rate is too
large near the output; with Pre-LN it is O(d·sqrt(ln d / L)) and about the same in every layer
(their Fig. 3). Measured here at initialisation, no training: the norm of ∂L/∂W_2 (the FFN's
second weight) in each layer of a causal LM on random tokens, per seed (a fresh initialisation).
"""

from __future__ import annotations

import math

import torch

from ..nn import build_model
from .base import Context, Outcome, tiny_config
from .report import line_plot
from .runner import set_seed
from .verdict import Check, Variant

ID = "ln-gradients"
SECTION = "seed 000 §4.4 (Xiong et al. 2020)"
CLAIM = ("Post-LN trains unstably and needs warmup because its gradients explode; Pre-LN, which "
         "normalises the input of each sublayer, keeps the signal in range and needs no warmup "
         "(Xiong et al. 2020: at initialisation Post-LN's gradients grow toward the output layer, "
         "Pre-LN's are flat across layers).")
SEEDS = 10  # one forward/backward per seed: milliseconds
VOCAB = 64


def layer_grad_norms(norm_position: str, depth: int, seed: int) -> list[float]:
    """‖∂L/∂W_2‖ of each layer's FFN at initialisation (LM loss on one random batch)."""
    set_seed(seed)
    model = build_model(tiny_config(VOCAB, n_layers=depth, norm_position=norm_position))
    gen = torch.Generator().manual_seed(10_000 + seed)
    ids = torch.randint(3, VOCAB, (16, 33), generator=gen)
    logits = model(ids[:, :-1])
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
    loss.backward()
    return [float(layer.ffn.W_2.grad.norm()) for layer in model.dec]


def run(ctx: Context) -> Outcome:
    depths = ctx.pick((6,), (6, 12, 24))
    variants, curves = [], {}
    for depth in depths:
        for pos in ("post", "pre"):
            per_seed = [ctx.memo(f"{pos}{depth}.s{s}", lambda: {"g": layer_grad_norms(pos, depth, s)})["g"]
                        for s in ctx.seeds]
            growth = [math.log10(g[-1] / g[0]) for g in per_seed]
            variants.append(Variant(f"{pos.capitalize()}-LN {depth}L: growth",
                                    "log10(‖∇W_2‖ last layer / ‖∇W_2‖ first layer) at init", growth))
            mean = [sum(g[i] for g in per_seed) / len(per_seed) for i in range(depth)]
            curves[f"{pos.capitalize()}-LN, {depth} layers"] = (list(range(1, depth + 1)), mean)
            ctx.log(f"{pos}-LN {depth}L: growth {[round(x, 2) for x in growth]}")
    line_plot(ctx.out_dir / "ln_gradients.png", curves, "layer", "‖∂L/∂W_2‖ at initialisation (mean over seeds)",
              "Per-layer FFN gradient norm at init (cf. Xiong et al. 2020, Fig. 3)", logy=True)
    # Issue 28 §4: a ≥ 2× gap to Pre-LN can come from Pre-LN's gradient *falling* toward the output as
    # much as from Post-LN's rising, so Post-LN's own growth is checked against a flat profile too
    variants.append(Variant("flat profile", "log10 of a last/first ratio of 1 (no growth)", [0.0] * len(ctx.seeds)))
    checks = [Check(f"{d} layers: Post-LN's gradient grows toward the output more than Pre-LN's (≥ 2×)",
                    f"Post-LN {d}L: growth", f"Pre-LN {d}L: growth", True, math.log10(2), main=d == depths[0],
                    published="Xiong et al. 2020 Fig. 3: Post-LN grows with layer index, Pre-LN flat")
              for d in depths]
    checks += [Check(f"{d} layers: Post-LN's own gradient grows toward the output (last layer ≥ 2× the first)",
                     f"Post-LN {d}L: growth", "flat profile", True, math.log10(2), main=d == depths[0],
                     published="Xiong et al. 2020 Theorem 1: Post-LN's last-layer gradient O(d·sqrt(ln d)) at any "
                               "depth, Pre-LN's O(d·sqrt(ln d / L))")
               for d in depths]
    setup = (f"Decoder-only models, d_model 64, 4 heads, d_ff 256, embed_scale on, depth {list(depths)}, Post-LN "
             "(no final norm) and Pre-LN (final norm); one batch of 16 random 32-token rows, next-token "
             "cross-entropy, one backward pass at initialisation per seed; no training.")
    notes = ("Measures the mechanism Xiong et al. give for Post-LN's need of warmup, not warmup "
             "itself (that is `norm-placement`). A growth below 0 means the first layer gets *more* "
             "gradient than the last: Xiong's Pre-LN is 'flat', a negative growth here is a deviation "
             "from their figure, to be read from the table.")
    return Outcome(variants, checks, setup, plots=[("ln_gradients.png", "FFN gradient norm per layer at init")],
                   notes=notes)
