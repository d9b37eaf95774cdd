"""The decode step's products x·W + b: which kernel each one takes on this machine (issues 11 and 29).

`nn/decode_step.py` prepares the step's weights and runs it; this module is the one decision inside it
that depends on the CPU rather than on the model: the route of each fp32 GEMM, measured once per shape
class (like nn/routes.py, whose two routes it extends with copies of W in oneDNN's preferred layouts),
or W in low precision (nn/precision.py).
"""

from __future__ import annotations

import itertools
import os
import time

import torch
from torch import nn

from . import gemv as own_gemv, routes
from .common import _onednn_ok, onednn_linear
from .precision import LowPrecisionGemm
from .prepared import derived, drop as drop_derived
from .routes import shape_class

# The decode step's GEMM routes: nn/routes.py's two, plus oneDNN on a contiguous (out, in) copy of
# W. A matrix-vector product streams W once; which order of W streams fastest depends on the shape
# and the BLAS: on the AVX2 EPYC of docs/benchmarks.md the tall W_2 (4·d_model → d_model) read in
# (in, out) order ran ~35% slower than oneDNN over its (out, in) copy, while W_1 was the reverse.
# So each shape class is measured once per process, like nn/routes.py, and the copy is made and
# kept (on the module, for the generation's `prepared` scope) only where it won.
#
# `onednn_blocked` goes one step further: oneDNN reorders W once into its own blocked layout for the
# step's batch size (`mkldnn._reorder_linear_weight`, the prepacking that weight freezing does), so
# the product reads W in the order its kernel consumes it instead of repacking it on every call.
# At batch 8 on the AVX2 EPYC that made the layer GEMMs ~30% faster (3.6 vs 4.8 ms per token step
# of the benchmark model, scratch measurement); at batch 1 it was a tie.
#
# A copy is made once per generation (nn/prepared.py keeps none across generations), so a copying
# route wins only where it pays for its copy within the generation: the route chosen is the one with
# the least per-call time + build time / steps, `steps` being the most steps the generation can take
# (its cache's room). On the AVX-512 EPYC at 1 thread, the translator's W_2 (2048 → 512) measured
# 585 µs on BLAS, 486 over the (out, in) copy and 478 over the blocked one, whose copy and reorder cost
# ~5.7 ms: over a 48-token generation that is a loss of ~5 ms per layer, the plain copy (~1.3 ms) a gain.
_REORDER = getattr(torch.ops.mkldnn, "_reorder_linear_weight", None) if torch.backends.mkldnn.is_available() else None
DECODE_ROUTES = ("blas", "onednn", "onednn_packed") + (("onednn_blocked",) if _REORDER is not None else ())
# `gemv`: glassformer's own matrix-vector kernel (nn/gemv.py), a route where it was built, for products
# of at most GEMV_ROWS rows: it reads W once and multiplies each row by it with no blocking for reuse,
# so it wins where a step streams W and loses where rows share it. On the AVX-512 EPYC at 2 threads,
# W cycled from memory (µs, 384 → 1,152 / 512 → 2,048): 1 row 59 / 126 against the best other route's
# 95 / 170; 2 rows 57 / 171 against 84 / 189; 4 rows 85 / 248 against 82 / 161 (oneDNN blocked);
# 8 rows 112 / 489 against 87 / 192 — so it is not even timed past 4.
GEMV_ROWS = 4
_COPYING = ("onednn_packed", "onednn_blocked")  # the routes that keep a copy of W on the module
FORCE: str | None = None  # a route for every decode GEMM (tests); None measures
EPILOGUE = True  # the GEMV route applies φ, the residual Add and Post-LN's LayerNorm in its kernel (`product`)
_TABLE: dict[tuple, str] = {}
_TIMINGS: dict[tuple, dict[str, float]] = {}  # seconds per route, for the benchmark report
_BUILDS: dict[tuple, dict[str, float]] = {}  # seconds to build each copying route's copy of W


def route_rows() -> list[dict]:
    """One row per decode shape class measured in this process: µs per route and the winner."""
    return [{"rows": k[0], "K": k[1], "N": k[2], "threads": k[3], "streams": k[4], "winner": _TABLE[k],
             **{f"{name}_us": round(t * 1e6, 1) for name, t in _TIMINGS.get(k, {}).items()},
             **{f"{name}_build_us": round(t * 1e6, 1) for name, t in _BUILDS.get(k, {}).items()}}
            for k in sorted(_TABLE)]


