"""One sentence and one registry model, ready to run again under hooks (interventions, generation).

The explorer's first page only needs a trace; its newer views run the model again — with a head
switched off, one decoding step at a time — so they need the model itself. `prepare` gives it:
the walkthrough's seed model is rebuilt for the sentence (its vocabulary is the sentence's own
tokens, seed 000 §7.1), every other name comes from the registry, never from a path.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch

from ..errors import InputError
from ..inspect.loader import Subject
from .models import DEFAULT_MODEL, ModelRegistry


@dataclass
class Prepared:
    """A model, the sentence's ids and tokens, and how to run it."""

    subject: Subject
    ids: list[int]
    tokens: list[str]
    float64: bool  # the walkthrough computes in float64, its PE included (walkthrough/build.py)
    vocab: Callable[[int], str] | None = None  # id -> token of the vocabulary the logit lens reads into

    @property
    def model(self) -> torch.nn.Module:
        return self.subject.model

    @property
    def kind(self) -> str:
        return self.subject.kind

    @contextmanager
    def precision(self) -> Iterator[None]:
        before = torch.get_default_dtype()
        if self.float64:
            torch.set_default_dtype(torch.float64)
        try:
            yield
        finally:
            torch.set_default_dtype(before)

    def source(self) -> torch.Tensor:
        return torch.tensor([self.ids])

    def forward(self, tgt: torch.Tensor | None = None) -> torch.Tensor:
        """The model's output for the sentence (and, for a translator, the target prefix `tgt`)."""
        with torch.no_grad(), self.precision():
            if self.kind == "encoder-decoder":
                start = self.model.config.start_id or 0
                return self.model(self.source(), tgt if tgt is not None else torch.tensor([[start]]))
            return self.model(self.source())

    def self_attention(self) -> str:
        """The stack whose self-attention the views show: `enc` or `dec` (decoder-only)."""
        return "dec" if self.kind == "decoder" else "enc"

    def attention_block(self, layer: int) -> str:
        n = self.model.config.dec_layers if self.kind == "decoder" else self.model.config.n_layers
        if not 0 <= layer < n:
            raise InputError(f"layer {layer} does not exist; this model has layers 0..{n - 1}")
        return f"dec.{layer}.self_attn" if self.kind == "decoder" else f"enc.{layer}.attn"


def prepare(registry: ModelRegistry, name: str, sentence: str) -> Prepared:
    """The model called `name` and the sentence's ids; errors are one line (InputError / KeyError)."""
    registry.check(name)
    if name == DEFAULT_MODEL:
        from ..walkthrough.build import seed_model
        model, tokens, ids, vocab, _ = seed_model(sentence, random_embeddings=True)
        model = model.to(torch.float64).eval()
        subject = Subject(DEFAULT_MODEL, model, "encoder", lambda _text: (ids, tokens))
        return Prepared(subject, ids, tokens, float64=True, vocab=vocab.__getitem__)
    subject = registry._subject(name)
    ids, tokens = subject.encode(sentence)
    registry._check_length(len(ids))
    vocab = subject.tgt_tokenizer.id_to_token if subject.tgt_tokenizer is not None else None
    if name == "minilm":  # an encoder: the lens reads into its WordPiece vocabulary (interp/lens.py)
        vocab = _wordpiece_vocab().__getitem__
    return Prepared(subject, ids, tokens, float64=False, vocab=vocab)


@functools.lru_cache(maxsize=1)
def _wordpiece_vocab() -> list[str]:
    """MiniLM's tokens by id: line i of its vocab.txt is token i (BERT's convention)."""
    from ..pretrained import model_dir
    return (model_dir("minilm") / "vocab.txt").read_text(encoding="utf-8").splitlines()
