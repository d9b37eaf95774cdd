"""Train a tiny copy-task model for 10 steps; run alone or under torchrun (tests/test_ddp.py).

usage: python tests/ddp_worker.py OUT BATCH_SIZE   (BATCH_SIZE per worker)
"""

import sys

import torch

from glassformer.train import TrainConfig, train
from glassformer.train.tasks import load_task

torch.set_num_threads(1)  # two workers on two cores
out, batch = sys.argv[1], int(sys.argv[2])
cfg = TrainConfig(task="copy", out=out, max_steps=10, batch_size=batch, log_every=1, eval_every=1000,
                  eval_size=8, schedule="constant", lr=3e-3, quiet=True, seed=0)
data = load_task(cfg)
for split in ("valid", "test"):  # a short final evaluation keeps the test fast
    data.encoded[split] = data.encoded[split][:8]
train(cfg, data=data, model_overrides=dict(d_model=32, n_heads=2, n_layers=1, d_ff=64, dropout=0.0))
