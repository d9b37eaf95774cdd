"""One cached decoding step with its weights prepared once (issues 11 and 29; seed 000 §8).

With the KV cache a step turns one new token per row into next-token logits: at batch 1 it reads
every weight once and does little else, so its time is bounded by how fast the machine streams the
weights (`bench/harness.weight_stream`). The module path computes the same step through ~100 module
calls, hook points and checks per token: Python work that costs as much as a layer's GEMMs on a
small model. `DecodeStep` does the same arithmetic with none of it:

- weights prepared once per generation, inside its `prepared` scope (nn/prepared.py: no copy
  outlives the generation, so none can be older than the weights): the fused W_QKV (d_model, 3·H·d_k)
  that the module path uses, and the seed's W_O, W_1, W_2, W_U as stored — (in, out) row-major,
  the layout the BLAS matrix-vector product streams; a tied W_U = W_Eᵀ is copied into that layout once
  (`OutputHead.streamed_W_U`), since the transposed view streams at ~60% of the rate;
- per layer ONE fused QKV GEMM (K and V written straight into the cache, no copy of Q) and ONE FFN
  pass (W_1, φ in place, W_2; a gated FFN's [W_G | W_1] as one GEMM), into buffers allocated once
  per batch size: on the BLAS route the GEMMs allocate nothing per step;
- each GEMM takes the route this machine measured for its shape class — BLAS, oneDNN, or oneDNN
  over a contiguous (out, in) copy of W (`nn/decode_gemm.py`) — resolved on the first step and kept,
  so the step has the module path's numbers (to float32 rounding) on every route;
- no work that grows with the cache in Python: the cached keys are a slice of a preallocated buffer;
- where glassformer's kernels are built (nn/gemv.py): on the GEMV route each sublayer's last product
  also does its Add and, Post-LN, its LayerNorm, and W_1's applies φ (`decode_gemm.product`); and
  attention is `attend`, which writes the step's key and value into the cache and reads it in place
  (`OWN_ATTENTION`; torch's SDPA otherwise);
- every position scheme through its own module, once per step for all layers: absolute encodings
  added to the embedding, RoPE rotating the new query and key, ALiBi and T5's relative buckets as
  the scores' bias; a left-padded prompt's padding (the prompt itself runs the module path) masked
  in that bias as the module path masks it.

Encoder-decoder models (the translator of Figure 1; issue 29) take the same step with the
cross-attention sublayer between self-attention and the FFN (§7.5):

- the encoder memory's keys and values for every decoder layer come from one batched product per
  layer and projection over the seed's per-head W_K, W_V (no copy of the weights), once per source,
  at the first step — which the prepared step takes too (the start token, position 0); low-precision
  weights take ONE GEMM with all layers' [W_K | W_V] side by side, quantised once per generation;
- beam search keeps one copy of them per source, not per beam: the K beams of a source are K queries
  of one attention over its memory (beam search only ever reorders rows within a source's group, so
  nothing of the memory is reordered); the self-attention cache is reordered in place
  (`KVCache.reorder`);
- the source padding mask is the module path's additive bias (masked keys at the most negative number).

It runs only where it computes exactly what the module path computes (`supports`, `applies`): eval
mode, no hooks anywhere (tracing takes the reference path), the fast attention, a position encoding
added (not concatenated) to the embedding, no segment embedding, and no pad id among a step's new
tokens except in finished rows. Everything else takes the module path. tests/test_decode_step.py
holds it to the explicit-math model (float32 rounding) and to HF GPT-2 and LLaMA (tokens);
tests/test_decode_step_seq2seq.py to the explicit-math model and to HF Marian, BART and T5.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
import torch.nn.modules.module as _module_hooks
from torch import nn

from .attention import KVCache
from . import gemv as own_kernels
from .decode_gemm import gemm as _gemm, last_level_cache_bytes, product
from .embedding import TokenEmbedding
from .norms import LayerNorm
from .positional import RotaryEmbedding, apply_rotary
from .precision import LowPrecisionGemm
from .prepared import derived

# φ applied in place on the FFN buffer (no allocation); gated FFNs are not prepared. The bound
# kernels themselves (torch._C._nn.gelu_), not torch.ops.aten.gelu_: that call resolves its
# overload in Python each time, ~10 µs of a step that does 6 of them per token.
_gelu_ = getattr(torch._C._nn, "gelu_", None) or torch.ops.aten.gelu_
_IN_PLACE = {"relu": torch.relu_, "gelu": _gelu_,
             "gelu_tanh": lambda t: _gelu_(t, approximate="tanh"), "silu": lambda t: F.silu(t, inplace=True)}
# gated FFNs: φ on the gate branch (nn/feedforward.py's ACTIVATION_FNS), the same kernels in place
_IN_PLACE.update(swiglu=_IN_PLACE["silu"], geglu=_IN_PLACE["gelu_tanh"], reglu=_IN_PLACE["relu"])


# attention by glassformer's own kernel (nn/attend.cpp) where it was built: the scores, softmax and
# weighted sum of V for a step's few queries, reading the cache in place; False: torch's SDPA (A/B)
OWN_ATTENTION = True


def _hooked(model: nn.Module) -> bool:
    if (_module_hooks._global_forward_hooks or _module_hooks._global_forward_pre_hooks):
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in model.modules())


def supports(model: nn.Module, cache: KVCache | None) -> bool:
    """Whether `DecodeStep` computes exactly what the module path would, step after step."""
    from .model import DecoderLM, EncoderDecoder
    cfg = getattr(model, "config", None)
    if not isinstance(model, (DecoderLM, EncoderDecoder)) or cache is None or model.training:
        return False
    return (cfg.attn_impl == "fast" and cfg.activation in _IN_PLACE and cfg.pe_combine == "add"
            and getattr(model, "segment", None) is None and not _hooked(model))


class _Norm:
    """The norm as one call: LayerNorm straight to its kernel with its own gamma, beta and eps (the
    module's forward is that same call behind two Python frames, ~15 µs of 13 per token); any other
    norm through its forward, without hook machinery. `ln`: a LayerNorm's (gamma, beta, eps), which
    the GEMV kernel's epilogue can apply itself (decode_gemm.product); None for any other norm."""

    __slots__ = ("forward", "ln")

    def __init__(self, norm: nn.Module):
        if type(norm) is LayerNorm:
            shape, gamma, beta, eps = (norm.gamma.shape[0],), norm.gamma, norm.beta, norm.eps
            self.ln = (gamma, beta, eps)
            self.forward = lambda x: torch.layer_norm(x, shape, gamma, beta, eps)
        else:
            self.ln, self.forward = None, norm.forward

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x)


