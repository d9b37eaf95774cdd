"""The training loss: cross-entropy of the output head's softmax, fused with the head (issue 11).

The reference path is the seed's math as written (§3.4, §8): logits = h·W_U + b_U for every
position, softmax over the vocabulary, −log p(target), averaged:

    loss = F.cross_entropy(head(h), target)

On the benchmark's model that path spends about a quarter of its head time outside the GEMMs: the
(tokens × vocab) logits are written to memory, read back by log-softmax, written again, and the
backward pass fills a zero tensor of the same size before it scatters the target's −1 into it.
The fused path computes the same loss and the same gradients a slice of rows at a time, so each
slice's logits stay in the cache:

    z = h_c·W_Uᵀ-stored-as-(vocab, d_model) (+ b_U)     the head, for `chunk` rows
    lse = m + log Σ exp(z − m)                         m = max z; exp computed once, in place
    loss_c = (1 − ε)(lse − z_target) + ε(lse − mean z)  ε: label smoothing (0 → plain NLL)
    ∂loss/∂z = softmax(z) − (1 − ε)·onehot − ε / vocab  in the same buffer
    ∂h_c = ∂z·W,   ∂W += ∂zᵀ·h_c                       the head's two backward GEMMs, now

The gradients are computed in the forward pass (the loss is a scalar, so its backward only scales
them by the incoming gradient), and no (tokens × vocab) tensor ever exists. What that buys, on the
benchmark shape (2,048 tokens × 8,000 words, d_model 256) and the AVX2 machine of
docs/benchmarks.md: memory (peak RSS of a training step 793 instead of 1,030 MiB), and with glibc's
default malloc time as well — 231 against 353 ms for forward and backward — because the reference's
65 MB tensors are fresh mappings every step (~64,000 page faults). With malloc keeping freed blocks
(bench/allocator.py) the two took 226 and 228 ms: the arithmetic itself is no faster.
Ignored targets (padding) are dropped before the head, so they cost nothing.

It runs where it computes what the reference path computes: float32/float64 outside autocast,
reduction "sum" or "mean", a fixed (or no) head bias, no hook on `logits`/`probs` (a trace or a
patch sees the reference path's values). tests/test_loss.py holds it to F.cross_entropy (loss and
every gradient).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.autograd.function import once_differentiable

from ..errors import InputError

CHUNK_FLOATS = 4 << 20  # one slice's logits: 16 MB of float32, inside a server CPU's last-level cache


def chunk_rows(vocab: int, rows: int) -> int:
    """Rows per slice: a power of two whose logits fit CHUNK_FLOATS, at least 64 (GEMM efficiency)."""
    fit = max(64, 1 << max(0, (CHUNK_FLOATS // max(vocab, 1)).bit_length() - 1))
    return min(fit, max(rows, 1))


def reference_cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int = -100,
                            label_smoothing: float = 0.0, reduction: str = "mean") -> torch.Tensor:
    """The seed's loss over materialised logits (batch, seq, vocab) and targets (batch, seq)."""
    if logits.dtype in (torch.bfloat16, torch.float16):  # autocast's logits: the loss in float32
        logits = logits.float()
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1),
                           ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction)


def fused_applies(h: torch.Tensor, b: torch.Tensor | None, reduction: str) -> bool:
    """Whether the fused path computes what the reference path would for this input (it keeps a
    bias b fixed: a trainable one takes the reference path). Under torch.func transforms (grad,
    vmap) the reference path too: they cannot see through a Function that makes its own gradients."""
    return (reduction in ("sum", "mean") and h.dtype in (torch.float32, torch.float64)
            and not torch._C._are_functorch_transforms_active()
            and not torch.is_autocast_enabled(h.device.type) and (b is None or not b.requires_grad))


def _chunked(h: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None, target: torch.Tensor, eps: float,
             chunk: int, grad_h: bool, grad_W: bool):
    """(Σ_rows loss_row, ∂/∂h, ∂/∂W) of the rows of h, `chunk` rows at a time; a gradient not asked
    for is None and costs nothing (evaluation computes only the loss)."""
    n, vocab = h.shape[0], W.shape[0]
    dh = torch.empty_like(h) if grad_h else None
    dW = torch.empty_like(W) if grad_W else None  # the first slice writes it, the others add
    total = h.new_zeros(())
    z_buf = h.new_empty(min(chunk, n), vocab)
    for start in range(0, n, chunk):
        h_c, t_c = h[start:start + chunk], target[start:start + chunk, None]
        z = torch.mm(h_c, W.t(), out=z_buf[:h_c.shape[0]])  # the head's logits for these rows
        if b is not None:
            z.add_(b)
        z_t = z.gather(1, t_c)
        m = z.amax(1, keepdim=True)
        mean_z = z.mean(1, keepdim=True) if eps else None
        z.sub_(m).exp_()  # exp(z − m): the only exp pass
        s = z.sum(1, keepdim=True)
        lse = m + s.log()
        row = lse - z_t
        if eps:
            row = (1.0 - eps) * row + eps * (lse - mean_z)
        total += row.sum()
        if not (grad_h or grad_W):
            continue
        p = z.div_(s)  # softmax
        p.scatter_add_(1, t_c, torch.full_like(z_t, -(1.0 - eps)))  # − (1 − ε)·onehot
        if eps:
            p.sub_(eps / vocab)
        if grad_h:
            torch.mm(p, W, out=dh[start:start + chunk])
        if grad_W:
            if start == 0:
                torch.mm(p.t(), h_c, out=dW)
            else:
                dW.addmm_(p.t(), h_c)
    return total, dh, dW


