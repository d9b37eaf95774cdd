"""DDP's broadcast and FSDP's sharded updates, then evaluation (tests/test_prepared_distributed.py).

usage: torchrun --nproc_per_node 2 tests/prepared_distributed_worker.py ddp|fsdp OUT.json

Each rank starts from its own random weights and evaluates once (the moment a stale copy of the
weights would be made). DDP then broadcasts rank 0's weights into every rank in place, FSDP shards
them; both train 3 steps with fused AdamW. After each update every rank compares its eval forward
(and, for DDP, greedy generation) with a fresh model given the full state dict, in this process;
rank 0 writes the largest difference of each check to OUT.json.
"""

import json
import sys

import torch
import torch.distributed as dist

from glassformer.config import ModelConfig
from glassformer.generate import generate
from glassformer.nn import build_model

torch.set_num_threads(1)
mode, out = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank = dist.get_rank()
cfg = ModelConfig(arch="decoder", vocab_size=40, d_model=32, n_heads=4, n_layers=2, d_ff=64, dropout=0.0, max_len=64)
torch.manual_seed(100 + rank)  # every rank its own weights
model = build_model(cfg)
ids = torch.randint(3, 40, (2, 9), generator=torch.Generator().manual_seed(0))


def outputs(m, with_generation: bool) -> dict:
    m.eval()
    with torch.no_grad():
        got = {"forward": m(ids)}
    if with_generation:
        got["greedy"] = generate(m, ids[:1], max_new_tokens=6, eos_id=-1)
    m.train()
    return got


def full_state(m) -> dict:
    if mode == "fsdp":
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
        return get_model_state_dict(m, options=StateDictOptions(full_state_dict=True, broadcast_from_rank0=False))
    return {k: v.detach().clone() for k, v in m.state_dict().items()}


def compare(tag: str, m, with_generation: bool) -> dict:
    fresh = build_model(cfg)
    fresh.load_state_dict(full_state(m))
    got, want = outputs(m, with_generation), outputs(fresh, with_generation)
    return {f"{tag} {k} rank {rank}": float((got[k].double() - want[k].double()).abs().max()) for k in got}


outputs(model, True)  # evaluated before the update
diffs = {}
if mode == "ddp":
    from torch.nn.parallel import DistributedDataParallel
    wrapped = DistributedDataParallel(model)  # rank 0's weights broadcast into this rank, in place
    diffs.update(compare("after broadcast", model, True))
    mine = outputs(model, False)["forward"]
    theirs = [torch.empty_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(theirs, mine)
    diffs[f"after broadcast forward vs rank 0, rank {rank}"] = float((mine - theirs[0]).abs().max())
    trained = wrapped
else:
    from torch.distributed.fsdp import fully_shard
    for layer in model.dec:
        fully_shard(layer)
    fully_shard(model)
    trained = model
opt = torch.optim.AdamW(model.parameters(), lr=0.05, fused=True)
for _ in range(3):
    opt.zero_grad()
    trained(ids, targets=ids).backward()
    opt.step()
diffs.update(compare("after 3 fused AdamW steps", model, mode == "ddp"))
everyone = [None] * dist.get_world_size()
dist.all_gather_object(everyone, diffs)
if rank == 0:
    with open(out, "w") as f:
        json.dump({k: v for d in everyone for k, v in d.items()}, f, indent=1)
dist.destroy_process_group()
