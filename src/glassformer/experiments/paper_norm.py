"""Seed 003 §4: "the original paper puts LayerNorm at the input of each sublayer (pre-norm)".

Vaswani et al. 2017 §3.1 write the output of each sublayer as LayerNorm(x + Sublayer(x)): the
norm comes *after* the residual sum (Post-LN), which is also what seed 000 §4.4 says. An exact
check: glassformer's default layer (the paper's) is compared with torch's own encoder layer in
both placements, weights shared; the seed's claim holds only if the paper's layer equals Pre-LN.
"""

from __future__ import annotations

import torch

from ..config import ModelConfig
from ..nn import build_model
from .base import Context, Outcome
from .verdict import Exact, Variant

ID = "paper-norm"
SECTION = "seed 003 §4 (vs seed 000 §4.4)"
CLAIM = ("The original paper puts LayerNorm at the input of each sublayer (pre-norm); some early "
         "implementations put it at the output (post-norm), which trains unstably.")
SEEDS = 1  # exact: no randomness that matters


def _torch_layer(layer, d_model: int, n_heads: int, norm_first: bool) -> torch.nn.TransformerEncoderLayer:
    """torch's encoder layer carrying glassformer's weights (glassformer stores (in, out))."""
    ref = torch.nn.TransformerEncoderLayer(d_model, n_heads, dim_feedforward=layer.ffn.W_1.shape[1],
                                           dropout=0.0, batch_first=True, norm_first=norm_first)
    a = layer.attn
    with torch.no_grad():
        ref.self_attn.in_proj_weight.copy_(torch.cat(
            [getattr(a, f"W_{n}").permute(1, 0, 2).reshape(d_model, -1).T for n in "QKV"], 0))
        ref.self_attn.in_proj_bias.copy_(torch.cat([getattr(a, f"b_{n}").reshape(-1) for n in "QKV"], 0))
        ref.self_attn.out_proj.weight.copy_(a.W_O.T)
        ref.self_attn.out_proj.bias.copy_(a.b_O)
        ref.linear1.weight.copy_(layer.ffn.W_1.T)
        ref.linear1.bias.copy_(layer.ffn.b_1)
        ref.linear2.weight.copy_(layer.ffn.W_2.T)
        ref.linear2.bias.copy_(layer.ffn.b_2)
        for ours, theirs in ((layer.norm1, ref.norm1), (layer.norm2, ref.norm2)):
            theirs.weight.copy_(ours.gamma)
            theirs.bias.copy_(ours.beta)
    return ref.eval()


def run(ctx: Context) -> Outcome:
    torch.manual_seed(ctx.seeds[0])
    cfg = ModelConfig(arch="encoder", vocab_size=10, d_model=64, n_heads=4, n_layers=1, d_ff=128)
    layer = build_model(cfg).eval().enc[0]
    with torch.no_grad():  # non-trivial γ, β: the placement must show even where γ ≠ 1
        for norm in (layer.norm1, layer.norm2):
            norm.gamma.add_(0.1 * torch.randn_like(norm.gamma))
            norm.beta.add_(0.1 * torch.randn_like(norm.beta))
    x = torch.randn(2, 7, 64) * 3
    with torch.no_grad():
        ours = layer(x)
        post = _torch_layer(layer, 64, 4, norm_first=False)(x)
        pre = _torch_layer(layer, 64, 4, norm_first=True)(x)
    d_post = float((ours - post).abs().max())
    d_pre = float((ours - pre).abs().max())
    variants = [Variant("paper layer vs Post-LN", "max |difference| of outputs", [d_post]),
                Variant("paper layer vs Pre-LN", "max |difference| of outputs", [d_pre])]
    checks = [
        Exact("the paper's layer, LayerNorm(x + Sublayer(x)), is the pre-norm layer", "paper layer vs Pre-LN",
              "<=", 1e-4, published="Vaswani et al. 2017 §3.1: LayerNorm(x + Sublayer(x))"),
        Exact("(control) the paper's layer equals torch's norm_first=False layer", "paper layer vs Post-LN",
              "<=", 1e-4, main=False),
    ]
    setup = ("glassformer's default encoder layer (ModelConfig defaults = the paper's base model, "
             "norm_position='post') against torch.nn.TransformerEncoderLayer with norm_first=False "
             "and True, all weights copied, d_model 64, 4 heads, one random input of norm ≈ 3/token.")
    notes = ("Seed 000 §4.4 gets this right (\"原论文的 Transformer 用的是 Post-LN\"); seed 003 §4 has it "
             "backwards. Pre-LN came later (Wang et al. 2019; Xiong et al. 2020).")
    return Outcome(variants, checks, setup, notes=notes)
