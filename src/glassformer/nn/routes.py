"""Which library computes each x·W + b: decided on this machine, by measurement (issue 11).

The same fp32 GEMM has two routes on a CPU build of PyTorch:

- `onednn`: oneDNN's linear (`torch.ops.mkldnn._linear_pointwise`, a private op, W as a strided view);
- `blas`:   `torch.addmm` / `x @ W`, i.e. the BLAS PyTorch was built with (MKL's sgemm, or its sgemv
  when x is one row).

Which is faster depends on the CPU, not on the code: on an AVX-512 machine whose MKL took a slow path
oneDNN won everywhere; on an AVX2 EPYC MKL's matrix-vector product wins the batch-1 decoding shapes by
2× and oneDNN wins the wider ones (docs/benchmarks.md). So nothing is assumed: the first product of a
shape class (rows bucketed to a power of two, K, N, threads) times each route on the real operands,
keeps the faster one for the rest of the process and returns that product's result (a product that
will be differentiated is timed with its two backward GEMMs: a training class of its own). The routes agree
to float32 rounding (the same sums in another order); tests/test_fast_gemm.py holds them to it.

Switches, for portability checks and for users:
- `GLASSFORMER_ONEDNN=0`, or `torch.backends.mkldnn.enabled = False`: never use the oneDNN route;
- `GLASSFORMER_GEMM=onednn|blas`: one route for every shape (`auto`, the default, measures).
"""

from __future__ import annotations

import os
import time
from typing import Callable

import torch

ROUTES = ("onednn", "blas")
_TRIALS = 3  # timed calls per route after one untimed (oneDNN builds its primitive on the first)

# oneDNN's linear (y = x·Wᵀ + b); absent from builds without oneDNN, or switched off by the user
_LINEAR = (getattr(torch.ops.mkldnn, "_linear_pointwise", None)
           if torch.backends.mkldnn.is_available() and os.environ.get("GLASSFORMER_ONEDNN", "1") != "0" else None)


def forced_route() -> str | None:
    """The route GLASSFORMER_GEMM pins, or None to measure; a wrong value is refused in one line."""
    value = os.environ.get("GLASSFORMER_GEMM", "auto").strip().lower()
    if value in ("", "auto"):
        return None
    if value not in ROUTES:
        from ..errors import InputError
        raise InputError(f"GLASSFORMER_GEMM={value!r} is not a route; use auto, {' or '.join(ROUTES)}")
    return value


def onednn_available() -> bool:
    return _LINEAR is not None and torch.backends.mkldnn.enabled


def onednn_bf16() -> bool:
    """Whether oneDNN has native bfloat16 kernels on this CPU (AVX512_BF16 or AMX); False if unknown.

    Without them oneDNN's bf16 linear raises instead of falling back (the AVX2 crash of issue 11).
    """
    try:
        return torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a build without the private op
        return False


def amx() -> bool:
    """Whether this CPU has AMX tiles (Intel Sapphire Rapids and later); False if unknown. oneDNN
    multiplies bf16 on them, and at a d_model-128 model's sizes that measured slower than float32
    (train/recipe.py `choose_bf16`)."""
    try:
        return bool(torch.cpu._is_amx_tile_supported())
    except (AttributeError, RuntimeError):  # a build without the private probe
        return False


