"""What a text row's quality gate costs (issue 28 §2, §7): one arm, one seed, one thread.

Trains a character LM on the text rows' fortunes-en split with the rows' trainer (`base.run_tagging`,
batch 32 of 64-character windows, warmup 100) for STEPS steps at peak rate LR and prints the held-out
loss on the rows' own test windows (nats/char) and the wall time, to set beside the character 4-gram
(1.813) that a text row's gate asks every arm to beat. ARM is `tiny` (the 2-layer d_model-64 model of
`real-heads`, 4 heads) or dDLN[hH][fF] (d_model D, N layers, H heads (4), d_ff F (4·D); f0: no FFN, the model
of `real-ffn`'s FFN-less arm), e.g. d128L4 or d128L2h8f0:

    OMP_NUM_THREADS=1 .venv/bin/python scripts/claims_gate_pilot.py d128L4 3000 0.003
"""

import json
import re
import sys
import time

import torch

from glassformer.experiments.base import run_tagging, seeded, tiny_config
from glassformer.experiments.ffn import _model
from glassformer.experiments.runner import TrainSpec
from glassformer.experiments.text_task import CharTextTask


def main(arm: str, steps: int, lr: float) -> dict:
    torch.set_num_threads(1)
    task = CharTextTask()
    evals = {"64": task.batches(4, 32, seed=900 + 64, length=64)}  # the rows' test windows (text_task.run_arms)
    make = None
    if arm == "tiny":
        cfg = tiny_config(task.vocab_size, n_heads=4)
    else:
        m = re.fullmatch(r"d(\d+)L(\d+)(?:h(\d+))?(?:f(\d+))?", arm)
        if m is None:
            sys.exit(f"ARM {arm!r}: give tiny or dDLN[hH][fF], e.g. d128L4 or d128L2h8f0")
        d, layers, heads, d_ff = int(m[1]), int(m[2]), int(m[3] or 4), m[4]
        no_ffn = d_ff == "0"  # the FFN removed from the model of d_ff = d (real-ffn builds it so)
        cfg = tiny_config(task.vocab_size, n_heads=heads, d_model=d, n_layers=layers,
                          d_ff=d if no_ffn else int(d_ff or 4 * d))
        if no_ffn:
            make = lambda: _model(cfg, False)  # noqa: E731
    start = time.time()
    run = run_tagging(cfg, task, TrainSpec(steps=steps, batch_size=32, lr=lr, warmup=100), 0, evals,
                      model=seeded(make, 0))
    return {"arm": arm, "steps": steps, "lr": lr, "loss": round(run.metrics["64"]["loss"], 4),
            "seconds": round(time.time() - start, 1)}


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: claims_gate_pilot.py tiny|dDLN STEPS LR   (e.g. d128L4 3000 0.003)")
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]))))