def cheapest(per_call: dict[str, float], builds: dict[str, float], steps: int | None) -> str:
    """The route of least time over `steps` calls, its copy's build included (None: calls unbounded)."""
    if steps is None:
        return min(per_call, key=per_call.get)
    return min(per_call, key=lambda name: per_call[name] + builds.get(name, 0.0) / max(steps, 1))


def last_level_cache_bytes(default: int | None = 32 << 20) -> int | None:
    """This CPU's last-level cache (Linux sysconf), or `default` where the system does not say."""
    for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            size = os.sysconf(name)
        except (ValueError, OSError, AttributeError):
            size = 0
        if size > 0:
            return size
    return default


def _packed(owner: nn.Module, name: str, W: torch.Tensor, rows: int | None = None) -> torch.Tensor:
    """W (in, out) as a contiguous (out, in) copy — or, given `rows`, oneDNN's blocked layout of that
    copy for products of that many rows — kept on `owner` for the `prepared` scope of the generation
    (nn/prepared.py): built again from W as it is now in the next one."""
    def build():
        copy = W.detach().t().contiguous()
        return copy if rows is None else _REORDER(copy, rows)
    return derived(owner, _packed_name(name, rows), [W], build)


def _packed_name(name: str, rows: int | None) -> str:
    return f"packed {name} {rows}"


