"""Low-precision weights for the prepared decode step, opt-in (issue 29 §3).

A cached decoding step at small batch reads every weight once per token: its time is the time to
stream the weights (nn/decode_step.py). Stored in fewer bytes they stream faster. `precision`:

- `fp32`: the seed's weights as they are (the default; the module path's numbers);
- `int8`: weight-only int8 with one scale per output channel, s_j = max_i |W_ij| / 127 and
  W_ij ≈ s_j · q_ij, q_ij ∈ [−127, 127] (symmetric, no zero point); the activations, the KV
  cache, the norms and attention stay float32;
- `bf16`: the weights rounded to bfloat16 (8 bits of mantissa), the product computed in bf16 and
  its result read back as float32. Faster only where the CPU has bf16 arithmetic (AVX512_BF16 or
  AMX, `routes.onednn_bf16()`); elsewhere it computes the same numbers by emulation, slower than fp32.

An int8 product has several kernels, and which is fastest depends on the machine, as for the fp32
GEMMs (nn/routes.py): each shape class is timed once per process on every kernel this build has,
and the winner kept (`INT8_ROUTES`):

- `fbgemm`: `quantized.linear_dynamic` over an fbgemm-packed W: it also rounds each call's
  activations to 8 bits (one scale per call) and multiplies in integers — what CTranslate2's int8
  does; the least exact. AVX2's u8·s8 instruction sums pairs of products in 16 bits, which full
  8-bit activations can saturate (2 · 255 · 127 > 32,767), so there the activations get 7 bits
  (`reduce_range`); CPUs with VNNI sum in 32 bits and keep all 8. Which one this machine is, is
  checked once per process on that worst case (`full_range_exact`), not read from a flag list;
- `int8pack`: `torch._weight_int8pack_mm`, activations kept float32, W widened inside the kernel;
- `dequant`: W widened to float32 on every call, then the BLAS product (the reference arithmetic,
  never fast: it writes a float32 W per call).

On the AVX2 EPYC of docs/benchmarks.md (`bench/int8_kernels.py`, 1 thread, quiet machine) fbgemm was
the fastest int8 kernel on all 18 decode shapes (batch 1, 8, 16), 1.2–4.4× faster than fp32 except three
narrow batch-1 products where fp32 was up to 20% faster; int8pack ran 4–40× slower than fp32 there
(no fast kernel for AVX2), dequant ~2× slower.

The quantised weights are `derived` copies (nn/prepared.py): built from the parameters inside a
generation's `prepared` scope and dropped with it, so an optimizer step is never served old ones.
"""

from __future__ import annotations

import functools
import warnings

import torch
from torch import nn

from ..errors import InputError
from . import routes
from .prepared import derived, drop as drop_derived

PRECISIONS = ("fp32", "bf16", "int8")


def check(precision: object, name: str = "precision") -> str:
    """The precision itself, or one line saying which ones there are."""
    if precision not in PRECISIONS:
        given = f"{name} {precision}" if name.startswith("--") else f"{name}={precision!r}"  # as it was typed
        raise InputError(f"{given} is not a precision; use {', '.join(PRECISIONS)}")
    return precision  # type: ignore[return-value]


def _fbgemm_ok() -> bool:
    # the default engine of an x86 build ('x86') runs linear_dynamic on fbgemm
    return (torch.backends.quantized.engine in ("fbgemm", "x86")
            and hasattr(torch.ops.quantized, "linear_dynamic") and hasattr(torch.ops.quantized, "linear_prepack"))


INT8_ROUTES = (("fbgemm",) if _fbgemm_ok() else ()) \
    + (("int8pack",) if hasattr(torch, "_weight_int8pack_mm") else ()) + ("dequant",)
FORCE_INT8: str | None = None  # one int8 kernel for every product (tests); None measures
_TABLE: dict[tuple, str] = {}
_TIMINGS: dict[tuple, dict[str, float]] = {}
CALLS: dict[str, int] = dict.fromkeys(("bf16", *INT8_ROUTES), 0)  # products run per kernel (tests)


def route_rows() -> list[dict]:
    """One row per int8 shape class measured in this process: µs per kernel and the winner."""
    return [{"rows": k[0], "K": k[1], "N": k[2], "threads": k[3], "winner": _TABLE[k],
             **{f"{name}_us": round(t * 1e6, 1) for name, t in _TIMINGS.get(k, {}).items()}}
            for k in sorted(_TABLE)]


