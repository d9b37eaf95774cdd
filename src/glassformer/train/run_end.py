"""The end of a training run (train/loop.py): what is checked and written once the last step is taken.

`best/` is read back from disk and scored again on the held-out split (issue 27: the score that chose
it must come back), then scored on the test split beside the data's simple baseline (issue 32 §5,
baselines.py) and the verdict of the validation curve on whether more minutes would help
(verdict.py); the loss curve is drawn last, and a failure to draw it never loses the run.
"""

from __future__ import annotations

from . import baselines, verdict
from . import checkpoint as ckpt
from .evaluate import evaluate


def finish(result, cfg, data, log, rt) -> None:
    """Fill in `result` (loop.TrainResult) on the main process: check `best/` on reload, score it on
    the test split, put the data's simple baseline and the more-minutes verdict beside it, draw the
    loss curve."""
    run_dir, step = result.run_dir, result.step
    best = ckpt.load_checkpoint(run_dir, device=rt.device)
    result.reloaded = check_reloaded(cfg, data, best, result.best, log, rt)
    if data.encoded.get("test"):
        result.test = evaluate(best.model, data, "test", with_bleu=data.kind == "seq2seq", device=rt.device)
        log.write({"step": step, "split": "test", **public(result.test)})
    # issue 32 §5: the score beside what the simplest model of the same data gets, and whether the
    # curve says more minutes would help; both logged for eval and reports
    result.baseline = baselines.of_task(data, valid_limit=cfg.eval_size)
    if result.baseline is not None:
        log.write({"step": step, "split": "baseline", **result.baseline})
    if log.enabled:
        result.verdict = verdict.from_metrics(log.path)
        log.write({"step": step, "split": "verdict", **result.verdict})
    from .plots import loss_curve
    try:
        loss_curve(run_dir / "metrics.jsonl", run_dir / "loss.png")
    except Exception as e:  # a missing font or backend must not lose a finished run
        print(f"warning: could not draw the loss curve ({e})")


def check_reloaded(cfg, data, best, best_metrics: dict, log, rt) -> dict:
    """`best/` read back from disk and scored again on the held-out split: the score that chose
    it must come back (issue 27: a stale copy of the weights once made the logged scores those of
    an old model, so `best/` was not the best). Logged as split "valid-reloaded"; a mismatch is
    printed, never hidden."""
    again = public(evaluate(best.model, data, "valid", limit=cfg.eval_size, device=rt.device))
    same = same_score(best_metrics, again)
    log.write({"step": best.meta.get("step"), "split": "valid-reloaded", **again, "equal_to_logged": same})
    if not same:
        print(f"warning: {best.path} read back from disk scores valid loss {again['loss']:.6f}, exact match "
              f"{again.get('exact_match')}; the run logged loss {best_metrics.get('loss', float('nan')):.6f}, exact "
              f"match {best_metrics.get('exact_match')} for it (a resumed run may differ by float rounding; "
              "more means the logged scores were not those of the saved weights: please report it)")
    return {**again, "equal_to_logged": same}


def same_score(logged: dict, again: dict) -> bool:
    """The same weights on the same examples: exact match identical, loss to float32 rounding."""
    if not logged:
        return False
    loss_ok = abs(logged["loss"] - again["loss"]) <= 1e-6 * max(1.0, abs(logged["loss"]))
    return loss_ok and logged.get("exact_match") == again.get("exact_match")


def public(metrics: dict) -> dict:
    """Metrics without the per-sentence hypotheses (kept out of JSON files)."""
    return {k: v for k, v in metrics.items() if k != "hypotheses"}
