"""Checkpoint averaging (Vaswani et al. 2017, §6.1: "for the base models, we used a single model
obtained by averaging the last 5 checkpoints, which were written at 10-minute intervals").

With `--average-last N` the run keeps the weights of its last N evaluations (a copy of each in
memory, and in `checkpoint/` so that `--resume` continues the same window). When the run ends it
builds their element-wise mean, scores it on the held-out split like any evaluation, writes it to
`averaged/`, and keeps it as `best/` too only when it scores better than the best single
evaluation: whether the average helps is
the validation's call, never assumed (a decayed rate, wsd's or cosine's end, already does much of
what averaging does, so it may not).
"""

from __future__ import annotations

import torch


class LastWeights:
    """The model's weights at its last `n` evaluations, and their mean."""

    def __init__(self, n: int):
        if n < 2:
            raise ValueError(f"averaging needs at least 2 checkpoints, not {n}")
        self.n = n
        self.kept: list[tuple[int, dict[str, torch.Tensor]]] = []  # (step, state_dict copy), oldest first

    def add(self, step: int, model: torch.nn.Module) -> None:
        """Keep the weights as they are at `step` (a second call at the same step is ignored)."""
        if self.kept and self.kept[-1][0] == step:
            return
        weights = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
        self.kept.append((step, weights))
        del self.kept[:-self.n]

    @property
    def steps(self) -> list[int]:
        return [s for s, _ in self.kept]

    def mean(self) -> dict[str, torch.Tensor]:
        """The element-wise mean of the kept weights (summed in float64, stored in each tensor's own
        dtype); a tensor that is not floating point (a step counter) is the latest one's."""
        if not self.kept:
            raise ValueError("no weights kept yet")
        latest = self.kept[-1][1]
        out = {}
        for name, last in latest.items():
            if not last.is_floating_point():
                out[name] = last.clone()
                continue
            total = torch.zeros_like(last, dtype=torch.float64)
            for _, w in self.kept:
                total += w[name].to(torch.float64)
            out[name] = (total / len(self.kept)).to(last.dtype)
        return out

    # ---- for checkpoint/ (train_state.py stores lists, dicts and tensors) ----
    def state_dict(self) -> dict:
        return {"n": self.n, "steps": self.steps, "weights": [w for _, w in self.kept]}

    def load_state_dict(self, state: dict) -> None:
        self.kept = list(zip(state["steps"], state["weights"]))[-self.n:]


def score_mean(last: LastWeights, model_config, data, cfg, device: str):
    """A fresh model holding the mean of the kept weights, and its held-out metrics (scored as every
    evaluation is: the same split and limit)."""
    from ..nn import build_model
    from .evaluate import evaluate

    model = build_model(model_config).to(device)
    model.load_state_dict(last.mean())
    model.eval()
    return model, evaluate(model, data, "valid", limit=cfg.eval_size, device=device)


def summary(averaged: dict, monitor: str) -> str:
    """One line for the end of a run: what the mean scored against the best single evaluation, and
    which of them best/ holds."""
    steps = averaged["steps"]
    if averaged.get("too_few"):
        made = f"{len(steps)} evaluation" + ("s" if len(steps) != 1 else "")
        return (f"--average-last {averaged['n']}: the run made {made}, too few to average (raise --max-steps or "
                f"--max-minutes, or evaluate more often with --eval-every); no averaged/ written")
    span = f"steps {steps[0]:,}–{steps[-1]:,}"

    def score(m: dict) -> str:
        if monitor == "exact_match" and "exact_match" in m:
            return f"exact match {100 * m['exact_match']:.1f}%, loss {m['loss']:.4f}"
        return f"loss {m['loss']:.4f}"

    kept = "best/ holds the average" if averaged["kept_as_best"] else (
        f"best/ keeps step {averaged['best_step']:,}'s weights, averaged/ holds the mean")
    return (f"averaged the last {len(steps)} evaluations' weights ({span}): valid {score(averaged['metrics'])}; "
            f"the best single evaluation {score(averaged['best'])}; {kept}")
