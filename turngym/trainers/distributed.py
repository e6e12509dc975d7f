"""Several processes (torchrun / `accelerate launch`): data-parallel training.

Every process holds the whole model, collects its own share of the update's groups (and of
SFT's batches, and of an evaluation's episodes), and gradients are averaged across processes
before each optimizer step, so the copies stay identical. Rank 0 gathers the evaluations and
alone writes the run directory. In a single process every function here is a no-op.
"""

from __future__ import annotations

import os

import torch

from turngym.trainers.config import TrainConfig


def world() -> tuple[int, int]:
    """(rank, number of processes): (0, 1) unless launched by torchrun or `accelerate launch`."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def init_distributed(cfg: TrainConfig) -> None:
    """Join the process group a launcher described in the environment (WORLD_SIZE, RANK, ...)."""
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
        return
    import torch.distributed as dist

    if dist.is_initialized():
        return
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available() and cfg.model.device in (None, "cuda"):
        cfg.model.device = f"cuda:{local}"
        torch.cuda.set_device(local)
        dist.init_process_group("nccl")
    else:
        dist.init_process_group("gloo")


def barrier() -> None:
    """Wait for every process (a no-op in a single process)."""
    if world()[1] > 1:
        import torch.distributed as dist

        dist.barrier()


def sync_gradients(params: list[torch.nn.Parameter]) -> None:
    """Average gradients over processes (a no-op in a single process)."""
    _, size = world()
    if size == 1:
        return
    import torch.distributed as dist

    for p in params:
        if p.grad is None:  # every process must join every all_reduce
            p.grad = torch.zeros_like(p)
        dist.all_reduce(p.grad)
        p.grad /= size


def share(n: int) -> tuple[int, int]:
    """This process's contiguous block ``[lo, hi)`` of ``n`` items (all of them in one process)."""
    rank, size = world()
    return rank * n // size, (rank + 1) * n // size


def gather(items: list) -> list:
    """Every process's ``items`` in rank order, on rank 0 (the others get []); ``items`` in one process."""
    rank, size = world()
    if size == 1:
        return items
    import torch.distributed as dist

    parts = [None] * size if rank == 0 else None
    dist.gather_object(items, parts, dst=0)
    return [x for part in parts for x in part] if rank == 0 else []


def total(value: float) -> float:
    """``value`` summed over processes (itself in one process)."""
    _, size = world()
    if size == 1:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t.item())


def agree_max(value: int) -> int:
    """The largest ``value`` over processes (so all run the same number of optimizer steps)."""
    _, size = world()
    if size == 1:
        return value
    import torch.distributed as dist

    t = torch.tensor([value], dtype=torch.long)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return int(t.item())
