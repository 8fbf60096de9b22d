"""Small, real torch training jobs that make Kineto traces on a CPU, for the demo and the tests.

Both profile the same MLP loop under ``schedule(wait=1, warmup=1, active=3)`` and write through
:func:`tracelake.profiler.trace_handler`, so their traces are what a user's job would write: a single process,
and a gloo DDP job whose ranks are deliberately uneven so that waiting in collectives is real, not simulated.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, record_function, schedule
from torch.utils.data import DataLoader, TensorDataset

from tracelake.profiler import trace_handler

# Default run folder names, which the tests and the demo refer to.
CPU_RUN_ID = "cpu_mlp"
GLOO_RUN_ID = "gloo_ddp"

_BATCH = 32
_FEATURES = 64
_CLASSES = 10
_MASTER_ADDR = "127.0.0.1"
# Extra compute per step for rank r is r units; one unit is 60 256x256 matmuls, about 20 ms on one core.
_STRAGGLER_MATMULS_PER_UNIT = 60
_COLLECTIVE_TIMEOUT = timedelta(seconds=60)

StepHook = Callable[[int], None]


def _model() -> nn.Module:
    return nn.Sequential(
        nn.Linear(_FEATURES, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, _CLASSES)
    )


def _loader(steps: int, seed: int) -> DataLoader:
    """``steps`` random batches, in a DataLoader so that its ``enumerate(DataLoader)`` spans appear."""
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(steps * _BATCH, _FEATURES, generator=generator)
    labels = torch.randint(0, _CLASSES, (steps * _BATCH,), generator=generator)
    return DataLoader(TensorDataset(inputs, labels), batch_size=_BATCH, shuffle=True, generator=generator)


def _profiled_training(
    model: nn.Module, loader: DataLoader, out_url: str, run_id: str,
    *, before_step: StepHook | None = None, after_step: StepHook | None = None,
) -> None:
    """Train one epoch of ``loader`` under the profiler, one profiler step per batch."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        profile_memory=True,
        with_stack=False,
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=trace_handler(out_url, run_id=run_id),
    ) as prof:
        for step, (inputs, labels) in enumerate(loader):
            if before_step:
                before_step(step)
            with record_function("forward"):
                loss = loss_fn(model(inputs), labels)
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer_step"):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
            if after_step:
                after_step(step)
            prof.step()


def profile_single_process(out_url: str, *, run_id: str = CPU_RUN_ID, steps: int = 6) -> None:
    """Profile a single-process MLP training loop into ``<out_url>/<run_id>/`` (6 steps: ``rank-0.step5``)."""
    torch.manual_seed(0)
    _profiled_training(_model(), _loader(steps, seed=0), out_url, run_id)


def profile_gloo_job(
    out_url: str, *, run_id: str = GLOO_RUN_ID, world_size: int = 2, steps: int = 6, uneven: bool = True
) -> None:
    """Run a ``world_size``-rank DDP job on gloo in child processes, each rank writing its own trace.

    The rendezvous store is served from this process on a port the OS picks, and the ranks join it as
    clients, so concurrent jobs cannot clash on a port. Raises RuntimeError naming the run if any rank fails.
    """
    store = dist.TCPStore(_MASTER_ADDR, 0, world_size, is_master=True, wait_for_workers=False)
    try:
        mp.spawn(_gloo_rank, args=(world_size, store.port, out_url, run_id, steps, uneven), nprocs=world_size)
    except Exception as exc:
        raise RuntimeError(
            f"gloo job {run_id!r} ({world_size} ranks) writing to {out_url} failed: {exc}"
        ) from exc


def _gloo_rank(
    rank: int, world_size: int, port: int, out_url: str, run_id: str, steps: int, uneven: bool
) -> None:
    """One rank of :func:`profile_gloo_job` (module level, so ``spawn`` can import it in the child)."""
    torch.set_num_threads(1)  # the ranks share the machine's cores
    store = dist.TCPStore(_MASTER_ADDR, port, world_size, is_master=False, timeout=_COLLECTIVE_TIMEOUT)
    dist.init_process_group(
        "gloo", store=store, rank=rank, world_size=world_size, timeout=_COLLECTIVE_TIMEOUT
    )
    try:
        torch.manual_seed(0)  # same initial weights everywhere (DDP would broadcast rank 0's anyway)
        model = DistributedDataParallel(_model())
        straggler = torch.randn(256, 256)

        def slow_down(step: int) -> None:
            # Rank r computes r units more before the step's collectives, so lower ranks wait for it.
            with record_function("straggler_compute"):
                for _ in range(rank * _STRAGGLER_MATMULS_PER_UNIT if uneven else 0):
                    straggler.mul_(0.5).add_(straggler @ straggler, alpha=1e-3)

        def sync_metrics(step: int) -> None:
            with record_function("sync_metrics"):
                metric = torch.tensor([float(step + rank)])
                dist.all_reduce(metric)
                flag = torch.tensor([step], dtype=torch.int64)
                dist.broadcast(flag, src=0)
                gathered = [torch.zeros(4) for _ in range(world_size)]
                dist.all_gather(gathered, torch.full((4,), float(rank)))

        _profiled_training(
            model, _loader(steps, seed=rank), out_url, run_id, before_step=slow_down, after_step=sync_metrics
        )
    finally:
        dist.destroy_process_group()
