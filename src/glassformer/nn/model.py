"""Encoder, Decoder and the three architectures (the 2017 paper's Figure 1; seed 000 ch. 7).

    ids → embed (+ pos) → x0 → layers → [final norm] → head → logits

- `EncoderModel`: model(ids) → (batch, seq, d_model) final hidden states (BERT-like).
- `DecoderLM`: model(ids) → (batch, seq, vocab) logits (GPT-like, causal).
- `EncoderDecoder`: model(src_ids, tgt_ids) → (batch, tgt_seq, vocab) logits (the paper's translator).
`build_model(config)` picks one from `config.arch`.
"""

from __future__ import annotations

import torch
from torch import nn

from ..config import ModelConfig
from ..trace import HookPoint, run_with_trace
from .attention import KVCache
from .checks import check_ids, check_padding_mask
from .common import affine, masked_value
from .dropout import Dropout
from .embedding import TokenEmbedding
from .layers import DecoderLayer, EncoderLayer
from .loss import fused_applies, linear_cross_entropy, reference_cross_entropy
from .norms import LayerNorm, make_norm
from .positional import ALiBi, LearnedPE, RelativePositionBias, RotaryEmbedding, SinusoidalPE
from .prepared import derived


class Encoder(nn.ModuleList):
    """N identical encoder layers; shape (batch, seq, d_model) in and out (§7.6)."""

    def forward(self, x, bias=None, rope=None, padding_mask=None):
        for layer in self:
            x = layer(x, bias=bias, rope=rope, padding_mask=padding_mask)
        return x


class Decoder(nn.ModuleList):
    """N identical decoder layers, each reading the encoder memory through cross-attention."""

    def forward(self, x, memory=None, self_bias=None, cross_bias=None, rope=None,
                padding_mask=None, cache=None):
        for layer in self:
            x = layer(x, memory, self_bias=self_bias, cross_bias=cross_bias, rope=rope,
                      padding_mask=padding_mask, cache=cache)
        return x


