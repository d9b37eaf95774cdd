"""glassformer's own kernels for the decode step (nn/gemv.cpp, nn/attend.cpp; issue 29).

At batch 1 a decode step reads every weight once and does one multiply-add with it, so its GEMMs
can go no faster than W streams from memory. The general kernels read it far slower than that: on
the AVX-512 EPYC, each route timed as a step meets W (cycling over copies twice the size of the L3,
2 threads, `glassformer bench --only peer`, 2026-12-03), BLAS took 105 µs for the 384 → 1,152 W_QKV,
oneDNN 142–161 µs on its three layouts, and this kernel 54 µs; the 12 MB head 634 against 317 µs.
It walks W's rows once, sixteen at a time, adding x[i]·W[i, :] into the output rows, each thread
over its own contiguous stretch of rows. It is one more route of nn/decode_gemm.py, measured beside
the others per shape class and taken only where it is fastest (the tall 1,536 → 384 W_2 stayed on
oneDNN's (out, in) copy there, 89 against 91 µs), so a machine whose BLAS streams better keeps its
BLAS. Batch-1 decoding of the benchmark LM with it: 5.46 → 3.32 ms a token at 2 threads, 5.22 →
4.55 at one (interleaved A/B, same tokens as HF GPT-2).

The same extension holds the step's other two kernels (docs/benchmarks.md, "The decode step's
epilogue and attention"): the product's *epilogue* — φ, the residual Add and Post-LN's LayerNorm
applied to its output rows while they are still in L1/L2, where separate operators after a streamed W
ran from cold caches — and `attend` (attend.cpp): a step's attention over the cache read in place, its
own key and value written there first, z returned in W_O's layout (SDPA with its narrows and reshape
took ~38 µs a call where this takes ~7, hot). And, for training, fused.cpp (nn/fused.py): RMSNorm,
SwiGLU's product and the rotary rotation, forward and backward, one pass over memory each.

PyTorch's compilers came first (issue 29 §2): Inductor lowers a product to the same BLAS call, and
compiling the step took over a minute without being faster (docs/benchmarks.md). The kernel is
compiled once, by `make setup` (`python -m glassformer.nn.gemv`), into the virtual environment,
with AVX2 and FMA (every x86-64 CPU this project has met; none older is used: `available()` asks
torch whether the CPU has AVX2). It is never compiled while decoding: where it was not built, or
cannot be (no compiler), the decode step keeps PyTorch's routes and says nothing.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

import torch
from torch.autograd import profiler as _profiler

PROFILE_NAME = "glassformer::gemv"
SOURCE = Path(__file__).with_name("gemv.cpp")
# one extension: the decode step's products and attention, and the training step's fused elementwise work
SOURCES = (SOURCE, Path(__file__).with_name("attend.cpp"), Path(__file__).with_name("fused.cpp"))
# AVX2 + FMA: one binary for every CPU the project meets (AVX2 and AVX-512 alike: the product is bound
# by memory, not by vector width). -fopenmp: at::parallel_for is a header whose threads are OpenMP
# pragmas (without the flag it runs on one thread); the library it links, libgomp.so.1, is the one
# torch's wheel ships and has loaded already, so the process keeps one OpenMP runtime (a second one,
# as CTranslate2's wheel brings, halved torch's speed: docs/benchmarks.md) — tests/test_gemv.py checks it.
# CPU_CAPABILITY=AVX2: ATen's vector header (the epilogue's φ) compiled for AVX2, as torch's own AVX2
# kernels are; its erf is inline, its tanh and exp are SLEEF's, which libtorch_cpu exports.
FLAGS = ("-O3", "-mavx2", "-mfma", "-fopenmp", "-DCPU_CAPABILITY=AVX2", "-DCPU_CAPABILITY_AVX2")


def module_name() -> str:
    """The extension's name, unique to its source, flags and torch: a changed source is a new build,
    never a stale binary loaded."""
    key = b"".join(p.read_bytes() for p in SOURCES) + " ".join(FLAGS).encode() + torch.__version__.encode()
    return "glassformer_gemv_" + hashlib.sha256(key).hexdigest()[:12]


def build_dir() -> Path:
    """Where the build lives: GLASSFORMER_EXT_DIR, else the environment's own folder (sys.prefix,
    the virtual environment that `make setup` made), so that removing it removes the build."""
    return Path(os.environ.get("GLASSFORMER_EXT_DIR") or Path(sys.prefix) / "glassformer-ext") / module_name()


def _cpu_ok() -> bool:
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")


@functools.lru_cache(maxsize=None)
def kernel():
    """The built extension's module, or None (not built, GLASSFORMER_GEMV=off, or a CPU without AVX2)."""
    if os.environ.get("GLASSFORMER_GEMV", "auto").strip().lower() in ("off", "0", "no") or not _cpu_ok():
        return None
    path = build_dir() / f"{module_name()}.so"
    if not path.is_file():
        return None
    loader = importlib.machinery.ExtensionFileLoader(module_name(), str(path))
    spec = importlib.util.spec_from_file_location(module_name(), path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def available() -> bool:
    return kernel() is not None


# φ the kernel applies to its output (gemv.cpp's `Act`), by the names of nn/feedforward.py
ACTS = {"relu": 1, "gelu": 2, "gelu_tanh": 3, "silu": 4}


def gemv(x2: torch.Tensor, W: torch.Tensor, b: torch.Tensor | None = None,
         out: torch.Tensor | None = None, act: str | None = None,
         residual: torch.Tensor | None = None, ln: tuple | None = None) -> torch.Tensor:
    """LayerNorm(φ(x2 (m, K) · W (K, N) + b) + residual), W read once: float32, contiguous (the caller
    checks `usable`); `act` one of ACTS or None, `residual` a contiguous (m, N) or None, `ln` a
    LayerNorm's (gamma, beta, eps) or None — the epilogue, done on the output while it is hot
    (gemv.cpp). Under torch.profiler the call is one event, `glassformer::gemv` (the extension is not
    an ATen operator, so the profiler would otherwise count its time as the caller's)."""
    b = b if b is None or b.is_contiguous() else b.contiguous()
    code = 0 if act is None else ACTS[act]
    gamma, beta, eps = ln if ln is not None else (None, None, 1e-5)
    if _profiler._is_profiler_enabled:
        with torch.profiler.record_function(PROFILE_NAME):
            return kernel().gemv(x2, W, b, out, code, residual, gamma, beta, eps)
    return kernel().gemv(x2, W, b, out, code, residual, gamma, beta, eps)


ATTEND_PROFILE_NAME = "glassformer::attend"


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, length: int, scale: float,
           bias: torch.Tensor | None = None, new_k: torch.Tensor | None = None,
           new_v: torch.Tensor | None = None) -> torch.Tensor:
    """z = softmax(q·Kᵀ·scale + bias)·V over the first `length` keys (attend.cpp): q (B, H, M, d_k),
    k and v (B, H, ≥ length, d_k) — views of the cache read in place — bias broadcastable to (B, H, M,
    length); z (B, M, H, d_k), its heads side by side as W_O reads them. `new_k`, `new_v` (B, H, 1,
    d_k): the step's own key and value, written into the cache's row length − 1 first (self-attention).
    Float32 on the CPU, d_k contiguous (the caller checks `attention_usable`). One profiler event,
    `glassformer::attend`."""
    if _profiler._is_profiler_enabled:
        with torch.profiler.record_function(ATTEND_PROFILE_NAME):
            return kernel().attend(q, k, v, length, scale, bias, new_k, new_v)
    return kernel().attend(q, k, v, length, scale, bias, new_k, new_v)


