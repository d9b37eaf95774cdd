"""The time outside the GEMMs per generated token, for the peer benchmark's two models (issue 29 §2): ~2 min.

Greedy decoding at batch 1, fp32, through `generate` (the prepared decode step), for the Marian-size
translator (d_model 512, 6 + 6 layers, vocabulary 8,000) and the GPT-2-size LM (d_model 384, 6 layers),
with 1 and 2 threads (`--threads`). Two independent estimates of the per-token overhead:

- *profiled*: the wall time per token minus the GEMMs' own time per token, where the GEMMs' time is the
  self CPU time torch.profiler gives the matrix-product operators (addmm, mm, bmm, oneDNN's linear,
  the int8 kernels) over one generation (the profiler slows the small ops it wraps, not a GEMM's own
  kernel, so the GEMM time is measured, and the rest is the wall time's remainder, without the profiler),
  taken as the median over `--repeats` pairs of one timed and one profiled generation, back to back;
- *thin model*: the same generation on a model of the same depth and vocabulary but d_model 16, whose
  GEMMs cost next to nothing: its wall time per token is the loop's overhead alone (minus its tiny
  GEMMs, and with the output head's 8,000-wide row still paid). Its tiny products take BLAS, whose
  route applies φ, the residual Adds and Post-LN's norms as separate operators; the full-width step's
  products take glassformer's GEMV kernel, which does them in its epilogue. So the thin model is run a
  second time with every product forced onto the GEMV route (where the kernel is built): the loop's
  overhead as the full-width step at batch 1 runs it.

Per layer: the overhead divided by the layers a step runs (the decoder's; the translator's encoder runs
once per source). Per token is per generation over its tokens: what a generation pays once (its weight
copies, the encoder) is in it. *Each further token*: the same measure for a generation of one new token
(the prompt or the encoder, the weight copies, one step) taken from it, over the other n − 1 tokens:
what one more token costs outside the GEMMs. On a machine shared with other work, `--clock cpu` (1 thread) scales
each time to this process's share of the core, and `--stat min` takes the least-disturbed runs.
Prints a Markdown table for docs/benchmarks.md:

    .venv/bin/python bench/decode_overhead.py [--quick] [--threads 1] [--clock cpu] [--stat min]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from glassformer.bench.harness import _kineto_lines_dropped
from glassformer.bench.peer import EOS, FULL, QUICK, gpt2_pair, marian_pair
from glassformer.generate import generate
from glassformer.nn import decode_gemm, gemv as own_gemv

GEMM_OPS = ("aten::addmm", "aten::mm", "aten::bmm", "aten::baddbmm", "aten::linear", "mkldnn::_linear_pointwise",
            "aten::_weight_int8pack_mm", "quantized::linear_dynamic", "aten::mkldnn_linear",
            "glassformer::gemv")  # glassformer's own kernel (nn/gemv.py), one profiler event per call


def thin(p: dict, kind: str) -> dict:
    """The benchmark's sizes with the width cut to 16 (depth, vocabulary and lengths unchanged)."""
    q = {k: (dict(v) if isinstance(v, dict) else v) for k, v in p.items()}
    if kind == "translator":
        q["marian"].update(d_model=16, heads=2, ffn=64)
    else:
        q["gpt2"].update(n_embd=16, n_head=2)
    return q


def job(p: dict, kind: str):
    """(generation_of, new tokens, decoder layers a step runs): `generation_of(n)` is the greedy
    generation of n new tokens to time, on one model built once."""
    g = torch.Generator().manual_seed(0)
    if kind == "translator":
        model = marian_pair(p)[0]
        prompt = torch.randint(2, p["marian"]["vocab"] - 1, (1, p["src_len"]), generator=g)
        prompt[:, -1] = EOS
        n, layers = p["mt_new"], p["marian"]["layers"]
    else:
        model = gpt2_pair(p)[0]
        prompt = torch.randint(1, p["gpt2"]["vocab"], (1, p["prompt"]), generator=g)
        n, layers = p["lm_new"], p["gpt2"]["n_layer"]

    def generation_of(new: int):
        return lambda: generate(model, prompt, max_new_tokens=new, strategy="greedy", eos_id=None)
    return generation_of, n, layers


# `--clock cpu`: every time scaled to this process's share of the core over the run that measured it
# (CPU time / wall time). Where another process holds the same core part of the time, wall times grow by
# the time it held it, inside the GEMMs and outside alike; the profiler's GEMM times are wall times, so
# each is scaled by its own run's share. On a quiet machine the share is 1 and the clocks agree.
CPU_CLOCK = False


