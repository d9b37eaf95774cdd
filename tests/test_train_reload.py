"""What `glassformer train` logs is what its saved weights score, read back by a fresh process (issue 27).

A short run of each task kind — digits (copy), the built-in zh-en, a TSV of real pairs (CMUdict
G2P) and a character LM on a real text (Debian's fortunes) — trained with the trainer's fused
AdamW, evaluating every few steps. A separate Python process then loads `best/` and
`checkpoint/` from disk, rebuilds the task's held-out split from the run's own config and
tokenizers, and scores them with `evaluate`: the numbers must equal the `valid` lines of
metrics.jsonl at the steps those checkpoints were saved (loss to 1e-6 relative, exact match
identical), `best/` must be the step with the best logged score, and the trainer's own check on
reload must have found it equal. Before the fix the logged scores of every evaluation after the
first were those of the first evaluation's attention weights (copy: logged 21% exact match,
`checkpoint/` 96%).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from glassformer.data.corpora import cmudict_pairs, load_corpus
from glassformer.train import TrainConfig, train

ROOT = Path(__file__).resolve().parent.parent
TINY = dict(d_model=32, n_heads=2, n_layers=1, d_ff=64)

RESCORE = r"""
import json, sys
from glassformer.train import TrainConfig, load_checkpoint
from glassformer.train.evaluate import evaluate
from glassformer.train.tasks import load_task
out = {}
for path in sys.argv[1:]:
    ck = load_checkpoint(path)
    cfg = TrainConfig.from_dict(ck.meta["train_config"])
    data = load_task(cfg, (ck.src_tokenizer, ck.tgt_tokenizer))
    m = evaluate(ck.model, data, "valid", limit=cfg.eval_size)
    out[path] = {"step": ck.meta["step"], **{k: v for k, v in m.items() if k != "hypotheses"}}
print(json.dumps(out))
"""


def _data_file(kind: str, tmp_path: Path) -> str | None:
    if kind == "tsv":
        path = tmp_path / "g2p.tsv"
        path.write_text("".join(f"{w}\t{p}\n" for w, p in cmudict_pairs()[5000:6500]), encoding="utf-8")
        return str(path)
    if kind == "lm":
        path = tmp_path / "fortunes.txt"
        path.write_text("\n\n".join(load_corpus("fortunes-en")[:400]), encoding="utf-8")
        return str(path)
    return None


@pytest.mark.parametrize("task", ["copy", "zh-en", "tsv", "lm"])
def test_logged_validation_equals_a_fresh_process_on_the_saved_weights(task, tmp_path, monkeypatch):
    monkeypatch.setenv("GLASSFORMER_GEMM", "blas")  # one GEMM route in both processes: same rounding
    run = tmp_path / "run"
    cfg = TrainConfig(task=task, data=_data_file(task, tmp_path), out=str(run), max_steps=120, eval_every=20,
                      eval_size=40, batch_size=32, schedule="constant", lr=3e-3, warmup=10, patience=None,
                      threads=1, quiet=True, seed=0)
    result = train(cfg, model_overrides=TINY)
    logged = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    valid = {r["step"]: r for r in logged if r["split"] == "valid"}
    assert len(valid) == 6
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT / "src"), GLASSFORMER_GEMM="blas")
    proc = subprocess.run([sys.executable, "-c", RESCORE, str(run / "best"), str(run / "checkpoint")], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    fresh = json.loads(proc.stdout.splitlines()[-1])
    for path, m in fresh.items():
        log = valid[m["step"]]
        assert abs(m["loss"] - log["loss"]) <= 1e-6 * abs(log["loss"]), (path, m["loss"], log["loss"])
        assert m.get("exact_match") == log.get("exact_match"), (path, m.get("exact_match"), log.get("exact_match"))
    # best/ is the step with the best logged score (exact match first for translators, then loss)
    key = (lambda r: (r["exact_match"], -r["loss"])) if "exact_match" in logged[-1] or task != "lm" else \
        (lambda r: -r["loss"])
    assert fresh[str(run / "best")]["step"] == max(valid.values(), key=key)["step"]
    assert fresh[str(run / "checkpoint")]["step"] == 120
    assert result.reloaded["equal_to_logged"] is True
    losses = [valid[s]["loss"] for s in sorted(valid)]
    assert losses[-1] < losses[0]  # it trained: the six evaluations saw six different models
