"""`glassformer train` with batches that are not bucketed by length (issue 32: the batching's effect on
learning, docs/real-data.md, "why ours loses num-en at 2 minutes").

    python bench/unbucketed_train.py train --task tsv --data TRAIN --max-steps 600 ...   (any train flags)

The trainer sorts each pool of 50 shuffled batches by length (train/batching.py, the 2017 paper §5.1), so
a batch holds examples of one length. Here a pool is one batch: nothing is sorted, every batch is a
random sample, as in plain PyTorch. Everything else is `glassformer`'s own command line. An A/B harness,
not an option of the library: the development data kept the bucketing (it wins at equal time).
"""

from __future__ import annotations

import sys

from glassformer.cli import main
from glassformer.train import batching

# pool = 1 batch: the shuffled order cut into batches (the trainer calls epoch_batches without `pool`)
assert batching.epoch_batches.__defaults__ == (50,), "train/batching.py's pool default moved: update this harness"
batching.epoch_batches.__defaults__ = (1,)

if __name__ == "__main__":
    sys.argv = ["glassformer", *sys.argv[1:]]
    main()