class OutputHead(nn.Module):
    """logits = x · W_U (+ b_U); with tying W_U = W_Eᵀ (the paper §3.4). Hooks `logits`, `probs`."""

    def __init__(self, d_model: int, vocab: int, tied: TokenEmbedding | None, bias: bool, rescale: bool):
        super().__init__()
        self._tied = [tied] if tied is not None else []  # a list: not registered twice
        self.W_U = None if tied is not None else nn.Parameter(torch.randn(d_model, vocab) * d_model ** -0.5)
        self.register_buffer("b_U", torch.zeros(vocab) if bias else None)
        self.rescale = d_model ** -0.5 if rescale else None

    def streamed_W_U(self) -> torch.Tensor:
        """W_U as a contiguous (d_model, vocab) matrix, for cached decoding (nn/decode_step.py).

        With tying, W_U is the transposed view of W_E; a matrix-vector product over that view reads
        memory in the wrong order and ran at ~60% of the streaming rate on the AVX2 machine of
        docs/benchmarks.md, the slowest GEMM of a step. The copy (vocab × d_model floats) is kept
        for a `prepared(model)` scope (one generation, nn/prepared.py), so it costs memory, not
        time per step, and never outlives an update of W_E.
        """
        if not self._tied:
            return self.W_U
        W_E = self._tied[0].W_E
        return derived(self, "W_U", [W_E], lambda: W_E.detach().t().contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.rescale is not None:
            x = x * self.rescale  # T5 scales before its tied head
        W_U = self._tied[0].W_E.t() if self._tied else self.W_U  # tied: a transposed view, no copy
        return affine(x, W_U, self.b_U)


class TransformerBase(nn.Module):
    """What the three architectures share: the input side (embed, pos, x0) and masks."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config

    # ---- the input side: E + PE (§3.2, §3.4, §7.2) ----
    def _make_frontend(self, prefix: str, vocab: int, bidirectional: bool) -> None:
        cfg = self.config
        embed = TokenEmbedding(vocab, cfg.embed_width, cfg.embed_scale, cfg.d_model)
        self.add_module(f"{prefix}embed", embed)
        pos = {
            "sinusoidal": lambda: SinusoidalPE(cfg.pos_width, cfg.pe_base, "interleaved"),
            "sinusoidal_half": lambda: SinusoidalPE(cfg.pos_width, cfg.pe_base, "half"),
            "learned": lambda: LearnedPE(cfg.max_len, cfg.pos_width, std=embed.init_std),  # the tokens' scale
            "relative": lambda: RelativePositionBias(cfg.n_heads, cfg.rel_buckets, cfg.rel_max_distance, bidirectional),
            "alibi": lambda: ALiBi(cfg.n_heads),
            "rope": lambda: RotaryEmbedding(cfg.head_dim, cfg.rope_theta),
            "none": lambda: None,
        }[cfg.pe]()
        if pos is not None:
            self.add_module(f"{prefix}pos", pos)
        if cfg.n_segments and not prefix:
            self.segment = TokenEmbedding(cfg.n_segments, cfg.d_model)
        if cfg.embed_norm:
            self.add_module(f"{prefix}embed_norm", LayerNorm(cfg.d_model, cfg.norm_eps))
        self.add_module(f"{prefix}x0", HookPoint())
        self.drop = Dropout(cfg.dropout)

    def _embed(self, prefix: str, ids: torch.Tensor, positions: torch.Tensor,
               segment_ids: torch.Tensor | None = None) -> torch.Tensor:
        x = getattr(self, f"{prefix}embed")(ids)
        pos = getattr(self, f"{prefix}pos", None)
        if pos is not None and pos.absolute:
            pe = pos(positions).expand(ids.shape[0], -1, -1)
            x = x + pe if self.config.pe_combine == "add" else torch.cat([x, pe], dim=-1)
        if getattr(self, "segment", None) is not None and not prefix:
            x = x + self.segment(segment_ids if segment_ids is not None else torch.zeros_like(ids))
        norm = getattr(self, f"{prefix}embed_norm", None)
        if norm is not None:
            x = norm(x)
        return getattr(self, f"{prefix}x0")(self.drop(x))

    def _position_terms(self, prefix: str, q_pos: torch.Tensor, k_pos: torch.Tensor):
        """(score bias or None, rope tuple or None) for relative/ALiBi/RoPE encodings (§3.5)."""
        pos = getattr(self, f"{prefix}pos", None)
        if pos is None or pos.absolute:
            return None, None
        if isinstance(pos, RotaryEmbedding):
            return None, pos(q_pos)  # new keys sit at the query positions; cached keys are rotated already
        return pos(q_pos, k_pos), None

    @staticmethod
    def _positions(ids: torch.Tensor, padding_mask: torch.Tensor | None, start=None) -> torch.Tensor:
        """Absolute positions (batch|1, seq): padding does not count, so a padded batch equals each row alone."""
        seq = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
        if start is not None:
            return start.unsqueeze(1) + seq
        if padding_mask is None:
            return seq
        return ((~padding_mask).long().cumsum(1) - 1).clamp(min=0)

    @staticmethod
    def _mask_bias(pos_bias: torch.Tensor | None, key_padding: torch.Tensor | None,
                   dtype: torch.dtype) -> torch.Tensor | None:
        """Additive attention bias: position bias, with padded keys set to the most negative number."""
        if key_padding is None:
            return None if pos_bias is None else pos_bias.to(dtype)
        base = torch.zeros((), dtype=dtype) if pos_bias is None else pos_bias.to(dtype)
        return torch.where(key_padding[:, None, None, :], torch.tensor(masked_value(dtype), dtype=dtype), base)

    def _padding(self, ids: torch.Tensor, padding_mask: torch.Tensor | None, name: str) -> torch.Tensor | None:
        if padding_mask is not None:
            return check_padding_mask(padding_mask, ids, name)
        if self.config.pad_id is not None:
            pad = ids == self.config.pad_id
            return pad if bool(pad.any()) else None
        return None

    # ---- the encoder stack (Figure 1, left) ----
    def _make_encoder(self) -> None:
        cfg = self.config
        self.enc = Encoder(EncoderLayer(cfg, i) for i in range(cfg.n_layers))
        if cfg.use_final_norm:
            self.enc_norm = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps)

    def _run_encoder(self, ids: torch.Tensor, padding_mask: torch.Tensor | None, mask_name: str,
                     segment_ids: torch.Tensor | None = None):
        """Final encoder states (batch, seq, d_model) and the padding mask actually used."""
        pad = self._padding(ids, padding_mask, mask_name)
        positions = self._positions(ids, pad)
        x = self._embed("", ids, positions, segment_ids)
        pos_bias, rope = self._position_terms("", positions, positions)
        x = self.enc(x, bias=self._mask_bias(pos_bias, pad, x.dtype), rope=rope, padding_mask=pad)
        norm = getattr(self, "enc_norm", None)
        return (norm(x, pad) if norm is not None else x), pad

    # ---- conveniences ----
    def run_with_trace(self, *args, names=None, **kwargs):
        """`(output, Trace)`: every hook point's value in forward order (see `glassformer.trace`)."""
        return run_with_trace(self, *args, names=names, **kwargs)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())


