"""`glassformer train` with another length bucketing (issue 32: the batching's effect on learning,
docs/real-data.md, "why ours loses num-en at 2 minutes" and "batches that mix lengths").

    python bench/batching_train.py [--pool N] [--quantum Q] train --task tsv --data TRAIN ...  (any train flags)

The trainer shuffles, cuts the order into pools of 50 batches and sorts each pool by (source length,
target length) (train/batching.py, the 2017 paper §5.1), so a batch holds examples of one length.
Here `--pool N` sets the pool (1: nothing is sorted, every batch a random sample, as in plain PyTorch)
and `--quantum Q` sorts by each length rounded up to a multiple of Q: examples whose lengths share a
multiple stay in shuffled order, so a batch mixes lengths up to Q − 1 apart on each side (and pays that
padding). Defaults: pool 1, quantum 1 (the un-bucketed arm). Everything else is `glassformer`'s own
command line. An A/B harness, not an option of the library.
"""

from __future__ import annotations

import argparse
import sys

from glassformer.cli import main as glassformer
from glassformer.train import batching, loop


def quantized_key(q: int):
    """bucket_key with each side's length rounded up to a multiple of q (q = 1: bucket_key itself)."""
    return lambda example: tuple(-(-len(part) // q) for part in example)


def main(argv: list[str]) -> None:
    ab = argparse.ArgumentParser(prog="batching_train.py", description=__doc__.split("\n\n")[0])
    ab.add_argument("--pool", type=int, default=1, help="batches per sorted pool (the library's: 50)")
    ab.add_argument("--quantum", type=int, default=1, help="round each length up to a multiple of this")
    args, rest = ab.parse_known_args(argv)
    if args.pool < 1 or args.quantum < 1:
        ab.error("--pool and --quantum are whole numbers >= 1")
    # the trainer calls epoch_batches without `pool`, and train/distributed.py imports it by name:
    # changing the default reaches both paths
    assert batching.epoch_batches.__defaults__ == (50,), "train/batching.py's pool default moved"
    batching.epoch_batches.__defaults__ = (args.pool,)
    assert loop.bucket_key is batching.bucket_key, "train/loop.py no longer sorts by batching.bucket_key"
    loop.bucket_key = quantized_key(args.quantum)
    sys.argv = ["glassformer", *rest]
    glassformer()


if __name__ == "__main__":
    main(sys.argv[1:])
