"""Small, real torch training jobs that make Kineto traces on a CPU, for the demo and the tests.

The first two profile the same MLP loop under ``schedule(wait=1, warmup=1, active=3)`` and write through
:func:`tracelake.profiler.trace_handler`, so their traces are what a user's job would write: a single process,
and a gloo DDP job whose ranks are deliberately uneven so that waiting in collectives is real, not simulated.
The third profiles a small vision transformer with stacks, modules, shapes and FLOPs recorded, for the tables
that attribute time to source lines, modules, shapes and the roofline. The last two are multi-rank gloo jobs of
the layouts large-model training uses: tensor and data parallelism over two kinds of process group, and a
pipeline (``torch.distributed.pipelining``) of 2 or more stages.

What torch 2.13's CPU profiler writes for gloo (the tables' definitions rest on it): each collective call is a
``c10d::<op>`` cpu_op on the calling thread (it only enqueues the work) and a ``gloo:<op>`` range on one of the
process group's own worker threads (``pt_gloo_runloop``, two per group) that spans the collective's execution,
waiting for peers included; a send or receive is a ``c10d::send``/``c10d::recv_`` op and a ``gloo:send``/
``gloo:recv`` range on the calling thread, from the call until its wait completes, with the peer's group rank
among the op's Concrete Inputs. The ranges carry the tensor's shape and type but no process group and no
``record_param_comms`` op (NCCL writes those); ``distributedInfo.pg_config`` lists the rank's groups with their
names, descriptions and ranks.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
from torch.nn.parallel import DistributedDataParallel
from torch.profiler import ProfilerActivity, profile, record_function, schedule
from torch.utils.data import DataLoader, TensorDataset

from tracelake.profiler import trace_handler

# Default run folder names, which the tests and the demo refer to.
CPU_RUN_ID = "cpu_mlp"
GLOO_RUN_ID = "gloo_ddp"
ATTRIBUTION_RUN_ID = "cpu_vit"
PARALLEL_GROUPS_RUN_ID = "gloo_tp_dp"
PIPELINE_RUN_ID = "gloo_pipeline"
PIPELINE_SCHEDULES = ("gpipe", "1f1b")
BACKWARD_STRAGGLER_RUN_ID = "gloo_backward_straggler"
SKIPPED_COLLECTIVE_RUN_ID = "gloo_skipped_collective"

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


def _loader(steps: int, seed: int) -> DataLoader[Any]:
    """``steps`` random batches, in a DataLoader so that its ``enumerate(DataLoader)`` spans appear."""
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(steps * _BATCH, _FEATURES, generator=generator)
    labels = torch.randint(0, _CLASSES, (steps * _BATCH,), generator=generator)
    return DataLoader(TensorDataset(inputs, labels), batch_size=_BATCH, shuffle=True, generator=generator)


def _profiled_training(
    model: nn.Module, loader: DataLoader[Any], out_url: str, run_id: str,
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


def _run_ranks(job: str, world_size: int, rank_main: Callable[..., None], *args: Any) -> None:
    """Run ``rank_main(rank, world_size, store_port, *args)`` in ``world_size`` child processes.

    The ranks are forked from a fork server that has imported this module (and torch) once: spawning imports
    torch in every rank, ~10 s for 4 ranks on 2 cores, while a clean server forks them in well under a second
    (and, unlike a plain fork of this process, never copies its threads). The rendezvous store is served from
    this process on a port the OS picks, and the ranks join it as clients, so concurrent jobs cannot clash on a
    port. Raises RuntimeError naming the job if any rank fails.
    """
    multiprocessing.get_context("forkserver").set_forkserver_preload([__name__])
    store = dist.TCPStore(_MASTER_ADDR, 0, world_size, is_master=True, wait_for_workers=False)
    try:
        mp.start_processes(
            rank_main, args=(world_size, store.port, *args), nprocs=world_size, start_method="forkserver"
        )
    except Exception as exc:
        raise RuntimeError(f"{job} ({world_size} ranks) failed: {exc}") from exc


@contextmanager
def _gloo_process_group(rank: int, world_size: int, port: int) -> Iterator[None]:
    """This rank's default gloo process group, joined through the parent's store, for the block's duration.

    A rank that gets through the block waits for the others and then ends its process at once, without tearing
    the groups down: torch 2.13 frees a finished collective's work on the gloo worker thread, which needs the GIL
    when the work holds Python tensors (all_gather's outputs), while tearing a group down joins that thread with
    the GIL held, so now and then the rank hangs for good. Its trace is written by then."""
    torch.set_num_threads(1)  # the ranks share the machine's cores
    store = dist.TCPStore(_MASTER_ADDR, port, world_size, is_master=False, timeout=_COLLECTIVE_TIMEOUT)
    dist.init_process_group(
        "gloo", store=store, rank=rank, world_size=world_size, timeout=_COLLECTIVE_TIMEOUT
    )
    yield
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def profile_gloo_job(
    out_url: str, *, run_id: str = GLOO_RUN_ID, world_size: int = 2, steps: int = 6, uneven: bool = True
) -> None:
    """Run a ``world_size``-rank DDP job on gloo in child processes, each rank writing its own trace."""
    job = f"gloo job {run_id!r} writing to {out_url}"
    _run_ranks(job, world_size, _gloo_rank, out_url, run_id, steps, uneven)


def _gloo_rank(
    rank: int, world_size: int, port: int, out_url: str, run_id: str, steps: int, uneven: bool
) -> None:
    """One rank of :func:`profile_gloo_job` (module level, so ``spawn`` can import it in the child)."""
    with _gloo_process_group(rank, world_size, port):
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


class _BackwardWork(torch.autograd.Function):
    """Identity in forward; in backward, ``units`` units of extra matmuls before passing the gradient on: work that
    only the backward pass does, as a slower backward kernel would."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, units: int) -> torch.Tensor:
        ctx.units = units
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        work = torch.ones(256, 256)
        for _ in range(ctx.units * _STRAGGLER_MATMULS_PER_UNIT):
            work.mul_(0.5).add_(work @ work, alpha=1e-3)
        return grad, None


class _SlowBackward(nn.Module):
    def __init__(self, units: int) -> None:
        super().__init__()
        self.units = units

    def forward(self, tensor: torch.Tensor) -> torch.Tensor:
        return _BackwardWork.apply(tensor, self.units) if self.units else tensor


def profile_straggler_job(
    out_url: str, *, run_id: str = BACKWARD_STRAGGLER_RUN_ID, world_size: int = 2, backward_units: int = 2,
    skip_step: int | None = None, skip_timeout_s: float = 1.0,
) -> None:
    """A ``world_size``-rank gloo DDP job whose last rank does ``backward_units`` units of extra work in the backward
    pass only, between the first layer and the rest, so that DDP's gradient all-reduce (one bucket) waits for it on
    every rank and every rank's step lasts as long: the straggler shows in how much each rank computed, not in its
    step time. With ``skip_step``, at that step every other rank calls an all-reduce over a side group of all ranks
    (made with a ``skip_timeout_s`` timeout) that the last rank skips: their call times out (the error is caught)
    and their traces hold a collective the last rank never ran. Steps 2 to 4 of 6 are profiled."""
    _run_ranks(
        f"straggler job {run_id!r} writing to {out_url}", world_size, _straggler_rank, out_url, run_id,
        backward_units, skip_step, skip_timeout_s,
    )


def _straggler_rank(
    rank: int, world_size: int, port: int, out_url: str, run_id: str, backward_units: int, skip_step: int | None,
    skip_timeout_s: float,
) -> None:
    """One rank of :func:`profile_straggler_job`."""
    with _gloo_process_group(rank, world_size, port):
        side = dist.new_group(timeout=timedelta(seconds=skip_timeout_s), group_desc="side")
        slow = rank == world_size - 1
        torch.manual_seed(0)
        layers = list(_model().children())
        model = DistributedDataParallel(
            nn.Sequential(layers[0], _SlowBackward(backward_units if slow else 0), *layers[1:])
        )

        def skipped_collective(step: int) -> None:
            if step != skip_step or slow:
                return
            # the last rank never joins: the call times out, as a hung collective would, and the error is dropped
            with contextlib.suppress(RuntimeError):
                dist.all_reduce(torch.ones(8), group=side)

        _profiled_training(model, _loader(6, seed=rank), out_url, run_id, after_step=skipped_collective)


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


# Tensor x data parallelism on 4 ranks in a 2x2 layout: rank r is in TP group r // 2 and DP group r % 2.
_PARALLEL_WORLD_SIZE = 4
_TP_SIZE = 2
_TP_HIDDEN = 512
_MAX_GRAD_NORM = 1.0


class _EnterTensorParallel(torch.autograd.Function):
    """Megatron's f: identity in forward, all-reduce of the input gradient over the TP group in backward."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        ctx.group = group
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.clone()
        dist.all_reduce(grad, group=ctx.group)
        return grad, None


class _LeaveTensorParallel(torch.autograd.Function):
    """Megatron's g: all-reduce of the partial output over the TP group in forward, identity in backward."""

    @staticmethod
    def forward(ctx: Any, tensor: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
        tensor = tensor.clone()
        dist.all_reduce(tensor, group=group)
        return tensor

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None


class TensorParallelMLP(nn.Module):
    """A replicated input layer, then an MLP whose hidden layer is split over the TP group (the first linear by
    columns, the second by rows, as Megatron-LM splits one): forward all-reduces the partial outputs, backward
    the input gradients."""

    def __init__(self, tp_group: dist.ProcessGroup, tp_size: int) -> None:
        super().__init__()
        self.tp_group = tp_group
        self.embed = nn.Linear(_FEATURES, _FEATURES)
        self.up = nn.Linear(_FEATURES, _TP_HIDDEN // tp_size, bias=False)
        self.down = nn.Linear(_TP_HIDDEN // tp_size, _FEATURES, bias=False)

    def forward(self, inputs: torch.Tensor) -> torch.Tensor:
        hidden = _EnterTensorParallel.apply(self.embed(inputs), self.tp_group)
        return _LeaveTensorParallel.apply(self.down(torch.relu(self.up(hidden))), self.tp_group)


def profile_parallel_groups_job(out_url: str, *, run_id: str = PARALLEL_GROUPS_RUN_ID, steps: int = 4) -> None:
    """Run a 4-rank tensor x data parallel job on gloo: two process groups per rank, made with ``new_group``
    and described "TP" ([0, 1], [2, 3]) and "DP" ([0, 2], [1, 3]). Forward and backward all-reduce over TP, and the
    loss over DP after the forward (to log its mean over the replicas);
    backward all-reduces gradients over DP asynchronously, as each is accumulated, and waits for them in the
    optimizer step, which also all-reduces the squared gradient norm over TP to clip it. The last two of
    ``steps`` (at least 3) are profiled: ``<out_url>/<run_id>/rank-<r>.step<steps>.pt.trace.json.gz``."""
    _run_ranks(
        f"parallel groups job {run_id!r} writing to {out_url}", _PARALLEL_WORLD_SIZE, _parallel_groups_rank,
        out_url, run_id, steps,
    )


def _parallel_groups_rank(rank: int, world_size: int, port: int, out_url: str, run_id: str, steps: int) -> None:
    """One rank of :func:`profile_parallel_groups_job`."""
    with _gloo_process_group(rank, world_size, port):
        # Every rank makes every group, in the same order; it belongs to one of each kind.
        tp_groups = [dist.new_group([0, 1], group_desc="TP"), dist.new_group([2, 3], group_desc="TP")]
        dp_groups = [dist.new_group([0, 2], group_desc="DP"), dist.new_group([1, 3], group_desc="DP")]
        tp_group, dp_group = tp_groups[rank // _TP_SIZE], dp_groups[rank % _TP_SIZE]
        torch.manual_seed(rank % _TP_SIZE)  # a TP shard's weights are the same in both DP replicas
        model = TensorParallelMLP(tp_group, _TP_SIZE)
        pending: list[dist.Work] = []
        for param in model.parameters():
            param.register_post_accumulate_grad_hook(
                lambda p: pending.append(dist.all_reduce(p.grad, group=dp_group, async_op=True))
            )
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        sharded = [model.up.weight, model.down.weight]

        def finish_gradients(*_: Any) -> None:
            # Runs inside Optimizer.step: wait for the DP gradient sums, then clip by the global norm over TP.
            while pending:
                pending.pop().wait()
            def grad_of(param: torch.Tensor) -> torch.Tensor:
                assert param.grad is not None, "every parameter has its gradient by the optimizer's step"
                return param.grad

            for param in model.parameters():
                grad_of(param).div_(dist.get_world_size(dp_group))
            squared = torch.stack([grad_of(p).square().sum() for p in sharded])
            dist.all_reduce(squared, group=tp_group)
            embed = torch.stack([grad_of(p).square().sum() for p in model.embed.parameters()]).sum()
            norm = (squared.sum() + embed).sqrt()
            for param in model.parameters():
                grad_of(param).mul_(torch.clamp(_MAX_GRAD_NORM / (norm + 1e-6), max=1.0))

        optimizer.register_step_pre_hook(finish_gradients)
        generator = torch.Generator().manual_seed(rank // _TP_SIZE)  # one batch per DP replica
        with profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            schedule=schedule(wait=steps - 3, warmup=1, active=2, repeat=1),
            on_trace_ready=trace_handler(out_url, run_id=run_id),
        ) as prof:
            for _ in range(steps):
                inputs = torch.randn(_BATCH, _FEATURES, generator=generator)
                loss = model(inputs).square().mean()
                dist.all_reduce(loss.detach().clone(), group=dp_group)  # the mean loss over the replicas, to log
                loss.backward()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                prof.step()


# Pipeline parallelism: each rank is one stage, a small MLP and a fixed hold per micro-batch (_MICROBATCH rows).
_MICROBATCH = 32
_STAGE_IO = 64
_STAGE_HIDDEN = 256


@torch.library.custom_op("tracelake::hold", mutates_args=())
def hold(tensor: torch.Tensor, seconds: float) -> torch.Tensor:
    """A copy of ``tensor`` after ``seconds``: a torch op (so the profiler records it as a cpu_op, computation
    like any other) whose time does not depend on how busy the host's cores are, as a device's would not."""
    time.sleep(seconds)
    return tensor.clone()


@hold.register_fake
def _hold_shape(tensor: torch.Tensor, seconds: float) -> torch.Tensor:
    return torch.empty_like(tensor)


def _hold_context(ctx: Any, inputs: tuple[torch.Tensor, float], output: torch.Tensor) -> None:
    ctx.seconds = inputs[1]


def _hold_backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
    return hold(grad, 2 * ctx.seconds), None  # a backward pass costs about twice its forward


hold.register_autograd(_hold_backward, setup_context=_hold_context)


class _Hold(nn.Module):
    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    def forward(self, tensor: torch.Tensor) -> torch.Tensor:
        return hold(tensor, self.seconds)


def _pipeline_loss(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return nn.functional.mse_loss(outputs, targets)


def profile_pipeline_job(
    out_url: str, *, run_id: str = PIPELINE_RUN_ID, stages: int = 2, schedule_name: str = "gpipe",
    microbatches: int = 4, steps: int = 3, hold_ms: float | tuple[float, ...] = 10.0,
) -> None:
    """Run a ``stages``-rank pipeline-parallel job (``torch.distributed.pipelining`` over gloo, one stage per
    rank) with the GPipe or 1F1B schedule over ``microbatches`` micro-batches per step (1F1B needs at least as
    many micro-batches as stages). The last of ``steps`` (at least 2) is profiled:
    ``<out_url>/<run_id>/rank-<r>.step<steps>.pt.trace.json.gz``. A stage is a small MLP then a :func:`hold` of
    ``hold_ms`` per micro-batch in forward (one per stage where a tuple), twice that in backward: the ranks share a
    few busy cores, where real compute would stretch with the load and hide the schedule's bubble, while a stage's
    time on a device would not stretch. Micro-batches are a fixed size, so a stage's time per micro-batch does not
    depend on their number."""
    if schedule_name not in PIPELINE_SCHEDULES:
        raise ValueError(f"schedule_name must be one of {PIPELINE_SCHEDULES}, not {schedule_name!r}")
    holds = hold_ms if isinstance(hold_ms, tuple) else (hold_ms,) * stages
    if len(holds) != stages:
        raise ValueError(f"hold_ms has {len(holds)} values for {stages} stages")
    _run_ranks(
        f"pipeline job {run_id!r} ({schedule_name}, {microbatches} micro-batches) writing to {out_url}", stages,
        _pipeline_rank, out_url, run_id, schedule_name, microbatches, steps, holds,
    )


def _pipeline_rank(
    rank: int, world_size: int, port: int, out_url: str, run_id: str, schedule_name: str, microbatches: int,
    steps: int, holds: tuple[float, ...],
) -> None:
    """One stage of :func:`profile_pipeline_job`."""
    with _gloo_process_group(rank, world_size, port):
        torch.manual_seed(rank)
        stage_module = nn.Sequential(
            nn.Linear(_STAGE_IO, _STAGE_HIDDEN), nn.ReLU(), nn.Linear(_STAGE_HIDDEN, _STAGE_IO),
            _Hold(holds[rank] / 1000),
        )
        stage = PipelineStage(stage_module, rank, world_size, torch.device("cpu"))
        schedule_class = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[schedule_name]
        pipeline = schedule_class(stage, n_microbatches=microbatches, loss_fn=_pipeline_loss)
        optimizer = torch.optim.SGD(stage_module.parameters(), lr=0.01)
        generator = torch.Generator().manual_seed(0)
        inputs = torch.randn(microbatches * _MICROBATCH, _STAGE_IO, generator=generator)
        targets = torch.randn(microbatches * _MICROBATCH, _STAGE_IO, generator=generator)
        with profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=True,
            schedule=schedule(wait=steps - 2, warmup=1, active=1, repeat=1),
            on_trace_ready=trace_handler(out_url, run_id=run_id),
        ) as prof:
            for _ in range(steps):
                if rank == 0:
                    pipeline.step(inputs)
                elif rank == world_size - 1:
                    pipeline.step(target=targets)
                else:
                    pipeline.step()
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                prof.step()