def quantize(W: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(q (out, in) int8, s (out,) float32) with W (in, out) ≈ (q · s[:, None])ᵀ, per output channel."""
    with torch.no_grad():
        W = W.detach().float()
        # a column of zeros keeps scale 1 (any scale rounds it to 0; none divides by 0)
        s = W.abs().amax(dim=0) / 127.0
        s = torch.where(s > 0, s, torch.ones_like(s))
        q = torch.round(W / s).clamp_(-127, 127).to(torch.int8)
        return q.t().contiguous(), s.contiguous()


def _fbgemm_pack(q: torch.Tensor, s: torch.Tensor, b: torch.Tensor | None):
    """fbgemm's packed form of the same q and s (and the float bias, added by the kernel)."""
    with warnings.catch_warnings():  # quantized tensors are deprecated in torch; the kernel is not gone yet
        warnings.simplefilter("ignore")
        wq = torch._make_per_channel_quantized_tensor(q, s.double(), torch.zeros_like(s, dtype=torch.long), 0)
        return torch.ops.quantized.linear_prepack(wq, None if b is None else b.detach().float().contiguous())


@functools.lru_cache(maxsize=1)
def full_range_exact() -> bool:
    """Whether fbgemm's int8 product is exact here with full 8-bit activations (reduce_range off).

    The worst case for a 16-bit pair sum: every activation at the top of its range (255 once
    quantised) against weights at +127. Exact, y = K; saturated, about half of it."""
    K = 64
    packed = _fbgemm_pack(torch.full((1, K), 127, dtype=torch.int8), torch.ones(1) / 127, None)
    y = torch.ops.quantized.linear_dynamic(torch.ones(1, K), packed, False)
    return abs(y.item() - K) < 0.5


class LowPrecisionGemm:
    """y = x·W + b with W in bf16 or int8: the prepared step's GEMM for `precision` ≠ fp32.

    Its copies of W are `derived` on `owner` (one per kernel; only the winner's kept)."""

    __slots__ = ("W", "b", "owner", "name", "precision", "route")

    def __init__(self, W: torch.Tensor, b: torch.Tensor | None, owner: nn.Module, name: str, precision: str):
        self.W, self.b, self.owner, self.name, self.precision = W, b, owner, name, precision
        self.route = "bf16" if precision == "bf16" else None

    def _copy(self, route: str):
        W, b = self.W, self.b
        if route == "bf16":
            build = lambda: (W.detach().to(torch.bfloat16), None if b is None else b.detach().to(torch.bfloat16))  # noqa: E731
            return derived(self.owner, f"bf16 {self.name}", [W, b], build)
        if route == "fbgemm":
            return derived(self.owner, f"int8 fbgemm {self.name}", [W, b], lambda: _fbgemm_pack(*quantize(W), b))
        return derived(self.owner, f"int8 {self.name}", [W], lambda: quantize(W))

    def _call(self, route: str, x2: torch.Tensor) -> torch.Tensor:
        CALLS[route] += 1
        if route == "bf16":
            Wb, bb = self._copy(route)
            xb = x2.to(torch.bfloat16)
            return (xb @ Wb if bb is None else torch.addmm(bb, xb, Wb)).float()
        if route == "fbgemm":
            return torch.ops.quantized.linear_dynamic(x2, self._copy(route), not full_range_exact())
        q, s = self._copy(route)
        if route == "int8pack":
            y = torch._weight_int8pack_mm(x2, q, s)
        else:  # dequant: (x · qᵀ) · s, q widened to float32 for the call
            y = (x2 @ q.t().float()).mul_(s)
        return y if self.b is None else y.add_(self.b)

    def _resolve(self, x2: torch.Tensor) -> None:
        forced = FORCE_INT8
        if forced is not None:
            if forced not in INT8_ROUTES:
                raise InputError(f"FORCE_INT8={forced!r} is not an int8 kernel of this build; use "
                                 f"{', '.join(INT8_ROUTES)}")
            self.route = forced
        else:
            key = routes.shape_class(x2.shape[0], self.W)
            self.route = _TABLE.get(key)
            if self.route is None:
                best = routes.fastest({name: (lambda name=name: self._call(name, x2)) for name in INT8_ROUTES})
                for name in INT8_ROUTES:  # the timing runs are not products of the generation
                    CALLS[name] -= 1 + routes._TRIALS
                self.route = _TABLE[key] = min(best, key=best.get)
                _TIMINGS[key] = best
        # keep only the winner's copy of W (measuring made both)
        drop_derived(self.owner, {f"int8 {self.name}"} if self.route == "fbgemm" else {f"int8 fbgemm {self.name}"})

    def __call__(self, x2: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
        if self.route is None:
            self._resolve(x2)
        return self._call(self.route, x2)
