"""Large tensors and glibc's malloc: keep freed blocks for reuse instead of page-faulting them back.

glibc serves an allocation above its mmap threshold (128 KiB, raised as blocks are freed, at most
32 MiB) with a fresh mmap, and gives it back to the kernel when freed. The next tensor of that size
then touches new pages: one minor page fault per 4 KiB, each a trap into the kernel that zeroes the
page. A training step that materialises (tokens × vocab) logits allocates and frees hundreds of MB
this way: the benchmark's `torch.nn.Transformer` side (2,048 tokens × 8,000 words, fp32) took
~64,000 page faults per step in every benchmark run on the AVX2 machine of docs/benchmarks.md,
glassformer's side (fused loss, nn/loss.py) 0–12,000.

`keep_freed_memory` asks malloc (mallopt, glibc only) to serve blocks up to 1 GiB from its heap and
to keep freed ones for the next allocation — what the caching allocators of PyTorch's CPU tuning
guide (jemalloc, tcmalloc) do. The process then keeps its peak memory instead of returning it
between steps. The training benchmark (`bench/training.py`) measures the ratio both ways, the second
in a fresh process so that the setting reaches no other benchmark. `glassformer train` leaves malloc
alone: on its default LM model 200-step runs showed no difference beyond the machine's noise
(6,099 and 6,865 tokens/s with the defaults, 6,920 and 6,442 kept).
"""

from __future__ import annotations

import ctypes
import ctypes.util

# mallopt parameters, from glibc's malloc.h
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
KEEP_BYTES = 1 << 30  # blocks up to 1 GiB come from the heap; mallopt takes a C int


def page_faults() -> int | None:
    """Minor page faults of this process so far (getrusage), or None where the OS does not say."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def keep_freed_memory(limit: int = KEEP_BYTES) -> bool:
    """Have glibc's malloc keep freed blocks up to `limit` bytes for reuse (mmap threshold and trim
    threshold raised). True when malloc accepted both; False where there is no glibc (macOS, musl,
    Windows) or it refused — then nothing changed."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, limit)) and bool(mallopt(M_TRIM_THRESHOLD, limit))
