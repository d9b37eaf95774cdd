"""Which int8 kernel decodes fastest on this machine (nn/precision.py, issue 29 §3): < 1 minute.

Times every int8 kernel this torch build has — fbgemm's dynamic int8 (`quantized.linear_dynamic`),
`torch._weight_int8pack_mm`, dequantise-on-the-fly — against the fp32 BLAS product, on the decode
shapes of the benchmark models (Marian-size translator, GPT-2-size LM) at batch 1, 8 and 16, with
the copies made once as a generation makes them (inside a `prepared` scope). The decode step itself
measures the same way on its first product of each shape class and keeps the winner; this prints
the table (docs/benchmarks.md keeps the measured ones):

    .venv/bin/python bench/int8_kernels.py
"""

from __future__ import annotations

import time

import torch
from torch import nn

from glassformer.nn import precision
from glassformer.nn.prepared import prepared

SHAPES = [  # (what, K, N): W is (in, out) as the seed stores it
    ("Marian QKV", 512, 1536), ("Marian W_1", 512, 2048), ("Marian W_2", 2048, 512),
    ("Marian W_U (vocab 8000)", 512, 8000), ("GPT-2 QKV", 384, 1152), ("GPT-2 W_2", 1536, 384),
]


def best_us(fn, trials: int = 20) -> float:
    fn()
    best = float("inf")
    for _ in range(trials):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best * 1e6


def main() -> None:
    g = torch.Generator().manual_seed(0)
    print(f"threads {torch.get_num_threads()}, capability {torch.backends.cpu.get_cpu_capability()}, "
          f"kernels {', '.join(precision.INT8_ROUTES)}")
    print("| shape | rows | fp32 µs | " + " | ".join(f"{k} µs" for k in precision.INT8_ROUTES) + " | fastest |")
    print("|---|---:|---:|" + "---:|" * len(precision.INT8_ROUTES) + "---|")
    for what, K, N in SHAPES:
        W, b = torch.randn(K, N, generator=g) * K ** -0.5, torch.randn(N, generator=g)
        owner = nn.Module()
        for rows in (1, 8, 16):
            x = torch.randn(rows, K, generator=g)
            with torch.inference_mode(), prepared(owner):
                t = {"fp32": best_us(lambda: torch.addmm(b, x, W))}
                for kernel in precision.INT8_ROUTES:
                    gemm = precision.LowPrecisionGemm(W, b, owner, "W", "int8")
                    gemm.route = kernel  # forced: each kernel's copy built once, on its first call
                    t[kernel] = best_us(lambda: gemm(x))
            fastest = min(t, key=t.get)
            print(f"| {what} | {rows} | " + " | ".join(f"{t[k]:.0f}" for k in t) + f" | {fastest} |")


if __name__ == "__main__":
    main()
