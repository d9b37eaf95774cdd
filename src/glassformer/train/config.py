"""Frozen, validated training configuration (the paper's §5 training regime, plus options).

`TrainConfig` holds everything about *how* a model is trained (the model's own shape lives in
`ModelConfig`). Defaults follow "Attention Is All You Need" §5.3–5.4: Adam with β = (0.9, 0.98),
ε = 1e-9, the warmup ("noam") schedule and label smoothing 0.1. A bad value stops at
construction with one line naming the field.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..config import StrictConfig
from ..errors import ConfigError

DIGIT_TASKS = ("copy", "reverse", "sort", "add")  # built-in digit tasks: one shared vocabulary
TASKS = ("zh-en", *DIGIT_TASKS, "tsv", "lm")
SCHEDULES = ("noam", "rsqrt", "cosine", "wsd", "constant")
RECIPES = ("paper", "auto")
TOKENIZERS = ("char", "word", "jieba", "bpe", "unigram")
MONITORS = ("loss", "exact_match")


def _check(ok: bool, message: str) -> None:
    if not ok:
        raise ConfigError(message)


def _positive(name: str, value: Any, allow_none: bool = False, integer: bool = True) -> None:
    if value is None and allow_none:
        return
    kind = int if integer else (int, float)
    _check(not isinstance(value, bool) and isinstance(value, kind) and math.isfinite(value) and value > 0,
           f"{name}={value!r} must be a positive {'integer' if integer else 'finite number'}")


@dataclass(frozen=True)
class TrainConfig(StrictConfig):
    """How to train: task and data, optimiser, schedule, batching, evaluation, limits."""

    _kind = "training"

    task: str = "zh-en"
    data: str | None = None  # a .tsv (task tsv) or .txt (task lm) file
    out: str = "runs/run"
    seed: int = 0
    # ---- limits: training stops at whichever comes first ----
    max_steps: int | None = None
    max_minutes: float | None = None
    # ---- tokenizers ----
    tokenizer: str | None = None  # None: the task's default; "char/word": source char, target word
    recipe: str = "paper"  # how the run was set up: "auto" (train/recipe.py) or the 2017 "paper" one
    vocab_size: int | None = None  # for bpe / unigram
    # ---- batching (length-bucketed, padded) ----
    batch_size: int = 64  # sequences per micro-batch
    accum_steps: int = 1  # micro-batches per optimiser step (gradient accumulation)
    block_size: int = 128  # language models: tokens per training window
    # ---- optimiser: AdamW (§5.3, with decoupled weight decay) ----
    schedule: str = "noam"
    lr: float = 1e-3  # peak rate for cosine/constant; noam computes its own (scaled by noam_factor)
    noam_factor: float = 1.0
    warmup: int = 400  # the paper uses 4000 for 100k steps; small tasks need far fewer
    min_lr_ratio: float = 0.1  # cosine ends at lr · min_lr_ratio (wsd at 0)
    beta1: float = 0.9
    beta2: float = 0.98
    eps: float = 1e-9
    weight_decay: float = 0.01
    label_smoothing: float = 0.1  # §5.4: ε_ls = 0.1
    clip_norm: float | None = 1.0
    bf16: bool = False
    device: str = "cpu"
    threads: int | None = None  # torch intra-op threads; None: 1 for the built-in tasks, else PyTorch's default
    threads_auto: bool = False  # threads chosen by --recipe auto: re-checked at each evaluation (threads.py)
    # the recipe's dropout, given from the end of the run's first tenth if its own rate then counts at least
    # dropout_passes passes over the data in the budget (train/dropout_rule.py); until then none
    dropout_auto: float | None = None
    dropout_passes: float | None = None
    # and a stronger dropout from dropout_strong_passes passes (an LM on a small text: recipe.py)
    dropout_strong: float | None = None
    dropout_strong_passes: float | None = None
    # ---- evaluation and early stopping ----
    eval_every: int = 200
    eval_size: int = 500  # at most this many held-out examples per evaluation
    patience: int | None = 5  # evaluations in a row with neither a better score nor a lower loss before
    # stopping (wsd never stops part-way down its decay: in its stable phase they start the decay early)
    monitor: str | None = None  # None: exact_match for seq2seq tasks, loss for language models
    stop_at: float | None = None  # stop as soon as the monitored exact match reaches this
    # averaging.py (paper §6.1): the mean of the last N evaluations' weights, kept as best/ if it validates better
    average_last: int | None = None
    log_every: int = 10
    quiet: bool = False

    def __post_init__(self) -> None:
        for name in ("data", "monitor", "tokenizer"):
            v = getattr(self, name)
            _check(v is None or isinstance(v, str), f"{name}={v!r} must be text or None")
        _check(self.task in TASKS, f"task={self.task!r} is not one of {', '.join(TASKS)}")
        _check(self.schedule in SCHEDULES, f"schedule={self.schedule!r} is not one of {', '.join(SCHEDULES)}")
        _check(self.tokenizer is None or (self.tokenizer.count("/") <= 1
                                          and all(k in TOKENIZERS for k in self.tokenizer.split("/"))),
               f"tokenizer={self.tokenizer!r} is not one of {', '.join(TOKENIZERS)}"
               " (or SOURCE/TARGET, e.g. char/word)")
        # tasks with one tokenizer (a text, or the digit tasks' shared symbols) cannot take a pair of kinds
        one_side = self.task == "lm" or self.task in DIGIT_TASKS
        if one_side and self.tokenizer is not None and "/" in self.tokenizer:
            src_kind, _, tgt_kind = self.tokenizer.partition("/")
            _check(src_kind == tgt_kind, f"tokenizer={self.tokenizer!r}: task {self.task!r} has one tokenizer "
                   f"for both sides (one vocabulary), so a pair of kinds cannot apply; give one, e.g. {src_kind!r}")
        _check(self.recipe in RECIPES, f"recipe={self.recipe!r} is not one of {', '.join(RECIPES)}")
        _check(self.monitor is None or self.monitor in MONITORS,
               f"monitor={self.monitor!r} is not one of {', '.join(MONITORS)}")
        _check(isinstance(self.out, str) and self.out.strip() != "", f"out={self.out!r} must be a folder path")
        for name in ("bf16", "quiet", "threads_auto"):
            _check(isinstance(getattr(self, name), bool), f"{name}={getattr(self, name)!r} must be true or false")
        if self.task in ("tsv", "lm"):
            _check(self.data is not None, f"task={self.task!r} needs a data file: pass --data PATH")
        _check(isinstance(self.seed, int) and not isinstance(self.seed, bool) and self.seed >= 0,
               f"seed={self.seed!r} must be a non-negative integer")
        for name in ("batch_size", "accum_steps", "block_size", "warmup", "eval_every", "eval_size", "log_every"):
            _positive(name, getattr(self, name))
        for name in ("max_steps", "vocab_size", "patience", "threads"):
            _positive(name, getattr(self, name), allow_none=True)
        for name in ("max_minutes", "clip_norm"):
            _positive(name, getattr(self, name), allow_none=True, integer=False)
        for name in ("lr", "noam_factor", "eps"):
            _positive(name, getattr(self, name), integer=False)
        # the dropout rule's tiers (dropout_rule.py): a rate and the passes it needs, given together
        for rate, need in (("dropout_auto", "dropout_passes"), ("dropout_strong", "dropout_strong_passes")):
            p, passes = getattr(self, rate), getattr(self, need)
            if p is None and passes is None:
                continue
            _check(isinstance(p, (int, float)) and not isinstance(p, bool) and 0 < p < 1,
                   f"{rate}={p!r} must be a dropout rate in (0, 1)")
            _check(isinstance(passes, (int, float)) and not isinstance(passes, bool) and passes > 0,
                   f"{need}={passes!r} must be a number of passes > 0")
        if self.dropout_auto is not None:
            _check(self.max_minutes is not None, "dropout_auto is decided from the run's rate over its first"
                   " tenth of --max-minutes; give max_minutes, or a fixed dropout instead")
        if self.dropout_strong is not None:
            _check(self.dropout_auto is not None and self.dropout_strong_passes >= self.dropout_passes,
                   "dropout_strong is a second tier of dropout_auto: give dropout_auto and dropout_passes, and"
                   " dropout_strong_passes no fewer than dropout_passes")
        for name in ("beta1", "beta2", "label_smoothing", "min_lr_ratio"):
            v = getattr(self, name)
            _check(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1, f"{name}={v!r} must be in [0, 1)")
        _check(isinstance(self.weight_decay, (int, float)) and math.isfinite(self.weight_decay)
               and self.weight_decay >= 0, f"weight_decay={self.weight_decay!r} must be a finite number >= 0")
        _check(self.stop_at is None or isinstance(self.stop_at, (int, float)) and not isinstance(self.stop_at, bool)
               and 0 < self.stop_at <= 1,
               f"stop_at={self.stop_at!r} must be an exact-match fraction in (0, 1]")
        _check(self.average_last is None or isinstance(self.average_last, int)
               and not isinstance(self.average_last, bool) and self.average_last >= 2,
               f"average_last={self.average_last!r} must be a number of checkpoints to average, at least 2 "
               "(or None: no averaging)")
        _check(isinstance(self.device, str) and (self.device in ("cpu", "cuda") or self.device.startswith("cuda:")),
               f"device={self.device!r} must be cpu, cuda or cuda:N")
        # every setting is used by the task or refused: a flag the task ignores would train something
        # other than what was asked, silently
        _check(self.data is None or self.task in ("tsv", "lm"),
               f"task={self.task!r} trains on its own built-in data and does not read data={self.data!r}; "
               "use task 'tsv' for a file of pairs or 'lm' for a text")
        if self.is_lm:
            _check(self.monitor != "exact_match", "monitor='exact_match' needs a translation task; a language "
                   "model is scored by its loss (monitor='loss')")
            _check(self.stop_at is None, f"stop_at={self.stop_at!r} stops at an exact match, which a language "
                   "model does not have; use max_steps or max_minutes")

    @property
    def is_lm(self) -> bool:
        return self.task == "lm"

    @property
    def monitored(self) -> str:
        return self.monitor or ("loss" if self.is_lm else "exact_match")

    # to_dict / from_dict / replace (unknown keys rejected) come from StrictConfig
