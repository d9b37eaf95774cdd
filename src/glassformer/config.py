"""Frozen, validated model configuration.

Every hyperparameter the seeds name lives here, with the seed's symbol as the field name
(`d_model`, `n_heads`, `d_k`, `d_ff`). A bad value stops at construction with one line that
names the field and the value (the checks seed 003 §6 makes with asserts, as real errors).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .limits import check_finite


ARCHS = ("encoder", "decoder", "encoder-decoder")
POSITIONAL = ("sinusoidal", "sinusoidal_half", "learned", "relative", "rope", "alibi", "none")
# Encodings added (or concatenated) to the embedding; the others act inside attention.
ABSOLUTE_PE = ("sinusoidal", "sinusoidal_half", "learned")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu", "swiglu", "geglu", "reglu")
# gated FFNs: φ(x·W_G) ⊙ (x·W_1), a third d_model × d_ff matrix (nn/feedforward.py)
GATED = ("swiglu", "geglu", "reglu")
NORMS = ("layernorm", "rmsnorm", "batchnorm", "none")
NORM_POSITIONS = ("post", "pre")
PE_COMBINE = ("add", "concat")
ATTN_IMPLS = ("fast", "math")


def _choice(name: str, value: Any, options: tuple[str, ...]) -> None:
    if value not in options:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(options)}")


def _positive_int(name: str, value: Any, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{name}={value!r} must be a positive integer")


class StrictConfig:
    """(De)serialisation shared by the frozen configs: unknown keys are an error, never ignored."""

    _kind = "config"  # the word in "unknown config key(s)"

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def _reject_unknown(cls, keys) -> None:
        known = {f.name for f in dataclasses.fields(cls)}
        # repr for a key that is not plain text (a newline, a number): the message stays one line
        unknown = sorted(k if isinstance(k, str) and k.isprintable() else repr(k) for k in set(keys) - known)
        if unknown:
            raise ConfigError(f"unknown {cls._kind} key(s): {', '.join(unknown)}"
                              f" (known keys: {', '.join(sorted(known))})")

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        cls._reject_unknown(data)
        return cls(**data)

    def replace(self, **changes: Any):
        self._reject_unknown(changes)
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class ModelConfig(StrictConfig):
    """Hyperparameters of one Transformer (defaults: the 2017 paper's base model, Post-LN)."""

    arch: str = "encoder-decoder"
    vocab_size: int = 1000
    tgt_vocab_size: int | None = None  # encoder-decoder with separate target vocabulary
    d_model: int = 512
    n_heads: int = 8
    d_k: int | None = None  # per-head width; None means d_model // n_heads (§2.2)
    n_layers: int = 6  # encoder layers (or decoder layers for arch="decoder")
    n_dec_layers: int | None = None  # None means n_layers
    d_ff: int = 2048
    activation: str = "relu"
    norm: str = "layernorm"
    norm_eps: float = 1e-5
    norm_position: str = "post"
    final_norm: bool | None = None  # None: True for Pre-LN, False for Post-LN
    embed_norm: bool = False  # LayerNorm right after embedding + position (BERT, BART)
    residual: bool = True
    pe: str = "sinusoidal"
    pe_combine: str = "add"
    d_pos: int | None = None  # width of the concatenated PE (pe_combine="concat")
    max_len: int = 512  # size of a learned position table; sinusoids have no limit
    pe_base: float = 10000.0
    rope_theta: float = 10000.0
    rel_buckets: int = 32
    rel_max_distance: int = 128
    embed_scale: bool = False  # multiply embeddings by sqrt(d_model) (the paper; Marian)
    scale_scores: bool = True  # divide QK^T by sqrt(d_k) (§1.5); T5 does not
    attn_bias: bool = True  # b_Q, b_K, b_V, b_O
    ffn_bias: bool = True  # b_1, b_2
    head_bias: bool = False  # bias on the output projection (Marian/BART final_logits_bias)
    tie_embeddings: bool = True  # output projection shares the token embedding
    share_embeddings: bool = True  # encoder-decoder: source and target embeddings shared
    tied_head_rescale: bool = False  # T5: scale hidden by d_model^-0.5 before a tied head
    dropout: float = 0.0
    attn_dropout: float | None = None  # None means dropout
    attn_impl: str = "fast"
    pad_id: int | None = None
    bos_id: int | None = None
    eos_id: int | None = None
    decoder_start_id: int | None = None  # None means bos_id
    n_segments: int = 0  # BERT token-type embeddings (segment 0 used unless given)

    def __post_init__(self) -> None:
        _choice("arch", self.arch, ARCHS)
        _choice("pe", self.pe, POSITIONAL)
        _choice("activation", self.activation, ACTIVATIONS)
        _choice("norm", self.norm, NORMS)
        _choice("norm_position", self.norm_position, NORM_POSITIONS)
        _choice("pe_combine", self.pe_combine, PE_COMBINE)
        _choice("attn_impl", self.attn_impl, ATTN_IMPLS)
        for name in ("vocab_size", "d_model", "n_heads", "n_layers", "d_ff", "max_len",
                     "rel_buckets", "rel_max_distance"):
            _positive_int(name, getattr(self, name))
        for name in ("tgt_vocab_size", "d_k", "n_dec_layers", "d_pos"):
            _positive_int(name, getattr(self, name), allow_none=True)
        if self.d_k is None and self.d_model % self.n_heads != 0:
            raise ConfigError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}"
                " (set d_k explicitly, or pick n_heads dividing d_model)")
        if isinstance(self.norm_eps, bool) or not (isinstance(self.norm_eps, (int, float)) and 0 < self.norm_eps < 1):
            raise ConfigError(f"norm_eps={self.norm_eps!r} must be a small positive number, e.g. 1e-5")
        for f in dataclasses.fields(self):  # switches are True/False (None where the type allows it)
            v = getattr(self, f.name)
            if f.type in ("bool", "bool | None") and not (isinstance(v, bool) or v is None and f.type != "bool"):
                raise ConfigError(f"{f.name}={v!r} must be True or False")
        for name in ("dropout", "attn_dropout"):
            p = getattr(self, name)
            if (p is not None or name == "dropout") and (isinstance(p, bool) or not (isinstance(p, (int, float)) and 0 <= p < 1)):
                raise ConfigError(f"{name}={p!r} must be in [0, 1)")
        if self.pe_combine == "concat":
            if self.pe not in ABSOLUTE_PE:
                raise ConfigError(f"pe_combine='concat' needs an absolute pe (one of "
                                  f"{', '.join(ABSOLUTE_PE)}), got pe={self.pe!r}")
            if self.d_pos is None or self.d_pos >= self.d_model:
                raise ConfigError(f"pe_combine='concat' needs 0 < d_pos < d_model={self.d_model},"
                                  f" got d_pos={self.d_pos}")
            if self.arch != "encoder" and self.tie_embeddings:
                # the token table is d_model - d_pos wide then, so W_U = W_Eᵀ cannot map d_model to the vocabulary
                raise ConfigError(f"pe_combine='concat' makes the token embedding d_model - d_pos ="
                                  f" {self.d_model - self.d_pos} wide, so the output head cannot be tied to it;"
                                  " set tie_embeddings=False")
        elif self.d_pos is not None:
            raise ConfigError(f"d_pos={self.d_pos} is only used with pe_combine='concat'")
        if self.pe in ("sinusoidal", "sinusoidal_half") and self.pos_width % 2:
            raise ConfigError(f"pe={self.pe!r} needs an even width, got {self.pos_width}")
        if self.pe == "rope" and self.head_dim % 2:
            raise ConfigError(f"pe='rope' needs an even d_k, got d_k={self.head_dim}")
        for name in ("pad_id", "bos_id", "eos_id", "decoder_start_id"):
            tok = getattr(self, name)
            if tok is not None and not (isinstance(tok, int) and 0 <= tok < min(self.vocab_size, self.out_vocab_size)):
                raise ConfigError(f"{name}={tok!r} is outside the vocabulary [0, {self.vocab_size})")
        if self.arch != "encoder-decoder" and self.n_dec_layers not in (None, self.n_layers):
            # a one-stack model has n_layers layers; a second count would be read by some parts and not others
            raise ConfigError(f"n_dec_layers={self.n_dec_layers} (--dec-layers) sets an encoder-decoder's decoder;"
                              f" arch={self.arch!r} has one stack of n_layers={self.n_layers}: give n_layers"
                              f" (--layers {self.n_dec_layers}) instead")
        if self.arch != "encoder-decoder" and self.tgt_vocab_size is not None:
            raise ConfigError(f"tgt_vocab_size={self.tgt_vocab_size} only applies to arch='encoder-decoder'")
        if self.share_embeddings and self.tgt_vocab_size not in (None, self.vocab_size):
            raise ConfigError(f"share_embeddings=True needs tgt_vocab_size == vocab_size={self.vocab_size},"
                              f" got {self.tgt_vocab_size}; set share_embeddings=False")
        for name in ("pe_base", "rope_theta"):  # a zero, negative or NaN base makes every angle NaN
            check_finite(name, getattr(self, name), low=1.0)
        if isinstance(self.n_segments, bool) or not isinstance(self.n_segments, int) or self.n_segments < 0:
            raise ConfigError(f"n_segments={self.n_segments!r} must be a whole number >= 0 (0: no segment embeddings)")

    # ---- derived values (no sentinels in the stored fields) ----
    @property
    def head_dim(self) -> int:
        """d_k: width of one head's Q, K, V (§2.2: d_k = d_model / h by default)."""
        return self.d_k if self.d_k is not None else self.d_model // self.n_heads

    @property
    def pos_width(self) -> int:
        return self.d_pos if self.pe_combine == "concat" else self.d_model

    @property
    def embed_width(self) -> int:
        return self.d_model - self.d_pos if self.pe_combine == "concat" else self.d_model

    @property
    def out_vocab_size(self) -> int:
        return self.tgt_vocab_size or self.vocab_size

    @property
    def dec_layers(self) -> int:
        return self.n_dec_layers if self.n_dec_layers is not None else self.n_layers

    @property
    def use_final_norm(self) -> bool:
        return self.final_norm if self.final_norm is not None else self.norm_position == "pre"

    @property
    def attn_dropout_p(self) -> float:
        return self.dropout if self.attn_dropout is None else self.attn_dropout

    @property
    def start_id(self) -> int | None:
        return self.decoder_start_id if self.decoder_start_id is not None else self.bos_id

    # ---- (de)serialisation (to_dict / from_dict / replace come from StrictConfig) ----
    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)

    @classmethod
    def from_json(cls, text: str) -> "ModelConfig":
        return cls.from_dict(json.loads(text))
