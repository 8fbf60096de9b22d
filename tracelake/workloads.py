"""Small, real torch training jobs that make Kineto traces on a CPU, for the demo and the tests.

The first two profile the same MLP loop under ``schedule(wait=1, warmup=1, active=3)`` and write through
:func:`tracelake.profiler.trace_handler`, so their traces are what a user's job would write: a single process,
and a gloo DDP job whose ranks are deliberately uneven so that waiting in collectives is real, not simulated.
The third profiles a small vision transformer with stacks, modules, shapes and FLOPs recorded, for the tables
that attribute time to source lines, modules, shapes and the roofline.
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
ATTRIBUTION_RUN_ID = "cpu_vit"

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


class TinyViT(nn.Module):
    """A small vision transformer: patches by convolution, one pre-norm attention block, an MLP head.

    Its ops are the families the op_perf table models: convolution, GEMMs (linear, addmm), scaled-dot-product
    attention, layer norm and elementwise ops."""

    def __init__(self, channels: int = 64, heads: int = 4, patch: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.patchify = nn.Conv2d(3, channels, kernel_size=patch, stride=patch)
        self.norm = nn.LayerNorm(channels)
        self.qkv = nn.Linear(channels, 3 * channels)
        self.proj = nn.Linear(channels, channels)
        self.head = nn.Sequential(nn.Linear(channels, 128), nn.GELU(), nn.Linear(128, _CLASSES))

    def attend(self, tokens: torch.Tensor) -> torch.Tensor:
        batch, count, channels = tokens.shape
        q, k, v = self.qkv(self.norm(tokens)).view(batch, count, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        mixed = nn.functional.scaled_dot_product_attention(q, k, v)
        return tokens + self.proj(mixed.transpose(1, 2).reshape(batch, count, channels))

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        tokens = self.patchify(images).flatten(2).transpose(1, 2)
        return self.head(self.attend(tokens).mean(dim=1))


def vit_training_step(model: nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor,
                      labels: torch.Tensor) -> None:
    """One training step of :class:`TinyViT`, with the phases annotated as a user would."""
    with record_function("forward"):
        loss = nn.functional.cross_entropy(model(images), labels)
    with record_function("backward"):
        loss.backward()
    with record_function("optimizer_step"):
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def vit_batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed batch of 8 random 32x32 images and labels."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(8, 3, 32, 32, generator=generator), torch.randint(0, _CLASSES, (8,), generator=generator)


def profile_attribution(out_url: str, *, run_id: str = ATTRIBUTION_RUN_ID, steps: int = 5) -> None:
    """Profile :class:`TinyViT` training into ``<out_url>/<run_id>/`` with stacks (as python_function events and
    each op's ``Call stack``), nn.Module ranges, input shapes and FLOPs recorded."""
    torch.manual_seed(0)
    model = TinyViT()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    images, labels = vit_batch()
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        with_stack=True,
        with_modules=True,
        with_flops=True,
        # verbose: torch 2.x then also writes each op's Python stack as its "Call stack" arg
        experimental_config=torch.profiler._ExperimentalConfig(verbose=True),
        schedule=schedule(wait=1, warmup=1, active=3, repeat=1),
        on_trace_ready=trace_handler(out_url, run_id=run_id),
    ) as prof:
        for _ in range(steps):
            vit_training_step(model, optimizer, images, labels)
            prof.step()
