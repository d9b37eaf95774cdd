"""Training-step speed as a fraction of this machine's measured GEMM peak (issue 32 §3).

For each model size the auto recipe picks on the development data (train/recipe.py: d_model 128,
3 + 3 layers for the pairs, 4 layers and batch 16 windows for the character LM) and two wider
ones, the trainer's own pieces — `load_task`, `build_model`, `build_optimizer` (fused AdamW),
the length-bucketed `BatchStream`, `next_micro_batches` and `train_step` of train/loop.py — run
steps and report:

- peak: the best torch.mm float32 GFLOP/s over square sizes 256–2048 at this thread count (MKL on
  an AMD CPU falls to a third of its speed from 1024 up, so one large size would understate it),
  and on the step's own GEMM shapes (each timed alone: what its GEMMs could reach if nothing else ran);
- tokens/s: target tokens (the trainer's count) and computed positions (padding included), the
  median of `--repeats` chunks;
- MFU: the step's matrix-product FLOPs (x·W GEMMs and attention's two batched products, forward
  and backward, counted from the profiled shapes) per second over that peak; also the x·W GEMMs
  alone, and the textbook 6 · parameters · target tokens/s;
- where the step's time goes: torch.profiler self CPU time grouped by operator, the rest of the
  wall time (Python, autograd's bookkeeping, dispatch) as "outside operators";
- padding: the share of computed positions that are padding over one epoch of the trainer's
  batches, of pools sorted by the longer side only (the trainer before), and of a whole-epoch length
  sort (the least any batching of these examples can pad); and the tokens/s of the two batchings;
- bf16: the same steps from the same seed under autocast, tokens/s and the mean loss of the last
  steps against float32's.

Every before/after ratio is an A/B in one process: the two arms' chunks interleaved (`interleaved`),
because another process on the machine's other core changes this one's speed by up to 2×.

Measure pinned to one core with one thread (the trainer's small-model setting when another job
shares the machine):

    taskset -c 0 env PYTHONPATH=src .venv/bin/python bench/train_step.py --data DIR --threads 1

DIR holds bench/real/prepare.py's files (pinyin-train.tsv, g2p-train.tsv, kana-train.tsv,
en-train.txt). Writes --out (JSON) and prints a Markdown table; `--table JSON` prints an earlier
run's table again. ~13 min on one core.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from glassformer.nn import build_model
from glassformer.train import TrainConfig
from glassformer.train.batching import BatchStream, bucket_key, epoch_batches, example_length
from glassformer.train.loop import Runtime, build_optimizer, next_micro_batches, seed_everything, train_step
from glassformer.train.recipe import choose
from glassformer.train.tasks import default_model_config, load_task, raw_splits

DATASETS = {"pinyin": ("tsv", "pinyin-train.tsv"), "g2p": ("tsv", "g2p-train.tsv"),
            "kana": ("tsv", "kana-train.tsv"), "lm-en": ("lm", "en-train.txt")}
WIDER = {256: dict(d_model=256, n_heads=4, d_ff=1024), 512: dict(d_model=512, n_heads=8, d_ff=2048)}
GEMM_OPS = ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm", "aten::baddbmm", "mkldnn::_linear_pointwise")
ATTENTION = ("scaled_dot_product", "flash_attention")
# nn/fused.py's autograd Functions: their events' self time is the kernel's (nn/fused.cpp is no ATen operator)
FUSED = ("_RMSNorm", "_SwiGLU", "_Rotary")
OPTIMIZER = ("_fused_adamw", "_foreach", "aten::norm", "linalg_vector_norm", "aten::zero_", "clamp")
ELEMENTWISE = ("layer_norm", "gelu", "relu", "softmax", "dropout", "native_dropout", "add", "mul", "sub", "div",
               "exp", "log", "sum", "amax", "mean", "gather", "scatter", "where", "masked_fill", "embedding",
               "index", "cat", "copy_", "clone", "fill_", "ne", "eq", "bernoulli", "pow", "neg", "sqrt")


@dataclass
class Setup:
    name: str
    cfg: TrainConfig
    model_config: object
    data: object
    overrides: dict


def setup(name: str, data_dir: Path, minutes: float, threads: int, width: dict | None = None) -> Setup:
    """The run `glassformer train --task T --data F --max-minutes M --threads N` would make (auto recipe),
    optionally with a wider model."""
    task, file = DATASETS[name]
    cfg = TrainConfig(task=task, data=str(data_dir / file), out="/tmp/unused", max_minutes=minutes,
                      recipe="auto", schedule="wsd", quiet=True)
    # the recipe's pre-probe constant for its dropout rule: a start-up probe here would make the rows'
    # models depend on the machine's load at that second
    r = choose(task, raw_splits(cfg), minutes, tokens_per_minute=400_000)
    cfg = cfg.replace(**{**r.train, "threads": threads, "bf16": False})  # float32; bf16 is its own arm
    overrides = {**r.model, **(width or {})}
    data = load_task(cfg)
    return Setup(name, cfg, default_model_config(data, **overrides), data, overrides)


class Arm:
    """One training run of the bench: a fresh model, optimiser and batch stream, with its own RNG state
    (two arms stepped in turn draw the dropout masks each would draw alone)."""

    def __init__(self, s: Setup, bf16: bool = False, seed: int = 0, sort_key=bucket_key):
        self.s, self.cfg = s, s.cfg.replace(bf16=bf16)
        seed_everything(seed)
        self.model = build_model(s.model_config).train()
        self.optimizer = build_optimizer(self.model, self.cfg)
        for g in self.optimizer.param_groups:
            g["lr"] = self.cfg.lr  # the schedule's held rate (wsd): the same numbers every step
        self.train_set = s.data.encoded["train"]
        self.stream = BatchStream([sort_key(e) for e in self.train_set], self.cfg.batch_size, self.cfg.seed)
        self.rng = torch.get_rng_state()
        self.losses: list[float] = []

    def step(self) -> tuple[int, int]:
        """One optimiser step of the trainer; (target tokens, computed positions)."""
        torch.set_rng_state(self.rng)
        micro = next_micro_batches(self.stream, self.train_set, self.s.model_config, self.cfg)
        loss, n = train_step(self.model, self.model, self.optimizer, micro, self.cfg, self.s.model_config.pad_id,
                             Runtime())
        self.rng = torch.get_rng_state()
        self.losses.append(loss)
        return n, sum(t.numel() for b in micro for k, t in b.items() if k in ("src", "tgt_in", "inp"))

    def chunk(self, steps: int) -> tuple[float, int, int]:
        """(seconds, target tokens, positions) of `steps` steps."""
        tokens = positions = 0
        start = time.perf_counter()
        for _ in range(steps):
            n, p = self.step()
            tokens, positions = tokens + n, positions + p
        return time.perf_counter() - start, tokens, positions


def run_steps(s: Setup, steps: int, profile: bool = False, warmup: int = 10, repeats: int = 1):
    """Optimiser steps from a fresh model: `warmup` untimed (the GEMM route table fills, nn/routes.py),
    then `repeats` timed chunks of `steps`. Returns (chunks as (seconds, target tokens, computed
    positions, GEMM GFLOP/s measured just before the chunk), profiler of the first chunk or None).
    The peak beside each chunk is there because the other core's work slows this one by up to 2×
    (shared caches, memory): a chunk is compared with what a GEMM could do at that moment."""
    arm = Arm(s)
    for _ in range(warmup):
        arm.step()
    chunks, prof = [], None
    for r in range(repeats):
        if profile and r == 0:
            prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True)
            with prof:
                chunks.append((*arm.chunk(steps), 0.0))
            continue
        peak = mm_gflops(256, 256, 256, 0.1)
        chunks.append((*arm.chunk(steps), peak))
    return chunks, prof


def interleaved(arms: dict, steps: int, repeats: int, warmup: int = 10) -> dict:
    """Chunks of the arms in turn (A B A B …, the machine's load shared alike); per arm the median
    tokens/s, and its tokens/s over the first arm's in the chunk before (the median of those ratios)."""
    for arm in arms.values():
        for _ in range(warmup):
            arm.step()
    times: dict[str, list] = {name: [] for name in arms}
    for _ in range(repeats):
        for name, arm in arms.items():
            times[name].append(arm.chunk(steps))
    first = next(iter(arms))
    return {name: {"tokens_per_s": statistics.median(c[1] / c[0] for c in cs),
                   "speedup": statistics.median((c[1] / c[0]) / (f[1] / f[0]) for f, c in zip(times[first], cs)),
                   "losses": arms[name].losses} for name, cs in times.items()}


def median_rate(chunks: list, steps: int) -> tuple[float, float, float, float]:
    """(seconds per step, target tokens/s, positions/s, peak then) of the chunk with the median
    tokens/s (another process on the machine's other core makes single chunks vary by up to 2×)."""
    sec, tok, pos, peak = sorted(chunks, key=lambda c: c[1] / c[0])[len(chunks) // 2]
    return sec / steps, tok / sec, pos / sec, peak


# ---- FLOPs of the matrix products, from the profiled shapes ----
def gemm_flops(name: str, shapes: list) -> tuple[float, tuple | None]:
    """(FLOPs, (M, K, N) or None) of one profiled matrix-product call."""
    try:
        if name in ("aten::mm",):
            (m, k), (_, n) = shapes[0], shapes[1]
        elif name in ("aten::addmm", "aten::addmm_"):
            (m, k), (_, n) = shapes[1], shapes[2]
        elif name == "mkldnn::_linear_pointwise":
            (m, k), (n, _) = shapes[0][-2:] if len(shapes[0]) > 2 else shapes[0], shapes[1]
        elif name in ("aten::bmm", "aten::baddbmm"):
            a, b = (shapes[0], shapes[1]) if name == "aten::bmm" else (shapes[1], shapes[2])
            return 2.0 * a[0] * a[1] * a[2] * b[2], None
        else:
            return 0.0, None
    except (ValueError, IndexError, TypeError):
        return 0.0, None
    return 2.0 * m * k * n, (m, k, n)


def attention_flops(name: str, shapes: list) -> float:
    """SDPA on CPU: forward QKᵀ and P·V (4·B·H·L·S·d); backward five products of that size (10·…).
    The forward's operands are (q, k, v, …), the backward's (grad_out, q, k, v, …)."""
    if "scaled_dot_product" not in name and "flash_attention" not in name:
        return 0.0
    backward = "backward" in name
    q, k = (shapes[1], shapes[2]) if backward else (shapes[0], shapes[1])
    if len(q) != 4 or len(k) != 4:
        return 0.0
    b, h, L, d = q
    return (10.0 if backward else 4.0) * b * h * L * k[2] * d


def category(name: str) -> str:
    if name in GEMM_OPS:
        return "gemm"
    if any(a in name for a in ATTENTION):
        return "attention"
    if any(o in name for o in OPTIMIZER) or name.startswith("Optimizer."):
        return "optimizer+clip"
    if name.startswith("autograd::") or name.endswith("Backward0") or name.endswith("Backward1"):
        return "autograd nodes"
    if name.removesuffix("Backward") in FUSED or (name.startswith("aten::") and any(e in name for e in ELEMENTWISE)):
        return "elementwise (norm, act, loss, masks)"
    if name.startswith("aten::") or "::" in name:
        return "other operators"
    return "labels"  # record_function ranges (their self time is dispatch)


def profile_table(prof, steps: int, wall_s: float) -> tuple[dict, float, list]:
    """(ms per step by category, matrix-product FLOPs per step, GEMM shapes with counts)."""
    ms: dict[str, float] = {}
    flops = 0.0
    shapes: dict[tuple, int] = {}
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CPU:
            continue
        c = category(ev.name)
        ms[c] = ms.get(c, 0.0) + ev.self_cpu_time_total / 1000 / steps
        f, mkn = gemm_flops(ev.name, ev.input_shapes)
        if f == 0.0:
            f = attention_flops(ev.name, ev.input_shapes)
        flops += f
        if mkn is not None:
            shapes[mkn] = shapes.get(mkn, 0) + 1
    ms.pop("labels", None)
    inside = sum(ms.values())
    ms["outside operators (Python, dispatch)"] = max(0.0, wall_s * 1000 - inside)
    per_step = [(*k, v / steps) for k, v in shapes.items()]
    return ms, flops / steps, sorted(per_step, key=lambda r: -r[0] * r[1] * r[2] * r[3])


# ---- peak ----
def mm_gflops(m: int, k: int, n: int, seconds: float = 0.3) -> float:
    a, b = torch.randn(m, k), torch.randn(k, n)
    out = torch.empty(m, n)
    torch.mm(a, b, out=out)
    reps, t0 = 0, time.perf_counter()
    best = float("inf")
    while time.perf_counter() - t0 < seconds or reps < 3:
        t = time.perf_counter()
        torch.mm(a, b, out=out)
        best = min(best, time.perf_counter() - t)
        reps += 1
    return 2.0 * m * k * n / best / 1e9


def shape_peak(shapes: list) -> float:
    """GFLOP/s the step's GEMM shapes reach when each runs alone (count-weighted)."""
    flops = sum(2.0 * m * k * n * c for m, k, n, c in shapes)
    secs = sum(2.0 * m * k * n * c / (mm_gflops(m, k, n, 0.05) * 1e9) for m, k, n, c in shapes)
    return flops / secs / 1e9 if secs else 0.0


# ---- padding ----
def padding_share(s: Setup) -> dict:
    """Share of computed positions that are padding over one epoch of batches: the trainer's (pools
    sorted by `bucket_key`), pools sorted by the longer side only (the trainer before issue 32 §3),
    and the whole epoch sorted (the floor for any batching of these examples into this batch size)."""
    train_set = s.data.encoded["train"]
    if s.data.kind == "lm":
        parts = [(len(e[0]) - 1,) for e in train_set]
    else:  # the decoder reads <bos> y and predicts y <eos>: one more position than the target
        parts = [(len(src), len(tgt) + 1) for src, tgt in train_set]

    def share(batches: list[list[int]]) -> float:
        real = computed = 0
        for b in batches:
            for side in range(len(parts[0])):
                col = [parts[i][side] for i in b]
                real += sum(col)
                computed += max(col) * len(col)
        return 1.0 - real / computed
    bs, seed = s.cfg.batch_size, s.cfg.seed
    order = sorted(range(len(parts)), key=lambda i: parts[i])
    return {"trainer": share(epoch_batches([bucket_key(e) for e in train_set], bs, seed, 0)),
            "longer_side": share(epoch_batches([example_length(e) for e in train_set], bs, seed, 0)),
            "sorted_epoch": share([order[i:i + bs] for i in range(0, len(order), bs)])}


def machine_peak() -> float:
    """fp32 GEMM peak of this thread count: the best torch.mm GFLOP/s over square sizes 256–2048 (MKL on
    this AMD CPU is at ~90 GFLOP/s up to 512 and falls to ~35 from 1024, so one size would understate it)."""
    return max(mm_gflops(n, n, n, 0.3) for n in (256, 512, 1024, 2048))  # 256 is the chunks' probe too


def measure(s: Setup, steps: int, repeats: int, bf16_steps: int, peak: float) -> dict:
    params = sum(p.numel() for p in build_model(s.model_config).parameters())
    chunks, prof = run_steps(s, steps, profile=True, repeats=repeats + 1)
    psec = chunks[0][0] / steps  # the profiled chunk (the profiler slows small operators)
    sec, tokens_s, positions_s, _ = median_rate(chunks[1:], steps)
    ms, flops, shapes = profile_table(prof, steps, psec)
    mfu_now = statistics.median(flops * steps / c[0] / 1e9 / c[3] for c in chunks[1:])
    gemm_flops_only = sum(2.0 * m * k * n * c for m, k, n, c in shapes)  # per step (counts are per step)
    row = {
        "name": s.name, "d_model": s.model_config.d_model, "n_layers": s.model_config.n_layers,
        "d_ff": s.model_config.d_ff, "batch_size": s.cfg.batch_size, "dropout": s.model_config.dropout,
        "params": params, "ms_per_step": 1000 * sec, "tokens_per_s": tokens_s, "positions_per_s": positions_s,
        "chunk_tokens_per_s": [c[1] / c[0] for c in chunks[1:]], "chunk_peak_gflops": [c[3] for c in chunks[1:]],
        "mfu_vs_peak_then": mfu_now,
        "step_gflop": flops / 1e9, "peak_gflops": peak, "peak_now_gflops": machine_peak(),
        "shape_peak_gflops": shape_peak(shapes[:40]),
        "mfu": flops / sec / 1e9 / peak, "mfu_6nt": 6 * params * tokens_s / 1e9 / peak,
        "mfu_linear_only": gemm_flops_only / sec / 1e9 / peak,  # without attention's products
        "profile_ms": ms, "profiled_ms_per_step": 1000 * psec, "gemm_shapes": shapes[:12],
        "gemm_gflops_in_step": gemm_flops_only / max(ms.get("gemm", 0), 1e-9) / 1e6,
        "padding": padding_share(s),
    }
    if s.data.kind == "seq2seq" and s.model_config.d_model <= 256:  # pools sorted by the longer side vs bucket_key
        res = interleaved({"longer_side": Arm(s, sort_key=example_length), "trainer": Arm(s)}, steps, repeats + 1)
        row["bucketing"] = {"longer_side_tokens_per_s": res["longer_side"]["tokens_per_s"],
                            "trainer_tokens_per_s": res["trainer"]["tokens_per_s"],
                            "speedup": res["trainer"]["speedup"]}
    if bf16_steps:  # fp32 and bf16 chunks in turn from the same seed; the loss over the last fifth of steps
        per = max(2, bf16_steps // 6)  # a longer comparison warms up longer: each new batch shape builds
        # its kernels (oneDNN's bf16 primitives) the first time it is seen
        res = interleaved({"fp32": Arm(s), "bf16": Arm(s, bf16=True)}, per, 6, warmup=max(10, per))
        tail = max(5, len(res["fp32"]["losses"]) // 5)
        f_losses, b_losses = res["fp32"]["losses"], res["bf16"]["losses"]
        row["bf16"] = {"steps": len(f_losses), "fp32_tokens_per_s": res["fp32"]["tokens_per_s"],
                       "bf16_tokens_per_s": res["bf16"]["tokens_per_s"], "bf16_speedup": res["bf16"]["speedup"],
                       "fp32_loss_tail": statistics.mean(f_losses[-tail:]),
                       "bf16_loss_tail": statistics.mean(b_losses[-tail:]),
                       "fp32_loss_tail_sd": statistics.stdev(f_losses[-tail:])}
    return row


def markdown(rows: list[dict]) -> str:
    head = ("| model | params | ms/step | target tok/s | MFU (all products) | MFU (x·W only) | 6NT MFU | GEMMs |"
            " attention | elementwise | optimizer | autograd + outside ops | padding (trainer / longer side / sorted) |"
            " tok/s bucket_key ÷ longer side | bf16 ÷ fp32 tok/s |"
            " loss fp32 / bf16 |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        ms = r["profile_ms"]
        tot = sum(ms.values())

        def pct(*keys):
            return f"{100 * sum(ms.get(k, 0) for k in keys) / tot:.0f}%"
        b = r.get("bf16")
        lines.append(
            f"| {r['name']} d{r['d_model']}×{r['n_layers']} b{r['batch_size']} | {r['params'] / 1e6:.2f}M |"
            f" {r['ms_per_step']:.1f} | {r['tokens_per_s']:,.0f} | {100 * r['mfu']:.1f}% |"
            f" {100 * r['mfu_linear_only']:.1f}% | {100 * r['mfu_6nt']:.1f}% |"
            f" {pct('gemm')} | {pct('attention')} | {pct('elementwise (norm, act, loss, masks)')} |"
            f" {pct('optimizer+clip')} |"
            f" {pct('autograd nodes', 'other operators', 'outside operators (Python, dispatch)')} |"
            f" {100 * r['padding']['trainer']:.0f}% / {100 * r['padding']['longer_side']:.0f}%"
            f" / {100 * r['padding']['sorted_epoch']:.0f}% |"
            + (f" {r['bucketing']['speedup']:.2f} |" if "bucketing" in r else " – |")
            + (f" {b['bf16_speedup']:.2f} | {b['fp32_loss_tail']:.3f} / "
               f"{b['bf16_loss_tail']:.3f} (sd {b['fp32_loss_tail_sd']:.3f}) |" if b else " – | – |"))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=None, help="folder with bench/real/prepare.py's files")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--minutes", type=float, default=10.0, help="the budget the recipe is asked for (dropout)")
    ap.add_argument("--steps", type=int, default=20, help="timed steps per chunk")
    ap.add_argument("--repeats", type=int, default=3, help="timed chunks per model (the median is reported)")
    ap.add_argument("--bf16-steps", type=int, default=60, help="steps of the fp32/bf16 comparison (0: skip)")
    ap.add_argument("--only", default=None, help="comma-separated row names, e.g. pinyin,lm-en")
    ap.add_argument("--out", type=Path, default=Path("bench/results/train_step.json"))
    ap.add_argument("--table", type=Path, default=None, help="print the table of an earlier run's JSON and stop")
    args = ap.parse_args()
    if args.table is not None:
        print(markdown(json.loads(args.table.read_text())["rows"]))
        return
    if args.data is None:
        ap.error("--data DIR is needed (bench/real/prepare.py DIR writes the datasets)")
    torch.set_num_threads(args.threads)
    plan = [("pinyin", None), ("g2p", None), ("kana", None), ("lm-en", None),
            ("pinyin", 256), ("pinyin", 512), ("lm-en", 256)]
    rows = []
    peak = machine_peak()
    for name, width in plan:
        label = name if width is None else f"{name}@{width}"
        if args.only and label not in args.only.split(","):
            continue
        s = setup(name, args.data, args.minutes, args.threads, WIDER.get(width))
        s.name = label
        steps = args.steps if width != 512 else max(10, args.steps // 2)
        rows.append(measure(s, steps, args.repeats, args.bf16_steps if width != 512 else 0, peak))
        print(markdown(rows[-1:]).splitlines()[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"threads": args.threads, "peak_gflops": peak, "rows": rows}, indent=1))
    print(markdown(rows))


if __name__ == "__main__":
    main()