def onednn_linear(x2: torch.Tensor, W_out_in: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return _LINEAR(x2, W_out_in, b, "none", [], "")


def onednn_weight_grad(x2: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """dW = x2ᵀ·g (K, N) on oneDNN. Its linear reads the input row-major, so the transposed operand is
    copied first: xᵀ as written, or, when x is the wider one (K > N, the FFN's W_2), dWᵀ = gᵀ·x,
    which copies g — a quarter of the bytes at d_ff = 4·d_model (the (tokens, d_ff) copy cost ~2 ms of
    a d_model-128 LM step per layer, from memory). dW is then a transposed view (autograd's
    gradient accumulation lays it out as W)."""
    if x2.shape[1] > g.shape[1]:
        return onednn_linear(g.t(), x2.t(), None).t()
    return onednn_linear(x2.t(), g.t(), None)


def blas_affine(x2: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return x2 @ W if b is None else torch.addmm(b, x2, W)


def _onednn_affine(x2: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    return onednn_linear(x2, W.t(), b)


_CALL: dict[str, Callable] = {"onednn": _onednn_affine, "blas": blas_affine}


def _blas_train(x2: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None, g: torch.Tensor) -> None:
    """The three GEMMs a training step runs on the BLAS route: y, then autograd's dx = g·Wᵀ, dW = xᵀ·g."""
    blas_affine(x2, W, b)
    torch.mm(g, W.t())
    torch.mm(x2.t(), g)


def _onednn_train(x2: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None, g: torch.Tensor) -> None:
    """The same three on oneDNN, as nn/common.py's _OneDNNAffine runs them."""
    onednn_linear(x2, W.t(), b)
    onednn_linear(g, W, None)
    onednn_weight_grad(x2, g)


# A route is chosen for a training product by what the step spends on it: the forward GEMM and its
# two backward GEMMs. Timed on the forward alone, oneDNN won three FFN shapes of the training
# benchmark by 1–4% on the AVX2 EPYC and then lost its weight-gradient GEMM by 20–40% (xᵀ·g, which
# it computes from two transposed views) — the backward is two thirds of the work.
_TRAIN_CALL: dict[str, Callable] = {"onednn": _onednn_train, "blas": _blas_train}


def fastest(calls: dict[str, Callable[[], object]], before: Callable[[], object] | None = None,
            trials: int = _TRIALS) -> dict[str, float]:
    """Best-of-`trials` seconds per call, interleaved, after one untimed call each (`before` runs
    ahead of every timed call: the decode step uses it to push W out of the cache)."""
    best = dict.fromkeys(calls, float("inf"))
    for call in calls.values():
        call()
    for _ in range(trials):
        for name, call in calls.items():
            if before is not None:
                before()
            t = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - t)
    return best


def shape_class(rows: int, W: torch.Tensor) -> tuple[int, int, int, int]:
    """(rows rounded up to a power of two, K, N, threads): products that cost alike."""
    return (1 << (rows - 1).bit_length(), W.shape[0], W.shape[1], torch.get_num_threads())


class RouteTable:
    """The route measured for every shape class seen so far in this process, with its timings."""

    def __init__(self):
        self.chosen: dict[tuple, str] = {}
        self.timings: dict[tuple, dict[str, float]] = {}

    def route(self, key: tuple) -> str | None:
        return self.chosen.get(key)

    def measure(self, key: tuple, x2: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
        """Time each route on these operands (best of _TRIALS, interleaved); keep the faster."""
        best = fastest({name: (lambda name=name: _CALL[name](x2, W, b)) for name in ROUTES})
        self.timings[key] = best
        self.chosen[key] = min(best, key=best.get)
        # the winner's own result: every later call of this class takes that route, so the same
        # input gives the same bits on the first call as on all the others
        return _CALL[self.chosen[key]](x2, W, b)

    def measure_training(self, key: tuple, x2: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None) -> None:
        """Time each route's forward and backward GEMMs on these operands (`_TRAIN_CALL`); keep the faster."""
        with torch.no_grad():
            # a stand-in ∂loss/∂y from a generator of its own: drawing from torch's global one would
            # shift every later dropout mask, so a run's numbers would depend on what was measured
            gen = torch.Generator(device=x2.device).manual_seed(0)
            g = torch.randn(x2.shape[0], W.shape[1], dtype=x2.dtype, device=x2.device, generator=gen)
            best = fastest({name: (lambda name=name: _TRAIN_CALL[name](x2, W, b, g)) for name in ROUTES})
        self.timings[key] = best
        self.chosen[key] = min(best, key=best.get)

    def rows(self) -> list[dict]:
        """One row per shape class: what each route took (µs) and which won; `training` rows timed the
        forward and both backward GEMMs."""
        return [{"rows": k[0], "K": k[1], "N": k[2], "threads": k[3], "training": k[4:] == ("training",),
                 "winner": self.chosen[k],
                 **{f"{name}_us": round(t * 1e6, 1) for name, t in self.timings.get(k, {}).items()}}
                for k in sorted(self.chosen)]

    def clear(self) -> None:
        self.chosen.clear()
        self.timings.clear()


TABLE = RouteTable()
