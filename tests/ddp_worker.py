"""Train a tiny copy-task model for 10 steps; run alone or under torchrun (tests/test_ddp.py).

usage: python tests/ddp_worker.py OUT BATCH_SIZE [rule]   (BATCH_SIZE per worker)

With "rule": a 3-second budget instead of 10 steps, and the auto recipe's dropout left to the run's own
rate (train/dropout_rule.py), with a threshold every rate meets.
"""

import sys

import torch

from glassformer.train import TrainConfig, train
from glassformer.train.tasks import load_task

torch.set_num_threads(1)  # two workers on two cores
out, batch = sys.argv[1], int(sys.argv[2])
limits = dict(max_steps=10) if sys.argv[3:] != ["rule"] else dict(max_minutes=0.05, dropout_auto=0.1,
                                                                 dropout_passes=1e-9)
cfg = TrainConfig(task="copy", out=out, batch_size=batch, log_every=1, eval_every=1000,
                  eval_size=8, schedule="constant", lr=3e-3, quiet=True, seed=0, **limits)
data = load_task(cfg)
for split in ("valid", "test"):  # a short final evaluation keeps the test fast
    data.encoded[split] = data.encoded[split][:8]
train(cfg, data=data, model_overrides=dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0))
