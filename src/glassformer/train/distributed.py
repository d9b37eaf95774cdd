"""Data-parallel training on PyTorch's own engine: torchrun + DistributedDataParallel.

    torchrun --nproc_per_node 2 -m glassformer train --task copy ...

torchrun starts one process per worker and sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
MASTER_PORT; `runtime_from_env` reads them and joins the process group (gloo on CPU, nccl on
GPU). Each step, every worker takes its own share of one *global* batch (`ShardedBatchStream`),
runs forward and backward on it, and DDP averages the gradients across workers while backward
runs; every worker then applies the same optimiser step, so the weights stay identical without
ever being sent. Only rank 0 logs, evaluates and writes checkpoints; the others receive its
decisions (`broadcast`), so nothing is computed twice and no worker stops alone.

`--batch-size` stays sequences per worker (PyTorch's convention): the global batch is
batch_size × world, and the loss is the mean over all its tokens — the same number one process
computes on the same global batch.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from .batching import BatchStream, epoch_batches


def world_size_from_env() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def runtime_from_env(device: str):
    """The Runtime of this process; joins the process group when started by torchrun."""
    from .loop import Runtime

    world = world_size_from_env()
    if world <= 1:
        return Runtime(device=device)
    rank, local = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    cuda = device.startswith("cuda")
    if cuda:
        device = f"cuda:{local}"  # one GPU per worker on each node
        torch.cuda.set_device(local)
    if not dist.is_initialized():
        dist.init_process_group("nccl" if cuda else "gloo")
    return Runtime(device=device, rank=rank, world=world)


def wrap(model: torch.nn.Module, rt) -> torch.nn.Module:
    """The module that runs forward/backward: DDP around `model` when there are several workers.

    Checkpoints, evaluation and the optimiser keep using the plain `model` (same parameters).
    """
    if rt.world <= 1:
        return model
    ids = [torch.device(rt.device).index] if rt.device.startswith("cuda") else None
    return DistributedDataParallel(model, device_ids=ids)


class ShardedBatchStream(BatchStream):
    """Global batches of batch_size × world examples; worker `rank` takes every world-th example.

    The global batches are exactly those one process with batch_size × world would draw, so the
    loss trajectory of N workers equals that of one (the test in tests/test_ddp.py).
    """

    def _current(self) -> list[list[int]]:
        if self._batches is None:
            every = epoch_batches(self.lengths, self.batch_size * self.world, self.seed, self.epoch)
            every = [g for g in every if len(g) >= self.world]  # each worker needs one example
            self._batches = [g[self.rank::self.world] for g in every]
        return self._batches


def make_stream(lengths, batch_size: int, seed: int, rt) -> BatchStream:
    if rt.world <= 1:
        return BatchStream(lengths, batch_size, seed)
    return ShardedBatchStream(lengths, batch_size, seed, rt.rank, rt.world)


def all_sum(value: float, rt) -> float:
    """Sum of a number over all workers (token counts, loss sums); the value itself when alone."""
    if rt.world <= 1:
        return value
    t = torch.tensor([float(value)], dtype=torch.float64,
                     device=rt.device if rt.device.startswith("cuda") else "cpu")
    dist.all_reduce(t)
    return float(t.item())


def broadcast(obj: Any, rt) -> Any:
    """Rank 0's `obj` on every worker (metrics, stop decisions)."""
    if rt.world <= 1:
        return obj
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def shutdown(rt) -> None:
    if rt.world > 1 and dist.is_initialized():
        dist.destroy_process_group()