class _Layer:
    """One decoder layer's prepared weights, and its norms as single calls (`_Norm`)."""

    def __init__(self, layer, streams: bool, precision: str, steps: int | None):
        attn, ffn = layer.self_attn, layer.ffn
        gemm = lambda W, b, owner, name: _gemm(W, b, owner, name, streams, precision, steps)  # noqa: E731
        self.index, self.n_heads, self.d_k, self.scale = attn.layer_index, attn.n_heads, attn.d_k, attn.scale
        self.pre_ln, self.residual = layer.pre_ln, layer.residual
        self.qkv = gemm(*attn._fused("QKV"), attn, "QKV")  # (d_model, 3·H·d_k): Q, K, V
        self.W_O = gemm(attn.W_O, attn.b_O, attn, "O")
        self.gated = ffn.gated
        # a gated FFN's two input projections as one GEMM: [W_G | W_1] (d_model, 2·d_ff)
        if ffn.gated:
            self.W_1 = gemm(*_gate_W_1(ffn), ffn, "G1")
        else:
            self.W_1 = gemm(ffn.W_1, ffn.b_1, ffn, "1")
        self.W_2 = gemm(ffn.W_2, ffn.b_2, ffn, "2")
        self.act, self.phi = ffn.activation, _IN_PLACE[ffn.activation]
        self.norm_self = _Norm(layer.norm1)
        self.cross = getattr(layer, "has_cross", False)
        if self.cross:  # norm2 wraps cross-attention, norm3 the FFN (nn/layers.py)
            cross = layer.cross_attn
            self.cross_scale = cross.scale
            self.cross_W_Q = gemm(*cross._fused("Q"), cross, "Q")
            self.cross_W_O = gemm(cross.W_O, cross.b_O, cross, "O")
            self.norm_cross, self.norm_ffn = _Norm(layer.norm2), _Norm(layer.norm3)
        else:
            self.norm_ffn = _Norm(layer.norm2)


