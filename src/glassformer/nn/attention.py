"""Scaled dot-product and multi-head attention (seed 000 ch. 1 and 2).

Attention(Q, K, V) = softmax(Q·Kᵀ / sqrt(d_k) + bias) · V, with per-head projections
Q_h = X·W_Q[h] + b_Q[h] (§1.3), heads concatenated and mixed by W_O (§2.2, §2.4).

Two paths compute the same thing:
- the explicit math (reference): every step is a hook point — `q`, `k`, `v`, `scores` (QKᵀ),
  `scaled` (÷ sqrt(d_k), plus position bias and mask), `pattern` (softmax), `z` (pattern·V),
  `concat`, `out` (after W_O). Tracing always takes this path.
- the fast path: one fused QKV GEMM and `torch.nn.functional.scaled_dot_product_attention`,
  tested equal to the reference to 1e-5.
Shapes: x (batch, seq, d_model); per-head tensors (batch, head, seq, d_k).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from ..trace import HookPoint
from . import fused
from .common import affine, masked_value
from .dropout import dropout, uses_cheap_mask
from .positional import apply_rotary
from .prepared import derived


class KVCache:
    """Keys and values already computed, per decoder layer, for incremental decoding.

    Self-attention buffers are preallocated (batch, head, capacity, d_k) and filled in place;
    cross-attention keys and values of the encoder memory are computed once and reused.
    """

    def __init__(self, capacity: int = 256):
        self.capacity = capacity
        self.self_kv: dict[int, list] = {}  # layer -> [k_buf, v_buf]
        self.joint_kv: dict[int, torch.Tensor] = {}  # layer -> (batch, 2, head, capacity, d_k) behind both
        self.cross_kv: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.length = 0  # positions already cached
        self.next_pos: torch.Tensor | None = None  # (batch,) next absolute position per row
        self.positions: torch.Tensor | None = None  # (batch, length) positions of cached keys
        self.padding_mask: torch.Tensor | None = None  # (batch, length) True at padding
        self._records: dict[str, torch.Tensor] = {}  # preallocated buffers behind the two above

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store k, v (batch, head, new, d_k) after the cached ones; return all so far."""
        start, new = self.length, k.shape[2]
        if layer not in self.self_kv or self.self_kv[layer][0].shape[2] < start + new:
            cap = max(self.capacity, 2 * (start + new))
            old_bufs = self.self_kv.get(layer)
            bufs = self.allocate(layer, k, cap)
            if old_bufs is not None:
                for buf, old in zip(bufs, old_bufs):
                    buf[:, :, :start] = old[:, :, :start]
        kb, vb = self.self_kv[layer]
        kb[:, :, start:start + new] = k
        vb[:, :, start:start + new] = v
        return kb[:, :, :start + new], vb[:, :, :start + new]

    def allocate(self, layer: int, like: torch.Tensor, capacity: int) -> list[torch.Tensor]:
        """Empty key and value buffers (batch, head, capacity, d_k) for `layer`, shaped after `like`:
        the two halves of one buffer, so that a decode step writes a position's K and V in one copy."""
        joint = like.new_empty(like.shape[0], 2, like.shape[1], capacity, like.shape[3])
        self.joint_kv[layer] = joint
        self.self_kv[layer] = [joint[:, 0], joint[:, 1]]
        return self.self_kv[layer]

    def extend(self, name: str, new: torch.Tensor) -> torch.Tensor:
        """Append `new` (batch, new) to the per-key record `name` ("positions" or "padding_mask").

        Written in place into a preallocated buffer, like the keys: a decode step costs the same
        whatever the cache holds. Positions recorded before this record existed were not padding.
        """
        start, n = self.length, new.shape[1]
        buf = self._records.get(name)
        if buf is None or buf.shape[1] < start + n:
            grown = new.new_zeros(new.shape[0], max(self.capacity, 2 * (start + n)))
            if start and getattr(self, name) is not None:
                grown[:, :start] = getattr(self, name)
            buf = self._records[name] = grown
        buf[:, start:start + n] = new
        setattr(self, name, buf[:, :start + n])
        return getattr(self, name)

    def reorder(self, index: torch.Tensor) -> None:
        """Keep rows `index` of the batch (beam search).

        In place: only the rows that change are copied, and only their cached positions — not a
        new buffer of the whole capacity per step (most beams usually stay where they are)."""
        moved = (index != torch.arange(index.shape[0], device=index.device)).nonzero().squeeze(1)
        if moved.numel() == 0:
            return
        src = index.index_select(0, moved)

        def gather(t: torch.Tensor) -> None:  # the moved rows first read, then written
            t.index_copy_(0, moved, t.index_select(0, src))
        for bufs in self.self_kv.values():
            for buf in bufs:
                gather(buf.narrow(2, 0, self.length))
        for layer, (k, v) in self.cross_kv.items():
            self.cross_kv[layer] = (k.index_select(0, index), v.index_select(0, index))
        if self.next_pos is not None:
            self.next_pos = self.next_pos.index_select(0, index)
        for name, buf in self._records.items():
            gather(buf.narrow(1, 0, self.length))