class _Gemm:
    """y = x·W + b into a buffer, on the route measured for this shape class (resolved once)."""

    __slots__ = ("W", "b", "route", "packed", "owner", "name", "streams", "steps")

    def __init__(self, W: torch.Tensor, b: torch.Tensor | None, owner: nn.Module, name: str, streams: bool,
                 steps: int | None = None):
        self.W, self.b, self.route, self.packed, self.owner, self.name = W, b, None, None, owner, name
        self.streams = streams  # the model outgrows the cache: W comes from memory at every step
        self.steps = steps  # the most calls this generation makes: what a copy of W is paid back over

    def _call(self, route: str, x2: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        if route == "gemv":
            return own_gemv.gemv(x2, self.W, self.b, out)
        if route == "onednn":
            return onednn_linear(x2, self.W.t(), self.b)
        if route in _COPYING:
            rows = x2.shape[0] if route == "onednn_blocked" else None
            if self.packed is None or self.packed[0] != rows:
                self.packed = (rows, _packed(self.owner, self.name, self.W, rows))
            return onednn_linear(x2, self.packed[1], self.b)
        if out is None:
            return torch.mm(x2, self.W) if self.b is None else torch.addmm(self.b, x2, self.W)
        return torch.mm(x2, self.W, out=out) if self.b is None else torch.addmm(self.b, x2, self.W, out=out)

    def _resolve(self, x2: torch.Tensor) -> None:
        """Pick this GEMM's route (forced, known for its shape class, or measured now)."""
        forced = FORCE or routes.forced_route()
        onednn = _onednn_ok(x2, self.W)
        own = own_gemv.usable(x2, self.W)
        if forced is not None:  # a pinned route where this product can take it, else BLAS
            self.route = forced if forced == "blas" or (own if forced == "gemv" else onednn) else "blas"
            names = ()
        else:  # tiny products (under 2^17 multiply-adds) stay on BLAS, whose call costs least
            own = own and x2.shape[0] <= GEMV_ROWS and x2.shape[0] * self.W.numel() >= 1 << 17
            names = (DECODE_ROUTES if onednn else ("blas",)) + (("gemv",) if own else ())
            if len(names) == 1:
                self.route = "blas"
        if len(names) > 1:
            key = (*shape_class(x2.shape[0], self.W), self.streams, own)
            if key not in _TABLE:  # time every route on these operands (routes.fastest)
                _BUILDS[key] = self._time_builds(x2.shape[0], names)
                best = (self._time_cold(x2, names) if self.streams else
                        routes.fastest({name: (lambda name=name: self._call(name, x2, None)) for name in names}))
                _TABLE[key] = min(best, key=best.get)  # the fastest call, whatever its copy costs
                _TIMINGS[key] = best
            self.route = cheapest(_TIMINGS[key], _BUILDS[key], self.steps)
        # keep only the winner's copy of W (measuring made one per copying route)
        rows = x2.shape[0] if self.route == "onednn_blocked" else None
        keep = _packed_name(self.name, rows) if self.route in _COPYING else None
        made = {_packed_name(self.name, r) for r in (None, x2.shape[0])}  # onednn_packed's, onednn_blocked's
        drop_derived(self.owner, made - {keep})
        if keep is None or (self.packed is not None and self.packed[0] != rows):
            self.packed = None

    def _time_cold(self, x2: torch.Tensor, names: tuple[str, ...] = DECODE_ROUTES) -> dict[str, float]:
        """Seconds per call of each route with W coming from memory, as a decode step meets it.

        In a step, between two reads of one W every other layer's weights stream through the cache.
        So each route is timed cycling over distinct copies of W in its own layout, a last-level
        cache's worth of them twice over, each call on the next: in a cyclic order longer than the
        cache every read misses, as a step's does.
        (Pushing W out by writing or reading a buffer of twice the cache first, as this did before,
        left the memory system in another state: on the AVX-512 EPYC at 1 thread it timed oneDNN over
        the (out, in) copy of the 1,536 → 384 W_2 at 408–458 µs against BLAS's 442, where cycling
        gives 192 against 315 — and a step, like cycling, reads W after the other layers' weights.)
        One route's copies exist at a time: about two caches of memory (what the buffer it replaces
        took), freed after."""
        rows, W, b = x2.shape[0], self.W.detach(), self.b
        count = max(2, -(-2 * last_level_cache_bytes() // (4 * W.numel())) + 1)
        best = {}
        for route in names:
            if route == "gemv":
                copies = [W.clone() for _ in range(count)]
                call = lambda Wj: own_gemv.gemv(x2, Wj, b)  # noqa: E731
            elif route == "blas":
                copies = [W.clone() for _ in range(count)]
                call = lambda Wj: torch.mm(x2, Wj) if b is None else torch.addmm(b, x2, Wj)  # noqa: E731
            elif route == "onednn":
                copies = [W.clone() for _ in range(count)]
                call = lambda Wj: onednn_linear(x2, Wj.t(), b)  # noqa: E731
            else:
                copies = [W.t().contiguous() for _ in range(count)]
                if route == "onednn_blocked":
                    copies = [_REORDER(c, rows) for c in copies]
                call = lambda Pj: onednn_linear(x2, Pj, b)  # noqa: E731
            turn = itertools.count()
            best.update(routes.fastest({route: lambda: call(copies[next(turn) % count])},
                                       trials=max(routes._TRIALS, count)))
            del copies
        return best

    def _time_builds(self, rows: int, names: tuple[str, ...] = DECODE_ROUTES) -> dict[str, float]:
        """Seconds to build each copying route's copy of W, once (the copies a generation makes)."""
        builds = {}
        for route in (r for r in _COPYING if r in names):
            t = time.perf_counter()
            _packed(self.owner, self.name, self.W, rows if route == "onednn_blocked" else None)
            builds[route] = time.perf_counter() - t
        return builds

    def __call__(self, x2: torch.Tensor, out: torch.Tensor | None) -> torch.Tensor:
        if self.route is None:  # first step at this batch size: the route for its shape class
            self._resolve(x2)
        return self._call(self.route, x2, out)


def product(gemm, x2: torch.Tensor, out: torch.Tensor | None, act: str | None = None, phi=None,
            residual: torch.Tensor | None = None, norm=None) -> torch.Tensor:
    """norm(φ(x2·W + b) + residual), φ (named `act`, applied in place by `phi`), the residual and the norm
    optional: the FFN's first product, and a sublayer's last one with its Add and, Post-LN, its Norm
    (§4, §5, §6). `norm`: a callable whose `ln` is a LayerNorm's (gamma, beta, eps), or None for any other
    norm. On the GEMV route the kernel applies them all to its output while it is still in L1/L2
    (nn/gemv.cpp's epilogue; a norm other than LayerNorm runs after it): after a product that streamed W,
    separate operators run from cold caches. Other routes run them after it, as operators."""
    if type(gemm) is _Gemm:
        if gemm.route is None:
            gemm._resolve(x2)
        if gemm.route == "gemv" and EPILOGUE:
            ln = None if norm is None else norm.ln
            y = own_gemv.gemv(x2, gemm.W, gemm.b, out, act, residual, ln)
            return y if norm is None or ln is not None else norm(y)
    y = gemm(x2, out)
    if phi is not None:
        y = phi(y)
    if residual is not None:
        y = residual + y
    return y if norm is None else norm(y)


def gemm(W: torch.Tensor, b: torch.Tensor | None, owner: nn.Module, name: str, streams: bool, precision: str,
         steps: int | None = None):
    """The step's product x·W + b: fp32 on its measured route, or W in low precision (nn/precision.py).
    `steps`: the most calls the generation makes (None: unbounded), over which a copy of W must pay."""
    if precision == "fp32":
        return _Gemm(W, b, owner, name, streams, steps)
    return LowPrecisionGemm(W, b, owner, name, precision)
