"""The training loop: teacher forcing, AdamW, warmup, label smoothing, clipping (paper §5).

One optimiser step = `accum_steps` micro-batches, each a forward pass with teacher forcing
(the decoder sees the reference prefix, seed §7.5), label-smoothed cross-entropy (§5.4),
backward; then gradient clipping, AdamW and the learning-rate schedule (§5.3). Every
`eval_every` steps the held-out split is scored, the best model saved to `best/` and the
resumable state to `checkpoint/`; `patience` evaluations in a row with neither a better score nor a
lower loss stop the run (wsd: start its decay, which ends the run).

The parts are separate functions so that DistributedDataParallel is a small change: wrap
`model` after `build_model`, give `BatchStream` the rank and world size, and let only rank 0
log and write (`Runtime.is_main`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch

from ..config import ModelConfig
from ..errors import GlassformerError, InputError
from ..nn import build_model
from ..limits import check_device, check_positions
from . import checkpoint as ckpt
from . import averaging, distributed, run_end, run_folder, selection
from .batching import ShiftingWindows, bucket_key, example_length
from .dropout_rule import DropoutDecision, set_dropout
from .evaluate import batch_loss, collate, evaluate
from .progress import Progress
from .schedule import WSDClock, make_scheduler
from .tasks import LM_SPLIT, TASK_THREADS, TaskData, default_model_config, lm_split_of, load_task
from .threads import ThreadWatch

DEFAULT_MAX_STEPS = 20000  # when neither --max-steps nor --max-minutes is given
clock = time.monotonic  # the run's clock (a test drives it by hand)

RESUME_KEYS = ("optimizer", "scheduler", "stream", "rng", "step", "tokens_seen", "best_score", "best_metrics",
               "train_config")  # what a checkpoint must hold for --resume


class TrainingDiverged(GlassformerError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


@dataclass
class Runtime:
    """Where this process sits in a (possibly distributed) run."""

    device: str = "cpu"
    rank: int = 0
    world: int = 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0


@dataclass
class TrainResult:
    run_dir: Path
    step: int
    stop_reason: str
    elapsed_s: float
    best: dict[str, Any] = field(default_factory=dict)  # held-out metrics of the best model
    test: dict[str, Any] = field(default_factory=dict)  # test-split metrics of the best model
    reloaded: dict[str, Any] = field(default_factory=dict)  # best/ read back and scored again (valid)
    baseline: dict[str, Any] | None = None  # the data's simple baseline (baselines.py), on the same splits
    verdict: dict[str, Any] = field(default_factory=dict)  # would more minutes help (verdict.py)
    averaged: dict[str, Any] = field(default_factory=dict)  # --average-last: the mean's score (averaging.py)
    selection: dict[str, Any] = field(default_factory=dict)  # an earlier best/ against the last (selection.py)


# ---- reproducibility ----
def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def rng_state() -> dict:
    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# ---- the pieces of one step ----
def build_optimizer(model: torch.nn.Module, cfg) -> torch.optim.AdamW:
    """AdamW (§5.3's Adam with decoupled weight decay); no decay on biases, gains and 1-D tensors."""
    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    # fused: one kernel over all parameters instead of ~8 small ops per tensor (the same update to
    # float rounding); PyTorch has it on CPU and CUDA only
    fused = all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in decay + no_decay)
    return torch.optim.AdamW(groups, lr=1.0, betas=(cfg.beta1, cfg.beta2), eps=cfg.eps, fused=fused or None)


def forward_backward(model, micro_batches: Sequence[dict], cfg, pad_id: int, device: str,
                     rt: Runtime | None = None) -> tuple[float, int]:
    """Accumulate gradients over micro-batches; return (mean smoothed loss per token, tokens).

    With several workers the tokens are those of the global batch; DDP averages gradients over
    workers, so each scales its loss by `world` to get the mean over all tokens.
    """
    rt = rt or Runtime(device=device)
    n_local = sum(int((b["tgt_out" if "tgt_out" in b else "out"] != pad_id).sum()) for b in micro_batches)
    n_total = int(distributed.all_sum(n_local, rt))
    total = 0.0
    for b in micro_batches:
        b = {k: v.to(device) for k, v in b.items()}
        with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16, enabled=cfg.bf16):
            loss_sum, _ = batch_loss(model, b, pad_id, cfg.label_smoothing)
        (loss_sum * rt.world / max(n_total, 1)).backward()  # every token weighs the same across micro-batches
        total += float(loss_sum.detach())
    return distributed.all_sum(total, rt) / max(n_total, 1), n_total