def _gate_W_1(ffn: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """A gated FFN's [W_G | W_1] and [b_G | b_1] side by side, a `derived` copy like W_QKV."""
    def build():
        with torch.no_grad():
            b = None if ffn.b_1 is None else torch.cat([ffn.b_G, ffn.b_1])
            return torch.cat([ffn.W_G, ffn.W_1], dim=1), b
    return derived(ffn, "W_G1", [ffn.W_G, ffn.W_1, ffn.b_G, ffn.b_1], build)


def _cross_W_KV(dec: nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Every decoder layer's cross-attention [W_K | W_V] side by side, (d_model, L·2·H·d_k), and its
    bias: one low-precision GEMM turns the encoder memory into all layers' keys and values. A `derived` copy, kept
    for the generation's `prepared` scope and built again from the weights as they are in the next."""
    attns = [layer.cross_attn for layer in dec]
    sources = [t for a in attns for t in (a.W_K, a.W_V, a.b_K, a.b_V)]

    def build():
        with torch.no_grad():
            parts = [a._build_fused([a.W_K, a.W_V], [a.b_K, a.b_V]) for a in attns]
            b = None if parts[0][1] is None else torch.cat([p[1] for p in parts])
            return torch.cat([p[0] for p in parts], dim=1), b
    return derived(dec, "cross W_KV", sources, build)


class _Memory:
    """The encoder memory as every decoder layer's cross-attention reads it: keys and values
    (source, head, src_seq, d_k) per layer, one copy per source, and the source padding as the
    module path's additive bias (source, 1, 1, src_seq)."""

    def __init__(self, model: nn.Module, memory: torch.Tensor, src_pad: torch.Tensor | None, group: int,
                 precision: str):
        # beam search repeats each source `group` times (rows b·K … b·K+K−1, all equal): keep one
        memory = memory[::group]
        src_pad = None if src_pad is None else src_pad[::group]
        sources, src_len, d_model = memory.shape
        x2 = memory.reshape(sources * src_len, d_model)
        if precision == "fp32":
            self.kv = [(self._per_head(x2, a.W_K, a.b_K, sources), self._per_head(x2, a.W_V, a.b_V, sources))
                       for a in (layer.cross_attn for layer in model.dec)]
        else:  # low-precision weights: one GEMM with every layer's [W_K | W_V], quantised once
            cfg = model.config
            W, b = _cross_W_KV(model.dec)
            kv = LowPrecisionGemm(W, b, model.dec, "cross W_KV", precision)(x2)  # (source·src_seq, L·2·H·d_k)
            kv = kv.view(sources, src_len, cfg.dec_layers, 2, cfg.n_heads, cfg.head_dim)
            # (layer, K|V, source, head, src_seq, d_k): each head's keys contiguous, as attention reads them
            kv = kv.permute(2, 3, 0, 4, 1, 5).contiguous()
            self.kv = [(layer[0], layer[1]) for layer in kv]
        self.bias = model._mask_bias(None, src_pad, memory.dtype)
        self.sources = sources

    @staticmethod
    def _per_head(x2: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None, sources: int) -> torch.Tensor:
        """x·W_h + b_h for every head h straight from the seed's per-head W (head, d_model, d_k): one
        batched product, no copy of W. (A fused [W_K | W_V] of all layers made one GEMM, but its copy,
        rebuilt every generation, cost more than the product: ~6 ms of a 48-token translation.)"""
        H = W.shape[0]
        x3 = x2.expand(H, *x2.shape)  # the same rows for every head (a view)
        kv = torch.bmm(x3, W) if b is None else torch.baddbmm(b.unsqueeze(1), x3, W)  # (head, source·src_seq, d_k)
        return kv.view(H, sources, -1, W.shape[2]).transpose(0, 1).contiguous()  # (source, head, src_seq, d_k)


class DecodeStep:
    """logits (batch, vocab) of one new token per row, given the cache of everything before it.

    For an encoder-decoder model, `memory` and `src_pad` are what `model.encode` returned (repeated
    `group` times per source for beam search). `steps`: the most steps this generation takes (None:
    unbounded), over which a GEMM route's copy of W must pay for itself (nn/decode_gemm.py)."""

    def __init__(self, model: nn.Module, memory: torch.Tensor | None = None, src_pad: torch.Tensor | None = None,
                 group: int = 1, precision: str = "fp32", steps: int | None = None):
        self.model, self.precision = model, precision
        # the weights a step reads (not the encoder's): whether they outgrow the last-level cache
        encoder = {id(p) for p in model.enc.parameters()} if memory is not None else set()
        read = sum(p.numel() for p in model.parameters() if id(p) not in encoder)
        streams = 4 * read > last_level_cache_bytes()
        self.layers = [_Layer(layer, streams, precision, steps) for layer in model.dec]
        self.final_norm = _Norm(model.dec_norm) if hasattr(model, "dec_norm") else None
        head = model.head
        self.rescale = head.rescale
        self.head = _gemm(head.streamed_W_U(), head.b_U, head, "U", streams, precision, steps)  # (d_model, vocab)
        side = "dec_" if memory is not None else ""  # the decoder's own input side (nn/model.py)
        self.embed = getattr(model, f"{side}embed")
        pos, embed_norm = getattr(model, f"{side}pos", None), getattr(model, f"{side}embed_norm", None)
        # the position scheme (§3.5): added to the embedding (absolute), rotating Q and K (RoPE),
        # or a bias on the scores (T5's relative buckets, ALiBi) — each through its own module
        kind = None if pos is None else "absolute" if pos.absolute else "rope" if isinstance(pos, RotaryEmbedding) \
            else "bias"
        self.pos = {kind: pos.forward} if pos is not None else {}
        # an absolute encoding's rows for positions 0 … capacity−1, computed by its module at the first
        # step and read by index after: the sinusoids cost ~10 operators a step (float64 angles, sin,
        # cos, cat). Made inside the generation, like the memory's keys; a learned table is read as is.
        self._pe_table: torch.Tensor | None = None
        self.embed_norm = _Norm(embed_norm) if embed_norm is not None else None
        # the memory's keys and values are made at the first step: inside the generation's
        # inference mode and `prepared` scope, like every other prepared tensor
        self._source = None if memory is None else (memory, src_pad, group)
        self.memory: _Memory | None = None
        self._bufs: dict[int, dict[str, torch.Tensor]] = {}

    def _buffers(self, batch: int, like: torch.Tensor) -> dict[str, torch.Tensor]:
        """Every GEMM's output for this batch size, allocated once."""
        bufs = self._bufs.get(batch)
        if bufs is None:
            first, cfg = self.layers[0], self.model.config
            new = lambda n: like.new_empty(batch, n)  # noqa: E731
            bufs = {"qkv": new(3 * first.n_heads * first.d_k), "o": new(cfg.d_model), "ff": new(cfg.d_ff),
                    "ff_out": new(cfg.d_model)}
            if first.cross:
                bufs.update(q=new(first.n_heads * first.d_k), cross_o=new(cfg.d_model))
            if first.gated:
                bufs["gate_ff"] = new(2 * cfg.d_ff)
            # the heads as attention reads them, viewed once: valid while a GEMM writes into its buffer
            H, d_k = first.n_heads, first.d_k
            q, kv = bufs["qkv"].view(batch, 3, H, 1, d_k).split([1, 2], dim=1)
            bufs["q_heads"], bufs["kv_heads"] = q.squeeze(1), kv  # (batch, head, 1, d_k), (batch, 2, head, 1, d_k)
            bufs["k_new"], bufs["v_new"] = kv.unbind(1)  # each (batch, head, 1, d_k)
            if first.cross:
                sources = self.memory.sources
                bufs["cross_q_heads"] = bufs["q"].view(sources, batch // sources, H, d_k).transpose(1, 2)
            self._bufs[batch] = bufs
        return bufs

    def _start(self, cache: KVCache, like: torch.Tensor) -> None:
        """An empty cache (an encoder-decoder's first step, the start token): its buffers, position 0."""
        batch = like.shape[0]
        for layer in self.layers:
            cache.allocate(layer.index, like.new_empty(batch, layer.n_heads, 0, layer.d_k), max(cache.capacity, 1))
        cache.next_pos = torch.zeros(batch, dtype=torch.long, device=like.device)

    def __call__(self, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """ids (batch,) the newest token of every row; the cache is advanced by one position."""
        if self.memory is None and self._source is not None:
            self.memory = _Memory(self.model, *self._source, self.precision)
        x = self._embed(ids)  # (batch, d_model): one row per sequence, the GEMV's vector
        if cache.length == 0:
            self._start(cache, x)
        positions = cache.next_pos.unsqueeze(1)  # (batch, 1)
        pos = self.pos
        if "absolute" in pos:
            x = x + self._absolute(cache, positions)
        if self.embed_norm is not None:
            x = self.embed_norm(x.unsqueeze(1)).squeeze(1)  # the norm sees the module path's shape
        bufs = self._buffers(x.shape[0], x)
        length = cache.length
        k_positions = cache.extend("positions", positions)  # (batch, length + 1): the keys'
        bias = self._bias(pos, positions, k_positions, cache, x)
        rope = pos["rope"](positions) if "rope" in pos else None
        self._own = OWN_ATTENTION and own_kernels.attention_usable(x)
        for layer in self.layers:
            x = self._layer(layer, x, cache, length, bufs, bias, rope)
        cache.length = length + 1
        cache.next_pos = cache.next_pos + 1
        if self.final_norm is not None:
            x = self.final_norm(x)
        if self.rescale is not None:
            x = x * self.rescale
        return self.head(x, None)  # the caller keeps the logits: a new tensor every step

    def _embed(self, ids: torch.Tensor) -> torch.Tensor:
        """E = W_E[ids] (× scale) as the module computes it, in one indexing call (Python's W_E[ids]
        goes through the advanced-index machinery: ~20 µs a step); other embeddings through forward."""
        embed = self.embed
        if type(embed) is not TokenEmbedding:
            return embed(ids.unsqueeze(1)).squeeze(1)
        e = embed.W_E.index_select(0, ids)
        return e.mul_(embed.scale) if embed.scale != 1.0 else e

    def _absolute(self, cache: KVCache, positions: torch.Tensor) -> torch.Tensor:
        """The absolute encoding (batch, d_model) of every row's new position, from `_pe_table`.
        Positions never pass the cache's length (padding does not count), hence the table's size."""
        table, pe = self._pe_table, self.pos["absolute"]
        if table is None:
            rows = cache.self_kv[self.layers[0].index][0].shape[2]  # the cache's capacity
            rows = min(rows, getattr(pe.__self__, "max_len", rows))  # a learned table's own length
            table = self._pe_table = pe(torch.arange(rows, device=positions.device).unsqueeze(0))[0]
        if cache.length >= table.shape[0]:  # past a learned table: its module says so
            return pe(positions).squeeze(1)
        return table.index_select(0, cache.next_pos)

    def _bias(self, pos: dict, positions: torch.Tensor, k_positions: torch.Tensor, cache: KVCache,
              like: torch.Tensor) -> torch.Tensor | None:
        """The self-attention scores' additive bias (batch, head|1, 1, length + 1), as the module path
        builds it (nn/model.py `_mask_bias`): the position bias, and padded keys — a left-padded
        prompt's — at the most negative number; None where there is neither."""
        pos_bias = pos["bias"](positions, k_positions) if "bias" in pos else None
        key_pad = None
        if cache.padding_mask is not None:  # new positions are never padding (`applies`)
            key_pad = cache.extend("padding_mask", torch.zeros_like(positions, dtype=torch.bool))
        if pos_bias is None and key_pad is None:
            return None
        return self.model._mask_bias(pos_bias, key_pad, like.dtype)

    def _layer(self, layer: _Layer, x: torch.Tensor, cache: KVCache, length: int, bufs: dict,
               bias: torch.Tensor | None, rope: tuple | None) -> torch.Tensor:
        """Masked self-attention → Add & Norm → [cross-attention → Add & Norm] → FFN → Add & Norm
        (§4, §7.5), Pre- or Post-LN."""
        # each sublayer's last product adds the residual x (its Add) and, Post-LN, applies the Norm
        # after it (`product`); Pre-LN normalises the sublayer's input instead
        pre = layer.pre_ln
        h = layer.norm_self(x) if pre else x
        x = self._attend(layer, h, cache, length, bufs, bias, rope, self._skip(layer, x),
                         None if pre else layer.norm_self)
        if layer.cross:
            h = layer.norm_cross(x) if pre else x
            x = self._attend_memory(layer, h, bufs, self._skip(layer, x), None if pre else layer.norm_cross)
        h = layer.norm_ffn(x) if pre else x
        return self._ffn(layer, h, bufs, self._skip(layer, x), None if pre else layer.norm_ffn)

    @staticmethod
    def _ffn(layer: _Layer, h: torch.Tensor, bufs: dict, residual: torch.Tensor | None, norm) -> torch.Tensor:
        """φ(h·W_1 + b_1)·W_2 + b_2 (+ the residual, then `norm`) in one pass (§6); gated:
        φ(h·W_G + b_G) ⊙ (h·W_1 + b_1) first."""
        if not layer.gated:
            hidden = product(layer.W_1, h, bufs["ff"], layer.act, layer.phi)
            return product(layer.W_2, hidden, bufs["ff_out"], residual=residual, norm=norm)
        gate, pre = layer.W_1(h, bufs["gate_ff"]).chunk(2, dim=1)
        return product(layer.W_2, torch.mul(layer.phi(gate), pre, out=bufs["ff"]), bufs["ff_out"],
                       residual=residual, norm=norm)

    @staticmethod
    def _skip(layer: _Layer, x: torch.Tensor) -> torch.Tensor | None:
        """The residual connection's x (§4.1), or None in a model built without it."""
        return x if layer.residual else None

    def _attend(self, layer: _Layer, h: torch.Tensor, cache: KVCache, length: int, bufs: dict,
                bias: torch.Tensor | None, rope: tuple | None, residual: torch.Tensor | None, norm) -> torch.Tensor:
        """One query per row over the cached keys and its own (no causal mask: it is the last), plus
        the residual, then `norm` (Post-LN)."""
        batch, H, d_k = h.shape[0], layer.n_heads, layer.d_k
        qkv = layer.qkv(h, bufs["qkv"])
        kb, vb = cache.self_kv[layer.index]
        if qkv is bufs["qkv"] and rope is None:  # views of the GEMM's buffer, made once per batch size
            q, k, v = bufs["q_heads"], bufs["k_new"], bufs["v_new"]
        else:
            q, k, v = qkv.view(batch, 3, H, 1, d_k).unbind(1)
            if rope is not None:  # the new query and key rotated to their position; cached keys already are
                q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        if self._own and kb.dtype == torch.float32:
            # the kernel writes k and v into the cache's row `length`, then reads the cache in place;
            # z comes with its heads side by side
            z = own_kernels.attend(q, kb, vb, length + 1, layer.scale, bias, k, v)  # (batch, 1, head, d_k)
        else:
            # every operator after a GEMM that streamed its weights runs from cold caches (~10–40 µs, not
            # ~2): the fewer the better. K and V go into the cache in one copy where both are halves of one
            # buffer. narrow, not kb[:, :, i:j]: one call instead of Python's index machinery (~5 µs each).
            joint = cache.joint_kv.get(layer.index)
            if k is bufs["k_new"] and joint is not None and kb.data_ptr() == joint.data_ptr():
                joint.narrow(3, length, 1).copy_(bufs["kv_heads"])
            else:
                kb.narrow(2, length, 1).copy_(k)
                vb.narrow(2, length, 1).copy_(v)
            z = F.scaled_dot_product_attention(q, kb.narrow(2, 0, length + 1), vb.narrow(2, 0, length + 1),
                                               attn_mask=bias, scale=layer.scale)  # (batch, head, 1, d_k)
        # heads concatenated (one query)
        return product(layer.W_O, z.reshape(batch, H * d_k), bufs["o"], residual=residual, norm=norm)

    def _attend_memory(self, layer: _Layer, h: torch.Tensor, bufs: dict, residual: torch.Tensor | None,
                       norm) -> torch.Tensor:
        """Cross-attention: each row's query over its source's memory, plus the residual, then `norm`
        (Post-LN). The rows of one source (its beams) are that attention's queries: (source, head, beam,
        d_k) against one copy of the keys."""
        rows, H, d_k = h.shape[0], layer.n_heads, layer.d_k
        memory = self.memory
        k, v = memory.kv[layer.index]
        q = layer.cross_W_Q(h, bufs["q"])
        if q is bufs["q"]:
            q = bufs["cross_q_heads"]
        else:
            q = q.view(memory.sources, rows // memory.sources, H, d_k).transpose(1, 2)
        if self._own and k.dtype == torch.float32:  # z (source, beam, head, d_k): W_O's rows as they are
            z = own_kernels.attend(q, k, v, k.shape[2], layer.cross_scale, memory.bias)
        else:
            z = F.scaled_dot_product_attention(q, k, v, attn_mask=memory.bias, scale=layer.cross_scale).transpose(1, 2)
        return product(layer.cross_W_O, z.reshape(rows, H * d_k), bufs["cross_o"], residual=residual, norm=norm)


def prepared(model: nn.Module, cache: KVCache | None, prompt_pad: torch.Tensor | None = None,
             memory: torch.Tensor | None = None, src_pad: torch.Tensor | None = None,
             group: int = 1, precision: str = "fp32") -> DecodeStep | None:
    """A DecodeStep for this generation, or None where the module path must run. An encoder-decoder
    model needs its `memory`; `group` is how many rows in a row share one source (beam search).
    (A left-padded prompt is fine: the module path reads it, and the step masks its padding.)"""
    seq2seq = getattr(getattr(model, "config", None), "arch", None) == "encoder-decoder"
    if seq2seq != (memory is not None) or not supports(model, cache):
        return None
    # the cache's capacity bounds the steps (a prompt's positions take some of it: an upper bound)
    return DecodeStep(model, memory, src_pad, group, precision, steps=cache.capacity)


def applies(cache: KVCache, ids: torch.Tensor, pad_id: int | None) -> bool:
    """Whether this step may take the DecodeStep: room in the cache, and no padding among the new
    tokens (a generated pad id, possible where pad = eos, is padding to the module path; the caller
    passes pad_id=None where only finished rows can hold one, whose logits nobody reads)."""
    kb = cache.self_kv.get(0)
    return (kb is not None and cache.length < kb[0].shape[2]
            and (pad_id is None or not bool((ids == pad_id).any())))
