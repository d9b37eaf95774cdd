"""A planted mechanism, found by the tools.

A 2-layer, 4-head decoder is trained to repeat the first token at every position. During training
(and after) every head except PLANTED = (layer 1, head 2) may only attend to its own position — a
mask added at `scaled` through the same hooks the tools use — so the first token can reach later
positions through that one head and nowhere else. Layer-0 heads still touch the token at position 0,
so they are not trivially irrelevant: the tools must rank the planted head above them.
"""

import torch

from glassformer.config import ModelConfig
from glassformer.interp import ablate, attribution_patch, decompose, patch
from glassformer.nn import build_model
from glassformer.trace import hooks

PLANTED = (1, 2)
V, T = 24, 8


def only_planted_head_looks_around(scaled: torch.Tensor, name: str) -> torch.Tensor:
    layer = int(name.split(".")[1])
    eye = torch.eye(scaled.shape[-1], dtype=torch.bool)
    keep = torch.ones(scaled.shape[1], 1, 1, dtype=torch.bool) & eye
    if layer == PLANTED[0]:
        keep = keep.clone()
        keep[PLANTED[1]] = True  # the planted head: causal attention as usual
    return scaled.masked_fill(~keep, torch.finfo(scaled.dtype).min)


def train_copy_model(steps: int = 150):
    torch.manual_seed(0)
    cfg = ModelConfig(arch="decoder", vocab_size=V, d_model=32, n_heads=4, n_layers=2, d_ff=32,
                      norm_position="pre", pe="learned", max_len=T)
    model = build_model(cfg)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    with hooks(model, {"dec.*.self_attn.scaled": only_planted_head_looks_around}):
        for _ in range(steps):
            x = torch.randint(0, V, (32, T), generator=g)
            loss = torch.nn.functional.cross_entropy(model(x)[:, 1:].reshape(-1, V), x[:, :1].expand(-1, T - 1).reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    return model.eval(), g


def test_tools_rank_the_planted_head_first(one_thread):
    model, g = train_copy_model()
    x = torch.randint(0, V, (16, T), generator=g)
    bad = x.clone()
    bad[:, 0] = (bad[:, 0] + 1 + torch.randint(0, V - 1, (16,), generator=g)) % V
    with hooks(model, {"dec.*.self_attn.scaled": only_planted_head_looks_around}):
        acc = float((model(x)[:, 1:].argmax(-1) == x[:, :1]).float().mean())
        assert acc >= 0.95, f"the copy task was not learned (accuracy {acc:.2f})"
        exact = patch(model, x, bad, hook="dec.*.self_attn.z", per="head")
        approx = attribution_patch(model, x, bad, hook="dec.*.self_attn.z", per="head")
        drops = torch.tensor([[acc - float((ablate(model, x, heads=[(l, h)], how="mean")[:, 1:].argmax(-1)
                                            == x[:, :1]).float().mean()) for h in range(4)] for l in range(2)])
        decomposition = decompose(model, x)
    planted = PLANTED[0] * 4 + PLANTED[1]
    for name, scores in (("patching", exact.effects), ("attribution patching", approx.effects),
                         ("mean ablation", drops)):
        assert int(scores.flatten().argmax()) == planted, f"{name} ranked {scores.tolist()}"
    assert exact.effects[PLANTED] >= 0.9  # the planted head alone restores the clean answer
    # direct logit attribution of each row's answer (its own first token), summed over positions 1..T-1
    heads = [f"dec.{l}.self_attn.head{h}" for l in range(2) for h in range(4)]
    direct = torch.zeros(len(heads))
    for row in range(x.shape[0]):
        parts = decomposition.logit_attribution(int(x[row, 0])).parts
        direct += torch.tensor([float(parts[k][row, 1:].sum()) for k in heads])
    assert int(direct.argmax()) == planted, f"direct logit attribution ranked {direct.tolist()}"
    print(f"planted {PLANTED}: accuracy {acc:.3f}; patching {exact.effects.flatten().tolist()}; "
          f"attribution {approx.effects.flatten().tolist()}; ablation drop {drops.flatten().tolist()}; "
          f"DLA {direct.tolist()}")  # pytest -s

