"""What a text row's quality gate costs (issue 28 §2, §7): one arm, one seed, one thread.

Trains a character LM on the text rows' fortunes-en split with the rows' trainer (`base.run_tagging`,
batch 32 of 64-character windows, warmup 100) for STEPS steps at peak rate LR and prints the held-out
loss on the rows' own test windows (nats/char) and the wall time, to set beside the character 4-gram
(1.813) that a text row's gate asks every arm to beat. ARM is `tiny` (the 2-layer d_model-64 model of
`real-heads`, 4 heads) or dDLN (d_model D, N layers, 4 heads, d_ff 4·D), e.g. d128L4:

    OMP_NUM_THREADS=1 .venv/bin/python scripts/claims_gate_pilot.py d128L4 3000 0.003
"""

import json
import sys
import time

import torch

from glassformer.experiments.base import run_tagging, tiny_config
from glassformer.experiments.runner import TrainSpec
from glassformer.experiments.text_task import CharTextTask


def main(arm: str, steps: int, lr: float) -> dict:
    torch.set_num_threads(1)
    task = CharTextTask()
    evals = {"64": task.batches(4, 32, seed=900 + 64, length=64)}  # the rows' test windows (text_task.run_arms)
    if arm == "tiny":
        cfg = tiny_config(task.vocab_size, n_heads=4)
    else:
        d, layers = arm.removeprefix("d").split("L")
        cfg = tiny_config(task.vocab_size, n_heads=4, d_model=int(d), n_layers=int(layers), d_ff=4 * int(d))
    start = time.time()
    run = run_tagging(cfg, task, TrainSpec(steps=steps, batch_size=32, lr=lr, warmup=100), 0, evals)
    return {"arm": arm, "steps": steps, "lr": lr, "loss": round(run.metrics["64"]["loss"], 4),
            "seconds": round(time.time() - start, 1)}


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: claims_gate_pilot.py tiny|dDLN STEPS LR   (e.g. d128L4 3000 0.003)")
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))))