def _once_ms(fn, n: int) -> float:
    """One generation's time per new token (wall, or CPU time with `--clock cpu`)."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return (cpu if CPU_CLOCK else wall) * 1e3 / n


def wall_ms(fn, n: int, repeats: int, stat=statistics.median) -> float:
    """Median (or `stat`) time per new token over `repeats` generations (one warm-up first)."""
    fn()
    return stat([_once_ms(fn, n) for _ in range(repeats)])


def gemm_ms(fn, n: int) -> float:
    """The GEMM operators' self CPU time per new token, from torch.profiler over one generation."""
    from torch.profiler import ProfilerActivity, profile

    with _kineto_lines_dropped():
        wall, cpu = time.perf_counter(), time.process_time()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
        share = (time.process_time() - cpu) / (time.perf_counter() - wall) if CPU_CLOCK else 1.0
    return min(share, 1.0) * sum(e.self_cpu_time_total for e in prof.key_averages() if e.key in GEMM_OPS) / 1e3 / n


def paired_ms(fn, n: int, repeats: int, stat=statistics.median) -> tuple[float, float, float]:
    """(wall, GEMMs, outside) per token over `repeats` pairs of one timed and one profiled generation
    run back to back. `stat` median: the median of each pair's difference, taken under one load (another
    process's bursts move both sides of it). `stat` min: the least-disturbed wall time minus the
    least-disturbed GEMM time, what a quiet machine would give where the load never lets up."""
    fn()
    walls, gemms = [], []
    for _ in range(repeats):
        walls.append(_once_ms(fn, n))
        gemms.append(gemm_ms(fn, n))
    if stat is min:
        return min(walls), min(gemms), min(walls) - min(gemms)
    return stat(walls), stat(gemms), stat([w - g for w, g in zip(walls, gemms)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny models: proves the script runs")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--threads", default="1,2", help="torch thread counts to run, comma-separated (default 1,2)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall time, or each time scaled to this process's share of the core (a shared machine; 1 thread)")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="median over the repeats, or the least-disturbed run (a machine under load)")
    args = ap.parse_args()
    global CPU_CLOCK
    CPU_CLOCK = args.clock == "cpu"
    stat = min if args.stat == "min" else statistics.median
    p = QUICK if args.quick else FULL
    rows = []
    with torch.inference_mode():
        for kind in ("translator", "lm"):
            generation_of, n, layers = job(p, kind)
            full_fn, one_fn = generation_of(n), generation_of(1)  # the same model: one built, not two
            thin_of, _, _ = job(thin(p, kind), kind)
            thin_fn = thin_of(n)
            for threads in (int(t) for t in args.threads.split(",")):
                torch.set_num_threads(threads)
                wall, gemm, rest = paired_ms(full_fn, n, args.repeats, stat)
                # one token: what a generation pays once (prompt or encoder, weight copies) and its
                # first step; the difference is what each further token costs outside the GEMMs
                _, _, rest_1 = paired_ms(one_fn, 1, args.repeats, stat)
                marginal = (rest * n - rest_1) / (n - 1)
                thin_wall = wall_ms(thin_fn, n, args.repeats, stat)
                thin_gemv = None
                if own_gemv.available():
                    decode_gemm.FORCE = "gemv"
                    try:
                        thin_gemv = wall_ms(thin_fn, n, args.repeats, stat)
                    finally:
                        decode_gemm.FORCE = None
                rows.append((kind, threads, wall, gemm, rest, rest / layers, marginal, marginal / layers,
                             thin_wall, thin_wall / layers, thin_gemv, layers))
    print("| model | threads | ms / token | GEMMs (profiled) | outside the GEMMs | per layer | "
          "outside the GEMMs, each further token | per layer | thin model (d_model 16) | per layer | "
          "thin model, GEMV route | per layer |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind, threads, wall, gemm, rest, per, marginal, marginal_per, thin_wall, thin_per, thin_gemv, layers in rows:
        gemv_cells = "— | —" if thin_gemv is None else f"{thin_gemv:.2f} | {thin_gemv / layers:.3f}"
        # ms to 0.001: a thin model's GEMMs under load take ~0.005 ms a token, which 0.01 printed as 0
        print(f"| {kind} | {threads} | {wall:.3f} | {gemm:.3f} | {rest:.3f} | {per:.3f} | {marginal:.2f} |"
              f" {marginal_per:.3f} | {thin_wall:.2f} | {thin_per:.3f} | {gemv_cells} |")


if __name__ == "__main__":
    main()
