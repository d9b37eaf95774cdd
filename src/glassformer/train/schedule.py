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


MAX_PATIENCE_KEPT = 50  # WSDClock keeps 2 × max(patience, this) validation losses: enough for any patience
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


class WSDClock:
    """The wsd schedule's clock: the share of the run's budget spent (steps or minutes, whichever is
    nearer its limit), 0…1 — unless validation stalls in the stable phase (issue 32 §4).

    A stall there means more time at the peak rate no longer buys anything, and the decay — which is
    where WSD takes its drop in loss — would come only at the budget's end: on 245k tokens of pinyin
    (~60 passes in 30 minutes), validation made no new best from 13.0 to 15.1 min and only small,
    noisy ones at the peak rate after (its best, 86.0% valid exact match, at 20 min); the planned
    decay from 24 min gained nothing before early stopping cut it at 26 min (early stopping no longer
    counts in a decay: train/loop.py), and the run scored 85.9% test exact match, below the
    10-minute run's 87.3% (docs/real-data.md, "At 30 minutes: the development datasets"). So after
    `patience` validations with neither a lower loss nor a better score the decay starts there, as
    long in proportion as the planned one (WSD_DECAY / (1 − WSD_DECAY) of the budget spent: a fifth
    of the shortened run), and the run ends with it: the same 30 minutes then stalled at 13.8 min,
    decayed to 17.3 and scored 87.3%. Replayed on the validation logs of every 10- and 30-minute
    run of the suite, the rule would have fired in that pinyin run only: a run that keeps improving
    keeps its budget.

    A lowest loss and a best score on 500 held-out pairs are noisy: after a lucky one, `patience`
    validations can pass without beating it while the curve still falls. On G2P at 30 minutes that
    started the decay at 15.1 min although the mean of the last ten losses was 1.3% under the ten
    before's: 69.3% with that decay run to its end, against 72.3% and 72.6% for launches whose rule
    never fired. So the decay starts early only when, as well, the mean loss of the last `patience`
    validations is no lower than that of the `patience` before them: the curve has stopped falling,
    not merely missed its record. Replayed on every run logged in stops 49-51, that keeps the one
    early decay of a curve that rose (pinyin, 30 min, no dropout: +1 to +4% from 7.9 min; fired at
    10.0 min, as before) and drops G2P's false one; pinyin at 30 minutes with dropout, one launch
    each, side by side: the decay from 14.7 min instead of 8.8, 86.5% against 86.4% (a tie).
    """

    def __init__(self):
        self.spent = 0.0
        self.early_decay: tuple[float, float] | None = None  # (share spent at the stall, decay length)
        self.best_loss: float | None = None  # the lowest validation loss so far
        self.stalled = 0  # validations since the loss or the score last improved
        self.losses: list[float] = []  # the latest validation losses (2·patience of them are compared)

    def progress(self) -> float:
        if self.early_decay is None:
            return self.spent
        since, length = self.early_decay
        return (1.0 - WSD_DECAY) + WSD_DECAY * min(1.0, (self.spent - since) / length)

    def stable(self) -> bool:
        """In the stable phase (or warmup): the rate has not started to decay."""
        return self.progress() < 1.0 - WSD_DECAY

    def validated(self, loss: float, better_score: bool, patience: int | None, past_warmup: bool) -> float | None:
        """Count a validation; where it is the `patience`-th in a row in the stable phase with neither
        a lower loss nor a better score, and the last `patience` losses average no lower than the
        `patience` before them, start the decay now and return its length (a share of the budget);
        otherwise None."""
        lower = self.best_loss is None or loss < self.best_loss
        self.best_loss = loss if lower else self.best_loss
        self.stalled = 0 if lower or better_score else self.stalled + 1
        self.losses = (self.losses + [loss])[-2 * max(patience or 0, MAX_PATIENCE_KEPT):]
        if patience is None or not past_warmup or not self.stable() or self.stalled < patience:
            return None
        if len(self.losses) < 2 * patience or (
                sum(self.losses[-patience:]) < sum(self.losses[-2 * patience:-patience])):
            return None  # the curve is still falling on average: a missed record is not a stall
        length = max(self.spent, 1e-9) * WSD_DECAY / (1.0 - WSD_DECAY)
        self.early_decay = (self.spent, length)
        return length

    def done(self) -> bool:
        """An early decay has run its course (a planned one ends with the budget itself)."""
        return self.early_decay is not None and self.progress() >= 1.0

    def state_dict(self) -> dict:
        return {"spent": self.spent, "early_decay": list(self.early_decay) if self.early_decay else None,
                "best_loss": self.best_loss, "stalled": self.stalled, "losses": list(self.losses)}

    def load_state_dict(self, state: dict) -> None:
        self.spent = float(state.get("spent", 0.0))
        self.early_decay = tuple(state["early_decay"]) if state.get("early_decay") else None
        self.best_loss, self.stalled = state.get("best_loss"), state.get("stalled", 0)
        self.losses = [float(x) for x in state.get("losses", [])]  # absent before the trend test


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
