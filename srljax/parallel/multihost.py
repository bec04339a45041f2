"""Join the trainer processes of one group into a ``jax.distributed`` runtime (multi-host trainers).

    from srljax.parallel import multihost as distributed
    distributed.join_via_names(names, "exp", "t0", process_id=rank, num_processes=2, host="10.0.0.7")
    learner = Learner(cfg, spec)           # its mesh now spans every device of every process

    distributed.join_via_slurm()           # or: inside an srun step, one task per trainer node

Process 0 runs the coordinator, bound to its own node address only (``jax.distributed`` would bind
every interface by default) and, for tests, to 127.0.0.1. The others find it through name
resolution (process 0 publishes ``host:port`` under ``<experiment>/<trial>/coordinator/<group>``)
or through Slurm's environment (first node of the step, a port derived from the job and step ids).
CPU-only groups run their collectives over gloo.

After ``initialize`` JAX handles SIGTERM itself (preemption sync); supervisors should stop such
processes with SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass

from srljax.comm.names import NameResolver, worker_key
from srljax.layout import TRAINER

SLURM_PORT_BASE = 61440  # the top 4,096 ports, the range jax's own Slurm detection uses
ENTRY_TTL_S = 600.0  # a crashed join leaves no coordinator entry behind for longer than this


@dataclass(frozen=True)
class Group:
    """Everything ``jax.distributed.initialize`` needs, resolved."""

    coordinator: str  # host:port every process connects to
    process_id: int
    num_processes: int
    bind: str | None = None  # host:port process 0 listens on (None on the others)


def _free_port(host: str) -> int:
    # Another process could take the port before the coordinator binds it; the join then fails
    # loudly at once (address in use) and the worker's restart picks a new one.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def from_names(
    names: NameResolver,
    experiment: str,
    trial: str,
    *,
    process_id: int,
    num_processes: int,
    host: str = "127.0.0.1",
    group: str = TRAINER,
    timeout_s: float = 300.0,
) -> Group:
    """Process 0 picks a port on ``host`` and publishes it; the others wait for that entry.

    ``host``: process 0's reachable address on the cluster network (the node's address; 127.0.0.1
    when every process is on one machine). Ignored on the other processes.
    """
    key = worker_key(experiment, trial, "coordinator", group)
    if process_id == 0:
        address = f"{host}:{_free_port(host)}"
        names.add(key, address, ttl=ENTRY_TTL_S)
        return Group(address, 0, num_processes, bind=address)
    return Group(names.wait(key, timeout=timeout_s), process_id, num_processes)


def slurm_first_host(nodelist: str) -> str:
    """First hostname of a Slurm node list: ``n[1-3],gpu7`` -> ``n1``; ``node[007,010]`` -> ``node007``."""
    cut = min((i for i in (nodelist.find(","), nodelist.find("[")) if i >= 0), default=len(nodelist))
    if cut == len(nodelist) or nodelist[cut] == ",":
        return nodelist[:cut]
    inside = nodelist[cut + 1 :].split("]", 1)[0]
    return nodelist[:cut] + inside.split(",", 1)[0].split("-", 1)[0]


def from_slurm(environ: Mapping[str, str] | None = None, port: int | None = None) -> Group:
    """The group of the current ``srun`` step: rank ``SLURM_PROCID`` of ``SLURM_STEP_NUM_TASKS``.

    The coordinator is on the step's first node, port ``port`` or one derived from the job and
    step ids (so two groups in one job do not collide). Process 0 binds the address that node
    name resolves to.
    """
    env = os.environ if environ is None else environ
    try:
        job, step = int(env["SLURM_JOB_ID"]), int(env.get("SLURM_STEP_ID", "0") or 0)
        rank = int(env["SLURM_PROCID"])
        size = int(env.get("SLURM_STEP_NUM_TASKS") or env["SLURM_NTASKS"])
        nodelist = env.get("SLURM_STEP_NODELIST") or env["SLURM_JOB_NODELIST"]
    except KeyError as err:
        raise RuntimeError(f"not inside a Slurm step: {err.args[0]} is unset; run under srun") from None
    host = slurm_first_host(nodelist)
    port = port or SLURM_PORT_BASE + (job * 16 + step) % 4096
    bind = f"{socket.gethostbyname(host)}:{port}" if rank == 0 else None
    return Group(f"{host}:{port}", rank, size, bind=bind)


def initialize(group: Group, timeout_s: int = 300) -> Group:
    """``jax.distributed.initialize`` for ``group``; returns once every process has joined.

    Must run before any JAX computation in the process. A process still alone after
    ``timeout_s`` is ended by JAX itself (a fatal error, not an exception): the launcher's
    restart policy handles it like any lost worker.
    """
    import jax

    # XLA:CPU needs a cross-process collectives backend or multi-process programs fail to run
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(
        coordinator_address=group.coordinator,
        num_processes=group.num_processes,
        process_id=group.process_id,
        # explicit everything: Slurm auto-detection would also pin one GPU per task
        # (local_device_ids=[SLURM_LOCALID]), but a trainer task uses all of its node's trainer GPUs
        cluster_detection_method="deactivate",
        coordinator_bind_address=group.bind,
        initialization_timeout=timeout_s,
    )
    return group


def join_via_names(
    names: NameResolver,
    experiment: str,
    trial: str,
    *,
    process_id: int,
    num_processes: int,
    host: str = "127.0.0.1",
    group: str = TRAINER,
    timeout_s: int = 300,
) -> Group:
    """``from_names`` + ``initialize``; process 0 then deletes the entry so a restarted group
    does not read a dead coordinator's address. (A group that crashed mid-join leaves its entry
    for up to ``ENTRY_TTL_S``; a restart inside that window can time out once.)"""
    found = from_names(
        names, experiment, trial, process_id=process_id, num_processes=num_processes, host=host, group=group,
        timeout_s=timeout_s,
    )
    initialize(found, timeout_s)
    if process_id == 0:  # everyone has connected once initialize returns on process 0
        names.delete(worker_key(experiment, trial, "coordinator", group))
    return found


def join_via_slurm(port: int | None = None, timeout_s: int = 300) -> Group:
    """``initialize(from_slurm(port=port))``: one call per task of an ``srun`` step."""
    return initialize(from_slurm(port=port), timeout_s)


def shutdown() -> None:
    """Leave the group (every process should, at the end, so the coordinator exits cleanly)."""
    import jax

    jax.distributed.shutdown()
