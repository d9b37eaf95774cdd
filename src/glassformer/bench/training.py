"""Training step: glassformer's encoder-decoder against `torch.nn.Transformer` of the same shape.

Both sides do the same work per step: embed source and target (one shared table, sinusoidal
positions), 3 + 3 Post-LN layers with final norms, a head tied to the embedding, cross-entropy,
backward, one Adam step. Dropout is 0 on both so the step is deterministic work, not noise.
glassformer takes its loss from `targets=`, as its trainer does (the head fused with the
cross-entropy, nn/loss.py); a third side times it through materialised logits as well.
MFU = model FLOPs per step / step time / the machine's matmul peak measured in the same run.

The ratio depends on the allocator as well as on the model: materialised logits are hundreds of MB
of fresh memory per step, and with glibc's defaults every page of it is a page fault
(bench/allocator.py). So each side's page faults per step are counted, and the fp32 comparison runs
once more in a fresh process whose malloc keeps freed blocks (`keep_freed_memory`).
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch import nn

from ..config import ModelConfig
from ..nn import build_model
from .allocator import keep_freed_memory, page_faults
from .harness import interleaved, matmul_peak, top_ops

UNFUSED = "glassformer, logits then F.cross_entropy"
FULL = dict(d_model=256, n_heads=4, n_layers=3, d_ff=1024, vocab=8000, batch=32, seq=64, repeats=7)
QUICK = dict(d_model=64, n_heads=4, n_layers=1, d_ff=128, vocab=500, batch=4, seq=16, repeats=2)


def sinusoids(length: int, width: int) -> torch.Tensor:
    """The paper's PE table (sin on even, cos on odd features), for the reference side."""
    pos = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, width, 2, dtype=torch.float32) / width)
    pe = torch.zeros(length, width)
    pe[:, 0::2], pe[:, 1::2] = torch.sin(pos * freq), torch.cos(pos * freq)
    return pe


class TorchSeq2Seq(nn.Module):
    """The reference: nn.Embedding + sinusoids + nn.Transformer + tied output projection."""

    def __init__(self, vocab: int, d_model: int, n_heads: int, n_layers: int, d_ff: int, max_len: int = 512):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model)
        self.register_buffer("pe", sinusoids(max_len, d_model))
        self.tf = nn.Transformer(d_model, n_heads, n_layers, n_layers, d_ff, dropout=0.0, batch_first=True)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        s = self.embed(src) + self.pe[: src.shape[1]]
        t = self.embed(tgt) + self.pe[: tgt.shape[1]]
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1])
        out = self.tf(s, t, tgt_mask=mask, tgt_is_causal=True)
        return F.linear(out, self.embed.weight)


def glassformer_config(p: dict) -> ModelConfig:
    return ModelConfig(arch="encoder-decoder", vocab_size=p["vocab"], d_model=p["d_model"], n_heads=p["n_heads"],
                       n_layers=p["n_layers"], d_ff=p["d_ff"], dropout=0.0, final_norm=True,
                       norm_position="post", pe="sinusoidal")


def train_flops(p: dict) -> float:
    """Matmul FLOPs of one training step (forward ×3: the backward costs two forwards).

    Per token: 2·(weights it multiplies); attention adds 2·2·S_q·S_k·d per sequence and block.
    """
    d, f, L, V, B, S = p["d_model"], p["d_ff"], p["n_layers"], p["vocab"], p["batch"], p["seq"]
    tokens = B * S
    enc = L * (4 * d * d + 2 * d * f) * 2 * tokens + L * 4 * B * S * S * d
    dec = L * (8 * d * d + 2 * d * f) * 2 * tokens + L * 2 * 4 * B * S * S * d
    head = 2 * d * V * tokens
    return 3.0 * (enc + dec + head)