class EncoderModel(TransformerBase):
    """Encoder only: model(ids) → final hidden states (batch, seq, d_model)."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self._make_frontend("", config.vocab_size, bidirectional=True)
        self._make_encoder()

    def forward(self, ids: torch.Tensor, padding_mask: torch.Tensor | None = None,
                segment_ids: torch.Tensor | None = None) -> torch.Tensor:
        check_ids(ids, self.config.vocab_size, "ids")
        return self._run_encoder(ids, padding_mask, "padding_mask", segment_ids)[0]


class _Decoding(TransformerBase):
    """Shared by the two models that predict tokens: the decoder stack and the output head."""

    def _make_decoder(self, prefix: str, vocab: int, cross: bool) -> None:
        cfg = self.config
        self.dec = Decoder(DecoderLayer(cfg, i, cross=cross) for i in range(cfg.dec_layers))
        if cfg.use_final_norm:
            self.dec_norm = make_norm(cfg.norm, cfg.d_model, cfg.norm_eps)
        tied = getattr(self, f"{prefix}embed") if cfg.tie_embeddings else None
        self.head = OutputHead(cfg.d_model, vocab, tied, cfg.head_bias, cfg.tied_head_rescale and cfg.tie_embeddings)
        self.logits, self.probs = HookPoint(), HookPoint()

    def _run_decoder(self, prefix: str, ids, pad, memory=None, cross_bias=None, cache: KVCache | None = None,
                     loss: dict | None = None):
        q_pad = pad  # padding of the new positions (the queries)
        if cache is None:
            positions = self._positions(ids, pad)
            k_positions = positions
        else:
            pad = _extend_cache_padding(cache, ids, pad)  # keys: cached + new
            if cache.length == 0:
                positions = self._positions(ids, q_pad).expand(ids.shape[0], -1)
            else:
                positions = self._positions(ids, None, start=cache.next_pos)
            k_positions = cache.extend("positions", positions)
        x = self._embed(prefix, ids, positions)
        pos_bias, rope = self._position_terms(prefix, positions, k_positions)
        self_bias = self._mask_bias(pos_bias, pad, x.dtype)
        x = self.dec(x, memory, self_bias=self_bias, cross_bias=cross_bias, rope=rope,
                     padding_mask=q_pad, cache=cache)
        if cache is not None:
            cache.length += ids.shape[1]
            cache.next_pos = positions[:, -1] + 1
        norm = getattr(self, "dec_norm", None)
        if norm is not None:
            x = norm(x, q_pad)
        if loss is not None and self._fuses_loss(x, **loss):
            return self._fused_loss(x, **loss)
        logits = self.logits(self.head(x))
        if self.probs._forward_hooks:  # only when someone looks: softmax over the vocabulary
            self.probs(torch.softmax(logits.float(), dim=-1))
        if loss is not None:  # the seed's loss over the logits (something hooks them, or autocast)
            return reference_cross_entropy(logits, loss["targets"], loss["ignore_index"], loss["label_smoothing"],
                                           loss["reduction"])
        return logits

    def _fuses_loss(self, x: torch.Tensor, targets, reduction: str, **_) -> bool:
        """Whether the loss may skip the logits (nn/loss.py): nothing hooks the head or its values, so
        a trace sees the same values with or without targets, and the fused path computes the same."""
        if not isinstance(targets, torch.Tensor) or targets.shape != x.shape[:-1]:
            from ..errors import InputError
            shape = tuple(targets.shape) if isinstance(targets, torch.Tensor) else type(targets).__name__
            raise InputError(f"targets must be a tensor of ids shaped like the decoder's input "
                             f"{tuple(x.shape[:-1])}, got {shape}")
        head = self.head
        hooked = self.logits.hooked or self.probs.hooked or head._forward_hooks or head._forward_pre_hooks
        return not hooked and fused_applies(x, head.b_U, reduction)

    def _fused_loss(self, x: torch.Tensor, targets: torch.Tensor, ignore_index: int, label_smoothing: float,
                    reduction: str) -> torch.Tensor:
        """Cross-entropy of the head's softmax against `targets`, the head fused into it."""
        head = self.head
        if head.rescale is not None:
            x = x * head.rescale
        W = head._tied[0].W_E if head._tied else head.W_U.t()  # (vocab, d_model), no copy
        return linear_cross_entropy(x, W, head.b_U, targets, ignore_index, label_smoothing, reduction)

    def generate(self, *args, **kwargs):
        """Greedy by default; beam search and sampling too (see `glassformer.generate`)."""
        from ..generate import generate
        return generate(self, *args, **kwargs)

    def new_cache(self, capacity: int = 256) -> KVCache:
        return KVCache(capacity)


