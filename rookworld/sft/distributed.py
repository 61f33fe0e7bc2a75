"""Data-parallel supervised training over the processes `torchrun` starts, one per GPU.

    torchrun --standalone --nproc_per_node 4 -m rookworld.sft experiment=sft_selfplay

torchrun sets WORLD_SIZE, RANK and LOCAL_RANK; without them a run is one process, as before. Every
process builds the same model (same seed, and DDP copies rank 0's weights when it wraps it), draws its
own share of each step's documents and all-reduces the gradients, so the processes take the same
optimizer step. Rank 0 alone evaluates, tracks and saves. What a run reads from the clock (its time
limit, the LR of a time-limited schedule) is rank 0's reading, broadcast, so every rank steps with the
same learning rate and stops at the same step.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

from rookworld.specs.rules import require, resolve_device

_host_group = None  # gloo, for small host-side values: sharing them forces no CUDA synchronisation


@dataclass(frozen=True)
class Ranks:
    """This process's place among the processes of one run (rank 0 of 1 without torchrun)."""

    rank: int = 0
    world: int = 1
    local_rank: int = 0

    @property
    def main(self) -> bool:
        return self.rank == 0


def start(device_setting: str) -> tuple[Ranks, torch.device]:
    """The process group torchrun asked for (NCCL on GPUs, gloo on the CPU) and this process's device."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Ranks(), resolve_device(device_setting)
    ranks = Ranks(int(os.environ["RANK"]), world, int(os.environ["LOCAL_RANK"]))
    device = resolve_device(device_setting)
    if device.type == "cuda":
        require(ranks.local_rank < torch.cuda.device_count(), "device", device_setting,
                f"torchrun started {world} processes on a machine with {torch.cuda.device_count()} GPUs")
        device = torch.device("cuda", ranks.local_rank)
        torch.cuda.set_device(device)
    global _host_group
    dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    _host_group = dist.new_group(backend="gloo") if device.type == "cuda" else None
    return ranks, device


def wrap(model: torch.nn.Module, ranks: Ranks, device: torch.device) -> torch.nn.Module:
    """The model as DDP across the processes (the model itself for one process)."""
    if ranks.world == 1:
        return model
    return DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    return model.module if isinstance(model, DistributedDataParallel) else model


def rank0_value(value: float, ranks: Ranks) -> float:
    """Rank 0's value on every rank."""
    if ranks.world == 1:
        return value
    shared = torch.tensor([value], dtype=torch.float64)
    dist.broadcast(shared, src=0, group=_host_group)
    return float(shared.item())


def check_in_sync(model: torch.nn.Module, ranks: Ranks, device: torch.device) -> None:
    """Fail if the ranks' weights have drifted apart (they must take identical steps)."""
    if ranks.world == 1:
        return
    total = torch.stack([p.detach().double().sum() for p in unwrap(model).parameters()]).sum().to(device)
    low, high = total.clone(), total.clone()
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    if low.item() != high.item():
        raise RuntimeError(f"the {ranks.world} processes' weights differ (sums {low.item()} .. {high.item()})")


def finish(ranks: Ranks) -> None:
    """Wait for every rank (rank 0 saves last), then leave the process group."""
    if ranks.world > 1:
        dist.barrier()
        dist.destroy_process_group()