def next_micro_batches(stream, train_set: Sequence[tuple], model_config: ModelConfig, cfg) -> list[dict]:
    """The next optimiser step's `accum_steps` padded micro-batches, in the stream's order (an LM's
    windows cut for the epoch each batch belongs to: batching.ShiftingWindows)."""
    out = []
    for _ in range(cfg.accum_steps):
        batch = stream.next()
        examples = train_set.at_epoch(stream.epoch) if isinstance(train_set, ShiftingWindows) else train_set
        out.append(collate([examples[i] for i in batch], model_config))
    return out


def train_step(train_model, model, optimizer, micro_batches: Sequence[dict], cfg, pad_id: int,
               rt: Runtime) -> tuple[float, int]:
    """One optimiser step: gradients of `micro_batches`, clipped, then AdamW; (loss, tokens).

    A non-finite loss leaves the weights as they were (the caller stops the run). The schedule
    is stepped by the caller, which owns the run's clock. bench/train_step.py times this function.
    """
    optimizer.zero_grad(set_to_none=True)
    loss, n_tok = forward_backward(train_model, micro_batches, cfg, pad_id, rt.device, rt)
    if math.isfinite(loss):
        if cfg.clip_norm is not None:
            torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
        optimizer.step()
    return loss, n_tok


def _score(metrics: dict, monitor: str) -> tuple:
    """Bigger is better: (exact match, -loss) or (-loss,)."""
    if monitor == "exact_match":
        return (metrics.get("exact_match", 0.0), -metrics["loss"])
    return (-metrics["loss"],)


# records of a finished run, written again when it is resumed
FINISHED = ("baseline", "verdict", "valid-averaged", "selection")


class MetricsLog:
    """metrics.jsonl: one JSON object per line (train every log_every steps, each evaluation)."""

    def __init__(self, path: Path, resume_step: int | None, enabled: bool):
        self.path, self.enabled = path, enabled
        if not enabled:
            return
        if resume_step is None:
            path.write_text("", encoding="utf-8")
        elif path.exists():  # drop lines written after the checkpoint we resume from
            keep = [ln for ln in path.read_text(encoding="utf-8").splitlines()
                    if ln.strip() and json.loads(ln).get("step", 0) <= resume_step
                    and json.loads(ln).get("split") not in FINISHED]
            path.write_text("".join(ln + "\n" for ln in keep), encoding="utf-8")

    def write(self, record: dict) -> None:
        if self.enabled:
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")


# ---- the loop ----
def train(cfg, model_config: ModelConfig | None = None, data: TaskData | None = None, *,
          resume: bool = False, runtime: Runtime | None = None,
          callbacks: Sequence[Callable[[int, torch.nn.Module, float], None]] = (),
          model_overrides: dict | None = None, force: bool = False) -> TrainResult:
    """Train per `cfg` (a TrainConfig) into the run folder `cfg.out`; return the outcome.

    resume=True restores the run's own configs, tokenizers, weights, optimiser, schedule, RNG
    states and data position from `cfg.out/checkpoint/` (only the limits come from `cfg`; pass
    `data` again if the run was given its own), so an interrupted and resumed run ends with the
    weights of an uninterrupted one.
    `callbacks(step, model, loss)` run after each optimiser step. A folder that already holds
    a run is refused unless resume or force (run_folder.py); Ctrl-C saves and says how to resume.
    """
    threads_before = torch.get_num_threads()
    try:
        return _train(cfg, model_config, data, resume=resume, runtime=runtime, callbacks=callbacks,
                      model_overrides=model_overrides, force=force)
    finally:
        torch.set_num_threads(threads_before)  # the caller's setting again, whatever the run used