def _loss_args(targets, ignore_index: int, label_smoothing: float, reduction: str) -> dict | None:
    if targets is None:
        return None
    return {"targets": targets, "ignore_index": ignore_index, "label_smoothing": label_smoothing,
            "reduction": reduction}


def _extend_cache_padding(cache: KVCache, ids: torch.Tensor, pad: torch.Tensor | None) -> torch.Tensor | None:
    """The key-padding mask over cached + new positions (new decode steps are never padding)."""
    if cache.padding_mask is None and pad is None:
        return None
    new = pad if pad is not None else torch.zeros(ids.shape, dtype=torch.bool, device=ids.device)
    return cache.extend("padding_mask", new)


class DecoderLM(_Decoding):
    """Decoder only (GPT-like): model(ids) → next-token logits (batch, seq, vocab), causal."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self._make_frontend("", config.vocab_size, bidirectional=False)
        self._make_decoder("", config.vocab_size, cross=False)

    def forward(self, ids: torch.Tensor, padding_mask: torch.Tensor | None = None,
                cache: KVCache | None = None, targets: torch.Tensor | None = None, ignore_index: int = -100,
                label_smoothing: float = 0.0, reduction: str = "mean") -> torch.Tensor:
        """Logits; or, given `targets` (batch, seq), the cross-entropy loss (`F.cross_entropy`'s
        arguments and meaning) with the head fused into it (nn/loss.py)."""
        check_ids(ids, self.config.vocab_size, "ids")
        pad = self._padding(ids, padding_mask, "padding_mask")
        return self._run_decoder("", ids, pad, cache=cache, loss=_loss_args(targets, ignore_index, label_smoothing,
                                                                           reduction))


class EncoderDecoder(_Decoding):
    """The 2017 translator: model(src_ids, tgt_ids) → (batch, tgt_seq, tgt_vocab) logits."""

    def __init__(self, config: ModelConfig):
        super().__init__(config)
        self._make_frontend("", config.vocab_size, bidirectional=True)
        self._make_encoder()
        self._make_frontend("dec_", config.out_vocab_size, bidirectional=False)
        if config.share_embeddings:
            self.dec_embed.W_E = self.embed.W_E  # one table for both languages (Marian, BART, T5)
        self._make_decoder("dec_", config.out_vocab_size, cross=True)

    def encode(self, src_ids: torch.Tensor, src_padding_mask: torch.Tensor | None = None):
        """Encoder memory (batch, src_seq, d_model) and the source padding mask actually used."""
        check_ids(src_ids, self.config.vocab_size, "src_ids")
        return self._run_encoder(src_ids, src_padding_mask, "src_padding_mask")

    def decode(self, tgt_ids: torch.Tensor, memory: torch.Tensor, src_padding_mask: torch.Tensor | None = None,
               tgt_padding_mask: torch.Tensor | None = None, cache: KVCache | None = None,
               loss: dict | None = None) -> torch.Tensor:
        check_ids(tgt_ids, self.config.out_vocab_size, "tgt_ids")
        if tgt_ids.shape[0] != memory.shape[0]:
            from ..errors import InputError
            raise InputError(f"source batch size {memory.shape[0]} and target batch size "
                             f"{tgt_ids.shape[0]} differ; pass one target row per source row")
        pad = self._padding(tgt_ids, tgt_padding_mask, "tgt_padding_mask")
        cfg = self.config
        if (tgt_padding_mask is None and pad is not None and cfg.pad_id == cfg.start_id
                and (cache is None or cache.length == 0)):
            # Marian and T5 start decoding with the pad token: that first token is not padding
            pad = pad.clone()
            pad[:, 0] = False
            pad = pad if bool(pad.any()) else None
        cross_bias = self._mask_bias(None, src_padding_mask, memory.dtype)
        return self._run_decoder("dec_", tgt_ids, pad, memory=memory, cross_bias=cross_bias, cache=cache, loss=loss)

    def forward(self, src_ids: torch.Tensor, tgt_ids: torch.Tensor,
                src_padding_mask: torch.Tensor | None = None, tgt_padding_mask: torch.Tensor | None = None,
                cache: KVCache | None = None, targets: torch.Tensor | None = None, ignore_index: int = -100,
                label_smoothing: float = 0.0, reduction: str = "mean") -> torch.Tensor:
        """Logits; or, given `targets` (batch, tgt_seq), the cross-entropy loss (see DecoderLM)."""
        check_ids(src_ids, self.config.vocab_size, "src_ids")
        check_ids(tgt_ids, self.config.out_vocab_size, "tgt_ids")
        if src_ids.shape[0] != tgt_ids.shape[0]:
            from ..errors import InputError
            raise InputError(f"src_ids has batch size {src_ids.shape[0]} but tgt_ids has "
                             f"{tgt_ids.shape[0]}; they must match")
        memory, src_pad = self.encode(src_ids, src_padding_mask)
        return self.decode(tgt_ids, memory, src_pad, tgt_padding_mask, cache,
                           _loss_args(targets, ignore_index, label_smoothing, reduction))


def build_model(config: ModelConfig) -> TransformerBase:
    """The architecture named by `config.arch`, built from the config's hyperparameters."""
    if not isinstance(config, ModelConfig):
        from ..errors import InputError
        raise InputError(f"build_model takes a ModelConfig, got {type(config).__name__}; "
                         "build one with ModelConfig(**fields) or ModelConfig.from_dict(d)")
    from ..limits import check_model_fits
    check_model_fits(config)  # a clear line instead of the allocator's error, before allocating
    return {"encoder": EncoderModel, "decoder": DecoderLM, "encoder-decoder": EncoderDecoder}[config.arch](config)