class MultiHeadAttention(nn.Module):
    """Multi-head self- or cross-attention with the seed's per-head weights.

    W_Q, W_K, W_V: (n_heads, d_model, d_k); b_Q, b_K, b_V: (n_heads, d_k);
    W_O: (n_heads·d_k, d_model); b_O: (d_model,).
    """

    def __init__(self, d_model: int, n_heads: int, d_k: int, bias: bool = True,
                 scale_scores: bool = True, dropout: float = 0.0, cross: bool = False,
                 impl: str = "fast", layer_index: int = 0):
        super().__init__()
        self.d_model, self.n_heads, self.d_k, self.cross = d_model, n_heads, d_k, cross
        self.scale = 1.0 / math.sqrt(d_k) if scale_scores else 1.0  # §1.5
        self.dropout_p, self.layer_index = dropout, layer_index
        self.force_math = impl == "math"
        std = d_model ** -0.5
        for name in ("Q", "K", "V"):
            setattr(self, f"W_{name}", nn.Parameter(torch.randn(n_heads, d_model, d_k) * std))
            setattr(self, f"b_{name}", nn.Parameter(torch.zeros(n_heads, d_k)) if bias else None)
        self.W_O = nn.Parameter(torch.randn(n_heads * d_k, d_model) * (n_heads * d_k) ** -0.5)
        self.b_O = nn.Parameter(torch.zeros(d_model)) if bias else None
        for name in ("q", "k", "v", "q_rot", "k_rot", "scores", "scaled", "pattern", "z", "concat", "out"):
            setattr(self, name, HookPoint())

    # ---- projections ----
    def _fused(self, names: str) -> tuple[torch.Tensor, torch.Tensor | None]:
        """W and b of several projections side by side: (d_model, len(names)·H·d_k).

        Built from the parameters at every call, except inside a `prepared(model)` scope
        (generation, evaluation), where the copy is kept: a kept copy can never outlive an
        update of the weights (nn/prepared.py, issue 27). Autograd always gets a fresh cat.
        """
        Ws = [getattr(self, f"W_{n}") for n in names]
        bs = [getattr(self, f"b_{n}") for n in names]
        if torch.is_grad_enabled() and Ws[0].requires_grad:
            return self._build_fused(Ws, bs)
        return derived(self, f"W_{names}", Ws + bs, lambda: self._build_fused(Ws, bs))

    def _build_fused(self, Ws, bs):
        H, dk = self.n_heads, self.d_k
        # one cat over the (d_model, H, d_k) views: columns (projection, head, k), no copy per projection;
        # reshape, not view: the cat is contiguous here, but torch.compile may lay it out otherwise
        W = torch.cat([w.permute(1, 0, 2) for w in Ws], dim=1).reshape(self.d_model, len(Ws) * H * dk)
        b = None if bs[0] is None else torch.cat([b.reshape(H * dk) for b in bs])
        return W, b

    def _split_heads(self, t: torch.Tensor) -> torch.Tensor:  # (batch, seq, H·d_k) -> (batch, H, seq, d_k)
        return t.view(t.shape[0], t.shape[1], self.n_heads, self.d_k).transpose(1, 2)

    def _project_fast(self, x, memory, cache):
        H_dk = self.n_heads * self.d_k
        if not self.cross:
            W, b = self._fused("QKV")
            q, k, v = affine(x, W, b).split(H_dk, dim=-1)
            return self._split_heads(q), self._split_heads(k), self._split_heads(v)
        W_q, b_q = self._fused("Q")
        q = self._split_heads(affine(x, W_q, b_q))
        if cache is not None and self.layer_index in cache.cross_kv:
            k, v = cache.cross_kv[self.layer_index]
        else:
            W, b = self._fused("KV")
            k, v = (self._split_heads(t) for t in affine(memory, W, b).split(H_dk, dim=-1))
        return q, k, v

    def _project_math(self, x: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        """Q = X·W_Q + b_Q for every head at once: (batch, seq, d_model) -> (batch, head, seq, d_k)."""
        out = torch.einsum("bsd,hdk->bhsk", x, W)
        return out if b is None else out + b[None, :, None, :]

    # ---- forward ----
    def forward(self, x: torch.Tensor, memory: torch.Tensor | None = None,
                bias: torch.Tensor | None = None, causal: bool = False,
                rope: tuple[torch.Tensor, ...] | None = None,
                cache: KVCache | None = None) -> torch.Tensor:
        """x (batch, q_len, d_model); memory (batch, k_len, d_model) for cross-attention.

        bias: additive (batch|1, head|1, q_len, k_len), position bias and masks already folded in.
        causal: key j is hidden from query i when j > i (+ cached length).
        rope: (cos, sin) at the new positions, rotating Q and the new K (RoPE).
        """
        kv_input = memory if self.cross else x
        if causal and x.shape[1] == 1:
            causal = False  # one new query at the last position sees every cached key
        if self.force_math:
            q = self.q(self._project_math(x, self.W_Q, self.b_Q))
            if self.cross and cache is not None and self.layer_index in cache.cross_kv:
                k, v = cache.cross_kv[self.layer_index]
            else:
                k = self.k(self._project_math(kv_input, self.W_K, self.b_K))
                v = self.v(self._project_math(kv_input, self.W_V, self.b_V))
        else:
            q, k, v = self._project_fast(x, kv_input, cache)
        if rope is not None:
            cos, sin = rope
            if (not self.force_math and fused.usable(q, k, dtypes=fused.WITH_BF16) and fused.usable(cos, sin)
                    and fused.rotary_ok(q, cos) and fused.rotary_ok(k, cos)):
                q, k = fused.rotate_qk(q, k, cos, sin)  # the same rotation, one pass each way
                q, k = self.q_rot(q), self.k_rot(k)
            else:
                q = self.q_rot(apply_rotary(q, cos, sin))
                k = self.k_rot(apply_rotary(k, cos, sin))
        if cache is not None:
            if self.cross:
                cache.cross_kv[self.layer_index] = (k, v)
            else:
                k, v = cache.append(self.layer_index, k, v)
        # PyTorch's fused CPU kernel takes no dropout: SDPA would fall back to its own math and draw
        # the mask per element (nn/dropout.py); the explicit math with the cheaper mask instead
        drop_here = self.training and self.dropout_p > 0 and uses_cheap_mask(q.device)
        if self.force_math or drop_here:
            if causal:
                bias = _with_causal(bias, q.shape[2], k.shape[2], q.dtype)
            z = self._attend_math(q, k, v, bias)
        else:
            # the fused kernel's own causal mask when it applies; otherwise fold it into bias
            kernel_causal = causal and bias is None and q.shape[2] == k.shape[2]
            if causal and not kernel_causal:
                bias = _with_causal(bias, q.shape[2], k.shape[2], q.dtype)
            z = _sdpa(q, k, v, bias, self.dropout_p if self.training else 0.0, kernel_causal, self.scale)
        concat = self.concat(z.transpose(1, 2).reshape(z.shape[0], z.shape[2], -1))
        return self.out(affine(concat, self.W_O, self.b_O))

    def _attend_math(self, q, k, v, bias):
        """The explicit math of §1.4–§1.7, one hook per step."""
        scores = self.scores(q @ k.transpose(-2, -1))  # (batch, head, q, k): QKᵀ
        scaled = scores * self.scale if self.scale != 1.0 else scores
        if bias is not None:
            scaled = scaled + bias
        scaled = self.scaled(scaled)
        pattern = self.pattern(torch.softmax(scaled.float(), dim=-1).to(q.dtype))  # rows sum to 1
        pattern = dropout(pattern, self.dropout_p, self.training)
        return self.z(pattern @ v)  # (batch, head, q, d_k)


def _sdpa(q, k, v, bias, dropout_p: float, causal: bool, scale: float) -> torch.Tensor:
    """torch's fused kernel; a CPU step that trains in bf16 (autocast) runs it in float32.

    Why: on CPU the flash kernel's bf16 backward is 3.6× slower than its float32 one at the
    character LM's shapes (batch 32, 4 heads, 64 positions, d_k 32, forward and backward: 17.9 ms
    against 5.0 ms on the AVX512_BF16 EPYC; bench/train_step.py's profile: 34% of the bf16 step),
    which is what held the LM's bf16 step to ~1.06× float32 while its GEMMs ran 2.0–2.3× (docs/
    real-data.md, "bf16 attention in float32"). Attention is ~7% of the step's FLOPs there; the casts are cheap."""
    low = q.dtype == torch.bfloat16 or torch.is_autocast_enabled("cpu")  # autocast would cast q, k, v to bf16
    if low and q.device.type == "cpu" and torch.is_grad_enabled() and q.requires_grad:
        with torch.autocast("cpu", enabled=False):
            b = bias.float() if bias is not None and bias.is_floating_point() else bias
            z = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=b, dropout_p=dropout_p,
                                               is_causal=causal, scale=scale)
        return z.to(q.dtype)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=dropout_p, is_causal=causal,
                                          scale=scale)


def _with_causal(bias: torch.Tensor | None, q_len: int, k_len: int, dtype: torch.dtype) -> torch.Tensor:
    """Fold the causal mask into `bias`: query i (the last q_len of k_len positions) sees keys ≤ i."""
    offset = k_len - q_len
    i = torch.arange(q_len).unsqueeze(1) + offset
    j = torch.arange(k_len).unsqueeze(0)
    future = j > i  # (q, k)
    if bias is None:
        bias = torch.zeros((), dtype=dtype)
    return torch.where(future, torch.tensor(masked_value(dtype), dtype=dtype), bias)
