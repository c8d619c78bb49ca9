"""Running under a ``torch.distributed`` launcher (torchrun, or any launcher with ``env://``
rendezvous): every process is one rank, and the kit joins the launcher's process group
instead of starting its own ranks.

``torchrun --nproc-per-node N -m hcspec.conformance run TARGET --only parallel`` runs the CLI in
N processes. Each finds the launcher's variables (:func:`detect`: ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) and joins the group
(:func:`join`: gloo on the CPU, NCCL with one CUDA device per local rank). Rank 0 runs the kit
as a single-process run would; when it reaches the multi-process properties it sends the
job to every rank (:func:`run_everywhere`), runs its own share, gathers the ranks' records and
evaluates them. The other ranks only follow rank 0's instructions (:func:`follow`) and write
nothing. At the end rank 0 sends its exit code (:func:`finish`), and every rank exits with it
(a failing one after rank 0: :func:`outlast_rank_zero`).
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import torch
import torch.distributed as dist

from hcspec.conformance.parallel import worker

LAUNCHER_VARIABLES: Final = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
"""The variables an ``env://`` launcher sets in every process (all must be present)."""

GROUP_TIMEOUT: Final = datetime.timedelta(hours=6)
"""How long a rank waits for rank 0's next instruction (rank 0 runs the single-process
properties meanwhile); the sharded cases themselves run in groups with the run's timeout."""


@dataclass(frozen=True)
class Launch:
    """This process's place in the launcher's job.

    Attributes:
        rank, world_size: in the whole job. local_rank, local_world_size: on this node
        (``LOCAL_RANK``/``LOCAL_WORLD_SIZE``; 0 and ``world_size`` when the launcher does not
        set them).
    """

    rank: int
    world_size: int
    local_rank: int = 0
    local_world_size: int = 1


def detect(environ: Mapping[str, str] | None = None) -> Launch | None:
    """The launch this process is part of, from the launcher's environment variables, or None
    when :data:`LAUNCHER_VARIABLES` are not all set (a plain single-process run).

    Raises:
        ValueError: a variable is not an integer, or RANK is outside ``[0, WORLD_SIZE)``.
    """
    env = os.environ if environ is None else environ
    if not all(env.get(name) for name in LAUNCHER_VARIABLES):
        return None
    try:
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local_rank = int(env.get("LOCAL_RANK", "0"))
        local_world = int(env.get("LOCAL_WORLD_SIZE", str(world)))
    except ValueError as exc:
        raise ValueError(f"the launcher's environment is not usable: {exc}") from None
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"the launcher's environment is not usable: RANK={rank}, "
                         f"WORLD_SIZE={world}")
    return Launch(rank, world, local_rank, local_world)


def backend_for(device: str) -> str:
    """``nccl`` for ``cuda``, else ``gloo``."""
    return "nccl" if device == "cuda" else "gloo"


_JOINED: list[Launch] = []


def join(launch: Launch, device: str) -> None:
    """Join the launcher's process group (``env://``) as ``launch.rank``, with the backend of
    ``device`` (the run's resolved device; ``cuda``: this process uses CUDA device
    ``local_rank``).

    Raises:
        RuntimeError: the rendezvous fails (as ``torch.distributed`` raises it).
    """
    if device == "cuda":
        torch.cuda.set_device(launch.local_rank)
    if not dist.is_initialized():
        dist.init_process_group(backend_for(device), init_method="env://", rank=launch.rank,
                                world_size=launch.world_size, timeout=GROUP_TIMEOUT)
    _JOINED[:] = [launch]


def joined() -> Launch | None:
    """The launch whose group this process joined (:func:`join`), or None."""
    return _JOINED[0] if _JOINED and dist.is_initialized() else None


def device_of(launch: Launch, device: str) -> str:
    """This rank's device: ``cuda:<local_rank>`` for ``cuda``, else ``device``."""
    return f"cuda:{launch.local_rank}" if device == "cuda" else device


def _broadcast(message: list[Any] | None) -> list[Any]:
    box: list[Any] = [message]
    dist.broadcast_object_list(box, src=0)
    received: list[Any] = box[0]
    return received


def run_everywhere(job: worker.Job) -> dict[int, dict[str, Any]]:
    """On rank 0: send ``job`` to every rank, run rank 0's share, gather every rank's results
    (:func:`hcspec.conformance.parallel.worker.run_cases`). Returns rank -> results.

    Raises:
        RuntimeError: not rank 0 of a joined group; a collective of the exchange failed.
    """
    launch = joined()
    if launch is None or launch.rank != 0:
        raise RuntimeError("run_everywhere: only rank 0 of a joined launcher group sends jobs")
    _broadcast(["run", job])
    own = worker.run_cases(job, 0, device_of(launch, job.device))
    gathered: list[Any] = [None] * launch.world_size
    dist.gather_object(own, gathered, dst=0)
    return {rank: results for rank, results in enumerate(gathered)}


def follow(launch: Launch, device: str) -> int:
    """On a rank other than 0: run the jobs rank 0 sends until it sends the exit code;
    return that code. Writes nothing.

    Raises:
        RuntimeError: a collective with rank 0 failed (rank 0 died: the launcher stops the
            job).
    """
    while True:
        message = _broadcast(None)
        if message[0] == "exit":
            code: int = message[1]
            return code
        job: worker.Job = message[1]
        results = worker.run_cases(job, launch.rank, device_of(launch, device))
        dist.gather_object(results, None, dst=0)


def finish(code: int) -> None:
    """On rank 0: send the exit code to the other ranks (they return it from :func:`follow`)
    and leave the group."""
    if joined() is not None:
        _broadcast(["exit", code])
        dist.destroy_process_group()
    _JOINED.clear()


FOLLOWER_GRACE_SECONDS: Final = 30.0
"""How long a rank other than 0 waits, after a non-zero exit code, for the launcher to stop it
(:func:`outlast_rank_zero`)."""


def outlast_rank_zero(code: int) -> None:
    """On a rank other than 0, after :func:`follow` returned ``code``: when it is not 0, wait
    up to :data:`FOLLOWER_GRACE_SECONDS` before returning. torchrun stops every worker of a job
    as soon as one exits non-zero, and its error summary names the first; waiting makes that
    rank 0 (whose report and exit code are the verdict) rather than a follower that left
    first and had rank 0 stopped mid-exit. A launcher that does not stop the others only sees
    them exit later, with the same code."""
    if code != 0:
        time.sleep(FOLLOWER_GRACE_SECONDS)


def leave() -> None:
    """On any rank: leave the group (after :func:`follow` returned)."""
    if dist.is_initialized():
        dist.destroy_process_group()
    _JOINED.clear()
