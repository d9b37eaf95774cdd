"""Logit lens (nostalgebraist 2020): read the residual stream after every layer as if it were the last.

    logits_l = head(final_norm(stream after layer l))     l = x0, 0, …, N−1

The stream after the last layer gives the model's own logits exactly (a test). Decoder-only
models and the decoder of a translator have a head; an encoder (MiniLM) has none, so its lens
projects onto the token embedding W_Eᵀ instead (a nearest-token lens: which input token each
position's state is closest to), and says so in `.unembedding`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..errors import InputError
from ..trace import run_with_trace
from .sites import stream_of


@dataclass
class LogitLens:
    """logits (layer, batch, seq, vocab) with layer 0 = x0 (embeddings) and layer l+1 = after layer l."""

    logits: torch.Tensor
    labels: list[str]  # "x0", "dec.0", …
    unembedding: str  # "head" | "embedding (no output head)"

    def probs(self) -> torch.Tensor:
        return torch.softmax(self.logits.float(), dim=-1)

    def top(self, k: int = 1, batch: int = 0) -> torch.Tensor:
        """Top-k token ids (layer, seq, k) of one batch row."""
        return self.logits[:, batch].topk(k, dim=-1).indices

    def prob_of(self, token: int, batch: int = 0) -> torch.Tensor:
        """P(token) (layer, seq) at every layer and position of one batch row."""
        V = self.logits.shape[-1]
        if not (isinstance(token, int) and 0 <= token < V):
            raise InputError(f"token {token!r} is outside the vocabulary [0, {V})")
        return self.probs()[:, batch, :, token]


@torch.no_grad()
def logit_lens(model: nn.Module, *inputs, stack: str | None = None, **kwargs) -> LogitLens:
    """The logit lens of `model(*inputs, **kwargs)` over every layer and position."""
    st = stream_of(model, stack)
    if st.stack == "enc" and st.model.config.arch == "encoder-decoder":
        raise InputError("the encoder of a translator has no vocabulary to read; use stack='dec'")
    p, N = st.prefix, len(st.layers)
    names = [f"{p}x0"] + [f"{st.stack}.{l}.out" for l in range(N)]
    _, tr = run_with_trace(model, *inputs, names=names, **kwargs)
    states = torch.stack([tr[n] for n in names])  # (layer, batch, seq, d_model)
    if st.final_norm is not None:
        states = st.final_norm(states)
    if st.head is not None:
        logits, how = st.head(states), "head"
    else:
        W_E = getattr(model, f"{p}embed").W_E
        if W_E.shape[1] != states.shape[-1]:
            raise InputError("this encoder concatenates its positions (pe_combine='concat'); "
                             "its embedding cannot read a d_model state")
        logits, how = states @ W_E.t(), "embedding (no output head)"
    return LogitLens(logits, ["x0"] + [f"{st.stack}.{l}" for l in range(N)], how)