def attention_usable(like: torch.Tensor) -> bool:
    """Whether a decode step whose activations look like `like` can take `attend`: built, float32 on
    the CPU, and nothing asking for torch's own operators (autograd, torch.func, torch.compile)."""
    return (available() and like.dtype == torch.float32 and like.device.type == "cpu"
            and not torch.compiler.is_compiling() and not (torch.is_grad_enabled() and like.requires_grad)
            and not torch._C._are_functorch_transforms_active())


def usable(x2: torch.Tensor, W: torch.Tensor) -> bool:
    """Whether this product can take the kernel: built, float32 CPU tensors, both contiguous, and
    nothing asking for torch's own operators (autograd, torch.func, autocast, torch.compile)."""
    return (available() and x2.dtype == W.dtype == torch.float32 and x2.device.type == W.device.type == "cpu"
            and x2.is_contiguous() and W.is_contiguous() and not torch.compiler.is_compiling()
            # no autograd, functorch transform or autocast here: those keep torch's own operators
            and not (torch.is_grad_enabled() and (W.requires_grad or x2.requires_grad))
            and not torch._C._are_functorch_transforms_active() and not torch.is_autocast_enabled("cpu"))


def build(verbose: bool = False) -> Path:
    """Compile the extension into `build_dir()` (torch.utils.cpp_extension with ninja); its .so path."""
    from torch.utils.cpp_extension import load

    folder = build_dir()
    folder.mkdir(parents=True, exist_ok=True)
    load(module_name(), [str(p) for p in SOURCES], extra_cflags=list(FLAGS), extra_ldflags=["-fopenmp"],
         build_directory=str(folder), verbose=verbose)
    kernel.cache_clear()
    return folder / f"{module_name()}.so"


def main() -> int:
    """`python -m glassformer.nn.gemv`: build the kernel (make setup). A machine that cannot build it
    keeps PyTorch's GEMMs, so a failure is said in one line and the exit status is still 0."""
    import time
    if not _cpu_ok():
        print("glassformer GEMV kernel: not built (this CPU has no AVX2); decoding uses PyTorch's GEMMs"
              " and training its composite operators")
        return 0
    start = time.perf_counter()
    try:
        path = build(verbose="-v" in sys.argv)
    except Exception as e:  # noqa: BLE001 — any compiler or ninja failure means: keep PyTorch's GEMMs
        reason = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        print(f"glassformer GEMV kernel: not built ({reason}); decoding uses PyTorch's GEMMs and training its"
              " composite operators")
        return 0
    print(f"glassformer GEMV kernel: {path} ({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