class LinearCrossEntropy(torch.autograd.Function):
    """weight · Σ_rows cross-entropy(h·Wᵀ + b, target); the gradients for h and W are made in the
    forward pass and only scaled in the backward."""

    @staticmethod
    def forward(ctx, h: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None, target: torch.Tensor,
                label_smoothing: float, weight: float, chunk: int) -> torch.Tensor:
        # h (n, d_model) rows with a real target; W (vocab, d_model); b (vocab,) or None
        total, dh, dW = _chunked(h, W, b, target, float(label_smoothing), chunk,
                                 ctx.needs_input_grad[0], ctx.needs_input_grad[1])
        ctx.weight = weight
        ctx.save_for_backward(dh, dW)
        return total * weight

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_out: torch.Tensor):
        dh, dW = ctx.saved_tensors
        scale = grad_out * ctx.weight
        if float(scale) != 1.0:  # `loss.backward()` on a summed loss: the gradients as they are
            dh = None if dh is None else dh * scale
            dW = None if dW is None else dW * scale
        return dh, dW, None, None, None, None, None


def linear_cross_entropy(h: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None, target: torch.Tensor,
                         ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean",
                         chunk: int | None = None) -> torch.Tensor:
    """cross-entropy(h·Wᵀ + b, target) without materialising the logits; `F.cross_entropy`'s meaning.

    h (..., d_model) hidden states, W (vocab, d_model) the head stored as the embedding is (tied or
    not: pass W_Uᵀ), b (vocab,) a fixed bias or None, target (...) ids with `ignore_index` where no
    loss is taken.
    """
    if b is not None and b.requires_grad and torch.is_grad_enabled():
        raise InputError("the fused loss does not train the head's bias; compute logits and "
                         "F.cross_entropy instead, or freeze the bias")
    if not isinstance(target, torch.Tensor) or target.dtype.is_floating_point or target.dtype == torch.bool:
        kind = target.dtype if isinstance(target, torch.Tensor) else type(target).__name__
        raise InputError(f"targets must be integer token ids (torch.long), got {kind}")
    if reduction not in ("sum", "mean"):
        raise InputError(f"reduction={reduction!r} is not supported by the fused loss; use 'sum' or 'mean'")
    if not 0.0 <= label_smoothing <= 1.0:
        raise InputError(f"label_smoothing={label_smoothing} must be within [0, 1]")
    vocab = W.shape[0]
    h2, t = h.reshape(-1, h.shape[-1]), target.reshape(-1).long()
    if t.shape[0] != h2.shape[0]:
        raise InputError(f"targets have {t.shape[0]} positions but the model produced {h2.shape[0]}; "
                         "give one target id per input position")
    keep = t != ignore_index
    n = int(keep.sum())
    if n < t.shape[0]:  # padding: dropped before the head (its rows get zero gradient)
        h2, t = h2[keep], t[keep]
    lo, hi = (int(t.min()), int(t.max())) if n else (0, 0)
    if lo < 0 or hi >= vocab:
        bad = lo if lo < 0 else hi
        raise InputError(f"target id {bad} is outside the vocabulary [0, {vocab}); "
                         f"use ignore_index={ignore_index} for positions without a target")
    if n == 0:  # what F.cross_entropy gives: 0 for "sum", nan (0/0) for "mean"
        zero = (h2.sum() * 0.0) + (W.sum() * 0.0)
        return zero if reduction == "sum" else zero / 0.0
    weight = 1.0 / n if reduction == "mean" else 1.0
    chunk = chunk or chunk_rows(vocab, n)
    if not (torch.is_grad_enabled() and (h2.requires_grad or W.requires_grad)):  # evaluation: the loss only
        return _chunked(h2, W, b, t, float(label_smoothing), chunk, False, False)[0] * weight
    return LinearCrossEntropy.apply(h2, W, b, t, label_smoothing, weight, chunk)
