"""Rewrites that change a model's parameters and never its function (what export needs of a model).

A Hugging Face family fixes some choices that glassformer leaves open; each rewrite here returns a
new glassformer model, with the family's choice, that computes what the given one computes:

- `half_split_basis`: an interleaved sinusoid table (sin, cos, sin, cos, ..., seed §3.2) is the
  half-split one (all sines, then all cosines: Marian, Pegasus) read in a permuted d_model basis.
  Every weight that reads or writes the residual stream is permuted by σ = (0, 2, 4, ..., 1, 3, 5, ...);
  LayerNorm and RMSNorm treat the features as a set, so a permutation passes through them;
- `learned_table`: a fixed sinusoid table is a learned table that holds the same values (BERT,
  GPT, BART), for its first `rows` positions;
- `fold_embed_scale`: × sqrt(d_model) on the embedding (§3.4) moved into the token table; an
  output head tied to that table is untied first, since it must keep the unscaled one;
- `one_vocab_size`: separate source and target vocabularies as two tables of one size (the larger),
  for families with one `vocab_size`; the target ids past the real vocabulary get a logit bias of
  -1e9, so they are never chosen and the logits over the real vocabulary are unchanged.
"""

from __future__ import annotations

import torch

from ..config import ModelConfig
from ..nn.model import build_model

NEG = -1e9  # logit bias of the padding ids of a padded target vocabulary: never chosen, still finite


def _rebuilt(model, config: ModelConfig, state: dict[str, torch.Tensor]):
    new = build_model(config)
    missing, unexpected = new.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    return new.eval()


def _residual_dim(name: str) -> int | None:
    """The dimension of a parameter that indexes the d_model residual basis (None: it has none)."""
    leaf = name.rsplit(".", 1)[-1]
    return {"W_E": 1, "W_pos": 1, "W_Q": 1, "W_K": 1, "W_V": 1, "W_O": 1, "W_2": 1,
            "b_O": 0, "b_2": 0, "gamma": 0, "beta": 0, "W_1": 0, "W_G": 0, "W_U": 0,
            "running_mean": 0, "running_var": 0}.get(leaf)


def half_split_basis(model):
    """An interleaved-sinusoid model as the equal pe='sinusoidal_half' model in the basis σ."""
    cfg = model.config
    d = cfg.d_model
    sigma = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])
    state = {}
    for name, t in model.state_dict().items():
        dim = _residual_dim(name)
        if dim is not None:
            assert t.shape[dim] == d, (name, t.shape)
            t = t.index_select(dim, sigma)
        state[name] = t.clone()
    return _rebuilt(model, cfg.replace(pe="sinusoidal_half"), state)


@torch.no_grad()
def learned_table(model, rows: int):
    """A fixed-sinusoid model as the equal pe='learned' model whose table holds the sinusoids."""
    cfg = model.config
    state = {k: v.clone() for k, v in model.state_dict().items()}
    positions = torch.arange(rows)
    for prefix in ("", "dec_"):
        pos = getattr(model, f"{prefix}pos", None)
        if pos is not None:
            state[f"{prefix}pos.W_pos"] = pos(positions).to(model.embed.W_E.dtype)
    return _rebuilt(model, cfg.replace(pe="learned", max_len=rows), state)


@torch.no_grad()
def fold_embed_scale(model):
    """× sqrt(d_model) moved into the token tables; a head tied to a table keeps the unscaled one."""
    cfg = model.config
    state = {k: v.clone() for k, v in model.state_dict().items()}
    scale = model.embed.scale
    if cfg.arch != "encoder" and cfg.tie_embeddings:
        table = model.dec_embed.W_E if cfg.arch == "encoder-decoder" else model.embed.W_E
        state["head.W_U"] = table.detach().t().contiguous()
    for name in ("embed.W_E", "dec_embed.W_E"):
        if name in state:
            state[name] = state[name] * scale
    tie = False if cfg.arch != "encoder" else cfg.tie_embeddings
    return _rebuilt(model, cfg.replace(embed_scale=False, tie_embeddings=tie), state)


@torch.no_grad()
def one_vocab_size(model):
    """Separate source and target vocabularies as two tables of the larger size (padding rows zero)."""
    cfg = model.config
    V = max(cfg.vocab_size, cfg.out_vocab_size)
    state = {k: v.clone() for k, v in model.state_dict().items()}

    def pad_rows(t, n, value=0.0):
        extra = t.new_full((n - t.shape[0], *t.shape[1:]), value)
        return torch.cat([t, extra])

    state["embed.W_E"] = pad_rows(model.embed.W_E, V)
    state["dec_embed.W_E"] = pad_rows(model.dec_embed.W_E, V)
    if model.head.W_U is not None:
        state["head.W_U"] = pad_rows(model.head.W_U.t(), V).t().contiguous()
    b = model.head.b_U if model.head.b_U is not None else torch.zeros(cfg.out_vocab_size)
    state["head.b_U"] = pad_rows(b, V, NEG)
    new_cfg = cfg.replace(vocab_size=V, tgt_vocab_size=None, share_embeddings=False, head_bias=True)
    return _rebuilt(model, new_cfg, state)
