"""Learning-rate schedules: the paper's warmup ("noam") schedule, cosine decay, and warmup-stable-decay.

The 2017 paper §5.3:  lrate = d_model^−0.5 · min(step^−0.5, step · warmup_steps^−1.5)
— a linear rise for `warmup` steps, then decay as 1/sqrt(step). Post-LN Transformers need the
warmup: without it the early, large updates through the un-normalised residual path diverge
(seed 000 §4.4). Cosine (with the same linear warmup) is the common modern alternative.

Each schedule is a plain function of the 1-based update number, wrapped in PyTorch's
`LambdaLR` (optimiser lr fixed at 1.0, so the lambda *is* the rate) whose state is one counter:
resuming restores it exactly.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from ..errors import ConfigError


def noam(step: int, d_model: int, warmup: int, factor: float = 1.0) -> float:
    """The paper's rate for update number `step` (1-based)."""
    step = max(step, 1)
    return factor * d_model ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)


def cosine(step: int, peak: float, warmup: int, total: int, min_ratio: float = 0.1) -> float:
    """Linear warmup to `peak`, then half a cosine down to peak · min_ratio at `total`."""
    step = max(step, 1)
    if step <= warmup:
        return peak * step / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress)))


def rsqrt(step: int, peak: float, warmup: int) -> float:
    """Linear warmup to `peak`, then decay as 1/sqrt(step): the paper's shape with an explicit peak.

    `noam` at d_model 128 and warmup 400 peaks at 4.4e-3, too high for real data (issue 10:
    validation exact match stuck at 0); naming the peak keeps the shape and sets the height.
    It needs no total step count, so it suits a run limited by minutes.
    """
    step = max(step, 1)
    return peak * min(step / warmup, (warmup / step) ** 0.5)


WSD_DECAY = 0.2  # the last fifth of the budget is the decay phase (Hägele et al. 2024: as good as cosine)


def wsd(step: int, peak: float, warmup: int, progress: float, min_ratio: float = 0.0) -> float:
    """Warmup, stable, decay: linear warmup to `peak`, `peak` until `progress` (the share of the
    run's budget spent, 0…1) reaches 1 − WSD_DECAY, then linearly down to peak · min_ratio at 1.

    A run limited by minutes does not know its last step, so cosine cannot be used; 1/sqrt(step)
    decays from the start whatever the budget (measured on CMUdict G2P, 2 cores, 30 min: at 2e-4
    by step 10k its valid exact match stalled at 0.60, while a constant 1e-3 kept improving).
    The budget's progress — steps or minutes, whichever is nearer its limit — puts the decay at
    the end, where it gives its drop in loss (Hu et al. 2024, MiniCPM; Hägele et al. 2024)."""
    step = max(step, 1)
    if step <= warmup:
        return peak * step / warmup
    start = 1.0 - WSD_DECAY
    if progress <= start:
        return peak
    return peak * (min_ratio + (1 - min_ratio) * max(0.0, 1.0 - (progress - start) / WSD_DECAY))


def rate_function(cfg, d_model: int, progress: Callable[[], float] | None = None) -> Callable[[int], float]:
    """The rate as a function of the 1-based update number, for a TrainConfig; `progress()` is the
    share of the run's budget spent (the `wsd` schedule's clock)."""
    if cfg.schedule == "noam":
        return lambda s: noam(s, d_model, cfg.warmup, cfg.noam_factor)
    if cfg.schedule == "cosine":
        if cfg.max_steps is None:
            raise ConfigError("schedule='cosine' needs --max-steps (it decays to the last step)")
        return lambda s: cosine(s, cfg.lr, min(cfg.warmup, cfg.max_steps), cfg.max_steps, cfg.min_lr_ratio)
    if cfg.schedule == "rsqrt":
        return lambda s: rsqrt(s, cfg.lr, cfg.warmup)
    if cfg.schedule == "wsd":
        clock = progress or (lambda: 0.0)
        return lambda s: wsd(s, cfg.lr, cfg.warmup, clock())  # down to 0, as in the papers cited
    return lambda s: cfg.lr  # constant


def make_scheduler(optimizer: torch.optim.Optimizer, cfg, d_model: int,
                   progress: Callable[[], float] | None = None) -> torch.optim.lr_scheduler.LambdaLR:
    """LambdaLR whose i-th value (0-based, as PyTorch counts) is the rate of update i + 1."""
    rate = rate_function(cfg, d_model, progress)
    for group in optimizer.param_groups:
        group["lr"] = 1.0
        group["initial_lr"] = 1.0
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: rate(i + 1))