def _train(cfg, model_config, data, *, resume, runtime, callbacks, model_overrides, force) -> TrainResult:
    check_device(cfg.device)
    rt = runtime or distributed.runtime_from_env(cfg.device)  # torchrun sets RANK, WORLD_SIZE
    run_dir = Path(cfg.out)
    state = None
    if resume:
        saved = ckpt.load_checkpoint(run_dir / "checkpoint")
        run_folder.check_same_run(run_dir, cfg, saved.meta.get("train_config") or {}, saved.meta.get("data_sha256"))
        state = ckpt.load_train_state(run_dir / "checkpoint", RESUME_KEYS)
        from .config import TrainConfig
        was = state["train_config"]  # limits not given again are the run's own
        limits = {k: getattr(cfg, k) if getattr(cfg, k) is not None else was[k] for k in ("max_steps", "max_minutes")}
        cfg = TrainConfig.from_dict({**was, "out": cfg.out, "quiet": cfg.quiet, **limits,
                                     **({"data": cfg.data} if cfg.data is not None else {})})
        if cfg.data is not None and not Path(cfg.data).is_file():
            # runs made before data paths were stored absolute hold the path as typed, relative to
            # the folder the run was started from
            raise InputError(f"{run_dir} was trained on --data {cfg.data}, which is not a file from here "
                             f"({Path.cwd()}); resume with --data PATH naming that file")
        model_config = saved.config
        lm_split = lm_split_of(saved.meta)  # a run saved before the runs split resumes on its own split
        if data is None:  # the task's data again, read with the run's own tokenizers
            data = load_task(cfg, (saved.src_tokenizer, saved.tgt_tokenizer), lm_split)
    else:
        lm_split = LM_SPLIT
        if cfg.data is not None:  # stored absolute: a resume from another folder finds the same file
            cfg = dataclasses.replace(cfg, data=str(Path(cfg.data).resolve()))
        found = run_folder.guard_new_run(run_dir, force)
        if rt.is_main:
            run_folder.clear(run_dir, found)
    fingerprint = saved.meta.get("data_sha256") if state is not None else run_folder.data_fingerprint(cfg.data)
    threads = cfg.threads if cfg.threads is not None else TASK_THREADS.get(cfg.task)
    if threads is not None:
        torch.set_num_threads(threads)
    seed_everything(cfg.seed)
    data = data if data is not None else load_task(cfg)
    model_config = model_config or default_model_config(data, **(model_overrides or {}))
    if rt.is_main:
        run_dir.mkdir(parents=True, exist_ok=True)
    max_steps = cfg.max_steps or (None if cfg.max_minutes else DEFAULT_MAX_STEPS)

    model = build_model(model_config).to(rt.device).train()
    optimizer = build_optimizer(model, cfg)
    budget = WSDClock()  # share of the run's steps or minutes used (or an early decay's): wsd's clock
    scheduler = make_scheduler(optimizer, cfg, model_config.d_model, budget.progress)
    train_set = data.encoded["train"]
    lengths = [example_length(e) for e in train_set]
    check_positions(max(lengths) + 1, model_config, "the longest training example (with <bos> or <eos>)",
                    "pass a larger --max-len, or drop the long examples")
    stream = distributed.make_stream([bucket_key(e) for e in train_set], cfg.batch_size, cfg.seed, rt)
    step, best_score, best_metrics, tokens_seen, last_saved = 0, None, {}, 0, None
    best_step, best_hyps = None, None  # best/'s step and its held-out outputs (selection.py)
    if state is not None:
        model.load_state_dict(saved.model.state_dict())
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        stream.load_state_dict(state["stream"])
        step, tokens_seen = state["step"], state["tokens_seen"]  # patience's count: the clock's state
        best_score = tuple(state["best_score"]) if state["best_score"] is not None else None
        best_metrics, last_saved = state["best_metrics"], state["step"]
        best_step = ckpt.read_meta(run_dir / "best").get("step") if (run_dir / "best").is_dir() else None
        set_rng_state(state["rng"])
        budget.load_state_dict(state.get("wsd_clock", {}))  # absent from checkpoints before it existed
    train_model = distributed.wrap(model, rt)  # DDP when several workers; `model` for everything else
    log = MetricsLog(run_dir / "metrics.jsonl", step if resume else None, rt.is_main)
    monitor = cfg.monitored
    # averaging.py (§6.1): the last evaluations' weights, carried through --resume in checkpoint/
    average = averaging.LastWeights(cfg.average_last) if cfg.average_last else None
    if average is not None and state is not None and state.get("average_last"):
        average.load_state_dict(state["average_last"])
    meta_base = {"task": cfg.task, "kind": data.kind, "train_config": cfg.to_dict(), "data_sha256": fingerprint,
                 **({"lm_split": lm_split} if data.kind == "lm" else {})}

    def save(dirname: str, with_state: bool, metrics: dict, weights=None, meta: dict | None = None) -> None:
        if not rt.is_main:
            return
        s = None
        if with_state:
            s = {"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                 "stream": stream.state_dict(), "rng": rng_state(), "step": step,
                 "tokens_seen": tokens_seen, "best_score": best_score, "best_metrics": best_metrics,
                 "wsd_clock": budget.state_dict(), "dropout_rule": rule.decided if rule else ruled,
                 "train_config": cfg.to_dict(), "elapsed_s": clock() - start}
            if average is not None:
                s["average_last"] = average.state_dict()
        ckpt.save_checkpoint(run_dir / dirname, weights if weights is not None else model, model_config,
                             data.tokenizers, s, {**meta_base, "step": step, "metrics": run_end.public(metrics),
                                                  **(meta or {})})

    def run_eval() -> dict:
        m = evaluate(model, data, "valid", limit=cfg.eval_size, device=rt.device) if rt.is_main else None
        model.train()
        return distributed.broadcast(m, rt)  # rank 0 scores; every worker takes the same decisions

    # the run's clock: seconds of training before this process (a resumed run keeps its budget and
    # the schedule's position; the time it lay stopped does not count)
    before = state.get("elapsed_s", 0.0) if state is not None else 0.0
    start = clock() - before
    # dropout_rule.py: the recipe left dropout to this run's own rate (a resumed run keeps a decision made)
    ruled = state.get("dropout_rule") if state is not None else None
    rule, examples = None, 0
    if cfg.dropout_auto is not None and ruled is None:
        strong = (cfg.dropout_strong_passes, cfg.dropout_strong) if cfg.dropout_strong is not None else None
        rule = DropoutDecision(cfg.dropout_auto, cfg.dropout_passes, cfg.max_minutes * 60,
                               cfg.max_minutes * 60 - before, len(train_set), strong)
    stop_reason = "max_steps"
    progress = Progress(max_steps, cfg.max_minutes, enabled=rt.is_main and not cfg.quiet, start_step=step)
    window_tokens, window_start = 0, clock()
    metrics: dict = {}  # the last evaluation's
    # threads the recipe chose from the free cores: re-checked at each evaluation (one process only:
    # under torchrun each worker's threads are the launcher's business)
    watch = ThreadWatch() if cfg.threads_auto and rt.world == 1 and str(rt.device).startswith("cpu") else None
    with progress, run_folder.GracefulInterrupt() as interrupt:
        while True:
            if interrupt.requested:  # between steps: the state saved below is of whole steps only
                stop_reason = "interrupted"
                break
            if max_steps is not None and step >= max_steps:
                stop_reason = "max_steps"
                break
            elapsed = clock() - start
            if cfg.max_minutes is not None:  # rank 0's clock decides, so no worker stops alone
                elapsed = distributed.broadcast(elapsed, rt)
            if cfg.max_minutes is not None and elapsed >= cfg.max_minutes * 60:
                stop_reason = "max_minutes"
                break
            if budget.done():
                stop_reason = "the early decay ended"
                break
            if rule is not None and rule.due(elapsed - before, examples, elapsed):  # rank 0's clock: all at once
                seen = int(distributed.all_sum(examples, rt))
                d = distributed.broadcast(rule.decide(seen, elapsed - before, elapsed), rt)
                if d is not None:  # decided, or raised by a re-check
                    model_config = set_dropout(model, model_config, d["dropout"])
                    progress.note(d["text"])
                    log.write({"step": step, "split": "dropout", **{k: v for k, v in d.items() if k != "text"},
                               "elapsed_s": clock() - start})
            lr = scheduler.get_last_lr()[0]
            micro = next_micro_batches(stream, train_set, model_config, cfg)
            loss, n_tok = train_step(train_model, model, optimizer, micro, cfg, model_config.pad_id, rt)
            if not math.isfinite(loss):
                raise TrainingDiverged(_diverged_message(loss, step + 1, run_dir, last_saved))
            step += 1
            budget.spent = max(step / max_steps if max_steps else 0.0,  # the next update's rate sees it
                               elapsed / (cfg.max_minutes * 60) if cfg.max_minutes else 0.0)
            scheduler.step()
            tokens_seen += n_tok
            window_tokens += n_tok
            if rule is not None:  # the dropout rule's count (it counts again after deciding: dropout_rule.py)
                examples += sum(b["tgt_out" if "tgt_out" in b else "out"].shape[0] for b in micro)
            for fn in callbacks:
                fn(step, model, loss)
            if step % cfg.log_every == 0:
                now = clock()
                tps = window_tokens / max(now - window_start, 1e-9)
                window_tokens, window_start = 0, now
                log.write({"step": step, "split": "train", "loss": loss, "lr": lr, "tokens_per_s": tps,
                           "elapsed_s": now - start})
                progress.update(step, clock() - start, loss=loss, lr=lr, tps=tps)
            if step % cfg.eval_every == 0:
                metrics = run_eval()
                score = _score(metrics, monitor)
                improved = best_score is None or score > best_score
                stable = cfg.schedule == "wsd" and budget.stable()
                if improved:
                    best_score, best_metrics = score, run_end.public(metrics)
                    best_step, best_hyps = step, metrics.get("hypotheses")
                    save("best", False, metrics)
                # schedule.WSDClock: a curve that turned at the peak rate starts the decay there
                length = budget.validated(metrics["loss"], improved, cfg.patience if stable else None,
                                          step > cfg.warmup)
                if length is not None:
                    share = (f"{length * cfg.max_minutes:.1f} min" if cfg.max_minutes else
                             f"{round(length * max_steps)} steps")
                    progress.note(f"validation stalled at the peak rate ({budget.stalled} evaluations without a lower"
                                  f" loss or a better score, averaging no lower than the {cfg.patience} before):"
                                  f" the rate decays from now, over {share}, then the run stops")
                    log.write({"step": step, "split": "schedule", "early_decay": list(budget.early_decay),
                               "elapsed_s": clock() - start})
                log.write({"step": step, "split": "valid", **run_end.public(metrics), "elapsed_s": clock() - start})
                progress.note(_eval_line(step, metrics, improved))
                if average is not None and rt.is_main:  # only rank 0 scores and saves the mean
                    average.add(step, model)
                save("checkpoint", True, metrics)
                last_saved = step
                changed = watch.check() if watch is not None else None
                if changed:
                    progress.note(changed)
                    log.write({"step": step, "split": "threads", "threads": torch.get_num_threads(), "why": changed})
                if cfg.stop_at is not None and metrics.get("exact_match", 0.0) >= cfg.stop_at:
                    stop_reason = "target reached"
                    break
                # patience counts the clock's validations with neither a better score nor a lower loss.
                # wsd never stops in its decay, which ends the run anyway and is where its gain comes:
                # counting 500 pairs' exact match against a lucky best there stopped G2P's 30-minute runs
                # part-way down, their loss still falling (66.9%; resumed to its end, 72.6%)
                if cfg.patience is not None and cfg.schedule != "wsd" and budget.stalled >= cfg.patience:
                    stop_reason = "early stopping"
                    break
    if stop_reason == "interrupted":
        if last_saved != step:
            save("checkpoint", True, {})
        raise run_folder.TrainingInterrupted(
            f"stopped at step {step}; the resumable state is in {run_dir / 'checkpoint'}; continue with: "
            f"{run_folder.resume_command(cfg)}", interrupt.signum)
    if last_saved != step:  # stopped between evaluations: score and save where we are
        metrics = run_eval()
        log.write({"step": step, "split": "valid", **run_end.public(metrics), "elapsed_s": clock() - start})
        if best_score is None or _score(metrics, monitor) > best_score:
            best_score, best_metrics = _score(metrics, monitor), run_end.public(metrics)
            best_step, best_hyps = step, metrics.get("hypotheses")
            save("best", False, metrics)
        if average is not None and rt.is_main:
            average.add(step, model)
        save("checkpoint", True, metrics)
    chosen = {}
    if monitor == "exact_match" and rt.is_main and best_step not in (None, step) and metrics.get("hypotheses"):
        # selection.py: an earlier best/ whose lead is within the noise of taking the highest of many
        # evaluations gives way to the last model, which has had the rate's decay
        if best_hyps is None:  # resumed: best/'s outputs were not kept across processes
            best_hyps = evaluate(ckpt.load_checkpoint(run_dir, device=rt.device).model, data, "valid",
                                 limit=cfg.eval_size, device=rt.device)["hypotheses"]
        chosen = selection.decide(data.raw["valid"][:len(best_hyps)], best_hyps, metrics["hypotheses"],
                                  {**best_metrics, "step": best_step}, {**metrics, "step": step})
        log.write({"step": step, "split": "selection", **chosen, "elapsed_s": clock() - start})
        if chosen["kept"] == "last":
            best_score, best_metrics, best_step = _score(metrics, monitor), run_end.public(metrics), step
            save("best", False, metrics)
            save("checkpoint", True, metrics)  # its best score is the last's: a resumed run must beat that
    averaged = {}
    if average is not None and rt.is_main and len(average.kept) >= 2:
        # §6.1: the mean of the last evaluations' weights, scored as they were; best/ only if it validates better
        mean_model, m = averaging.score_mean(average, model_config, data, cfg, rt.device)
        better = _score(m, monitor) > best_score
        averaged = {"steps": average.steps, "metrics": run_end.public(m), "best": best_metrics,
                    "best_step": best_step, "kept_as_best": better, "monitor": monitor}
        log.write({"step": step, "split": "valid-averaged", "steps": average.steps, **run_end.public(m),
                   "kept_as_best": better, "elapsed_s": clock() - start})
        # averaged/ always holds the mean (eval, translate and export take it like any checkpoint)
        save("averaged", False, m, weights=mean_model, meta={"averaged_steps": average.steps})
        if better:
            best_score, best_metrics = _score(m, monitor), run_end.public(m)
            save("best", False, m, weights=mean_model, meta={"averaged_steps": average.steps})
            save("checkpoint", True, metrics)  # its best score is the average's: a resumed run must beat that
    elif average is not None and rt.is_main:  # asked for, and too few evaluations to average: say so
        averaged = {"steps": average.steps, "too_few": True, "n": average.n}
    result = TrainResult(run_dir, step, stop_reason, clock() - start, best_metrics, averaged=averaged,
                         selection=chosen)
    if rt.is_main:
        run_end.finish(result, cfg, data, log, rt)
    distributed.shutdown(rt)
    return result


def _eval_line(step: int, m: dict, improved: bool) -> str:
    parts = [f"step {step:>6}", f"valid loss {m['loss']:.4f}", f"ppl {m['ppl']:.2f}"]
    if "exact_match" in m:
        parts.append(f"exact match {100 * m['exact_match']:.1f}%")
    return "  ".join(parts) + ("  (best)" if improved else "")


def _diverged_message(loss: float, step: int, run_dir: Path, last_saved: int | None) -> str:
    kept = (f"the last good checkpoint (step {last_saved}) is kept in {run_dir / 'checkpoint'}"
            if last_saved is not None else "no checkpoint had been written yet")
    return (f"training stopped: the loss became {loss} at step {step}; {kept}; "
            "lower the learning rate (--lr, --noam-factor) or keep --clip-norm on")