def _step_fn(model: nn.Module, src, tgt_in, tgt_out, vocab: int, amp: bool, own_loss: bool = False):
    """One training step. `own_loss`: the model computes its loss from `targets=` (glassformer's
    trainer does: the head fused with the cross-entropy, nn/loss.py), else logits + F.cross_entropy."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if amp else contextlib.nullcontext

    def step():
        with ctx():
            if own_loss:
                loss = model(src, tgt_in, targets=tgt_out)
            else:
                logits = model(src, tgt_in)
                loss = F.cross_entropy(logits.float().reshape(-1, vocab), tgt_out.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss
    return step


def _sides(p: dict, amp: bool):
    """The three sides' training steps on one batch, and glassformer's and the reference's models.

    glassformer's step computes its loss as its trainer does (`targets=`: the head fused with the
    cross-entropy, nn/loss.py); the reference as nn.Transformer's users do, logits then
    F.cross_entropy. A third side, glassformer through that same logits path and from the same
    weights, says how much of the ratio the fused loss makes. The same loss and gradients on every
    side."""
    torch.manual_seed(0)
    ours = build_model(glassformer_config(p)).train()
    ref = TorchSeq2Seq(p["vocab"], p["d_model"], p["n_heads"], p["n_layers"], p["d_ff"]).train()
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, p["vocab"], (p["batch"], p["seq"]), generator=g)
    tgt = torch.randint(4, p["vocab"], (p["batch"], p["seq"] + 1), generator=g)
    tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
    torch.manual_seed(0)
    unfused = build_model(glassformer_config(p)).train()
    steps = {"glassformer": _step_fn(ours, src, tgt_in, tgt_out, p["vocab"], amp, own_loss=True),
             "torch.nn.Transformer": _step_fn(ref, src, tgt_in, tgt_out, p["vocab"], amp),
             UNFUSED: _step_fn(unfused, src, tgt_in, tgt_out, p["vocab"], amp)}
    return steps, ours, ref


def faults_per_step(step) -> int | None:
    """Minor page faults during one call of `step` (None where the OS does not count them)."""
    before = page_faults()
    step()
    after = page_faults()
    return None if before is None else after - before


def kept_memory_run(p: dict, repeats: int) -> dict:
    """`run`'s three sides again, in this process with malloc keeping freed blocks
    (`python -m glassformer.bench.training kept`: a fresh process, so the setting reaches no other
    benchmark)."""
    kept = keep_freed_memory()
    sides, _, _ = _sides(p, False)
    t = interleaved(sides, repeats, warmup=1)
    ref_s = t["torch.nn.Transformer"].median
    out = {"malloc_keeps_freed_blocks": kept, "ratio": ref_s / t["glassformer"].median,
           "ratio_unfused_loss": ref_s / t[UNFUSED].median}
    for name, timing in t.items():
        out[name] = {**timing.to_dict(), "page_faults_per_step": faults_per_step(sides[name])}
    return out


def _kept_in_fresh_process(quick: bool) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS=str(torch.get_num_threads()))
    proc = subprocess.run([sys.executable, "-m", "glassformer.bench.training", "kept", "quick" if quick else "full"],
                          capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"the kept-memory training run failed ({proc.returncode}): {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run(quick: bool = False, amp: bool = False) -> dict:
    from ..nn.routes import onednn_bf16
    if amp and not quick and not onednn_bf16():
        # without AVX512_BF16 or AMX every bf16 product is emulated: on an AVX2-capped EPYC the full
        # section ran over 10 minutes without finishing, to measure a path no one would choose there
        return {"skipped": "this CPU has no native bf16 arithmetic (AVX512_BF16 or AMX; or it is capped below "
                           "them), so bf16 autocast would run emulated, slower than fp32; --quick still runs it"}
    p = QUICK if quick else FULL
    sides, ours, ref = _sides(p, amp)
    work = p["batch"] * p["seq"]
    names = tuple(sides)
    last: dict = {}  # each side's last loss
    t = interleaved(sides, p["repeats"], warmup=1, outputs=last)
    res = {name: {**timing.to_dict(), "rate": work / timing.median} for name, timing in t.items()}
    # the two glassformer sides start from the same weights and take the same steps: their last
    # losses agree to float32 rounding, or the fused loss is not the same loss
    res.update(unit="tokens/s", ratio=t[names[1]].median / t[names[0]].median,
               ratio_unfused_loss=t[names[1]].median / t[names[2]].median,
               fused_loss_abs_diff=float((last[names[0]] - last[names[2]]).detach().abs()))
    for name, step in sides.items():
        res[name]["page_faults_per_step"] = faults_per_step(step)
    if not amp:  # the same comparison where malloc reuses freed memory (no page faults to pay)
        res["malloc_kept"] = _kept_in_fresh_process(quick)
    peaks = matmul_peak(256 if quick else 1024, torch.bfloat16 if amp else torch.float32)
    peak = peaks["peak"]
    flops = train_flops(p)
    for side in names:
        res[side]["mfu"] = flops / res[side]["median_s"] / peak
    res.update(params={k: v for k, v in p.items() if k != "repeats"}, step_flops=flops,
               peak_flops=peak, peaks=peaks, precision="bf16 autocast" if amp else "fp32",
               glassformer_params=sum(t.numel() for t in ours.parameters()),
               reference_params=sum(t.numel() for t in ref.parameters()), profile=top_ops(sides["glassformer"]))
    return res


if __name__ == "__main__" and sys.argv[1:2] == ["kept"]:
    params = QUICK if sys.argv[2:3] == ["quick"] else FULL
    print(json.dumps(kept_memory_run(params, params["repeats"])))
