"""Batch-1 decoding with and without glassformer's GEMV kernel (nn/gemv.py, issue 29): ~1 min.

The GPT-2-size LM of `glassformer bench` (d_model 384, 6 layers, vocabulary 8,000, random weights),
greedy, 128 new tokens, in one process: the same generation with the kernel's route allowed and with
it refused (`gemv.usable` answering no, so every product takes the fastest of PyTorch's routes), and
with the kernel but its epilogue off (`decode_gemm.EPILOGUE`: φ and the residual Adds as separate
operators after it), interleaved (median of 9), after checking that all give HF GPT-2's tokens.
Prints ms per token and the route each decode shape class took.

    .venv/bin/python bench/gemv_ab.py --threads 2
"""

import argparse

import torch

from glassformer.bench.generation import FULL, gpt2_pair
from glassformer.bench.harness import interleaved
from glassformer.generate import generate
from glassformer.nn import decode_gemm, gemv as own
from glassformer.nn.prepared import prepared


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--tokens", type=int, default=128)
    args = ap.parse_args()
    if not own.available():
        raise SystemExit("the GEMV kernel is not built here: make setup (python -m glassformer.nn.gemv)")
    torch.set_num_threads(args.threads)
    ours, hf = gpt2_pair(FULL)
    n = args.tokens
    ids = torch.randint(1, FULL["vocab"], (1, 8), generator=torch.Generator().manual_seed(1))
    real = own.usable

    def gen(allowed: bool, epilogue: bool = True):
        def run():
            own.usable = real if allowed else (lambda *a: False)
            decode_gemm.EPILOGUE = epilogue
            try:
                return generate(ours, ids, max_new_tokens=n, strategy="greedy", eos_id=None)
            finally:
                own.usable, decode_gemm.EPILOGUE = real, True
        return run

    arms = {"with the GEMV kernel": gen(True), "kernel, epilogue off": gen(True, False),
            "PyTorch's routes only": gen(False)}
    with torch.inference_mode(), prepared(ours):
        tokens = {name: run() for name, run in arms.items()}
        ref = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False)
        print("tokens = HF GPT-2: " + ", ".join(f"{name}: {torch.equal(t, ref)}" for name, t in tokens.items()))
        t = interleaved(arms, 9, warmup=1)
    for name, timing in t.items():
        print(f"{name:24s} {timing.median / n * 1e3:.3f} ms/token ({args.threads} threads)")
    for row in decode_gemm.route_rows():
        print(f"  {row['K']:>5} -> {row['N']:<5} rows {row['rows']}: {row['winner']}")


if __name__ == "__main__":
    main()
