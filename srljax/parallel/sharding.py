"""Data parallelism for trainers: one mesh, the batch split on its env axis, the state replicated.

This is the current JAX form of what used to be ``pmap``: ``jax.jit`` with ``NamedSharding``
over a one-axis ``Mesh``. The algorithm math never names the axis; it only calls
``split_samples`` where it knows an axis holds independent samples::

    mesh = make_mesh(devices_per_host=4, num_hosts=1)        # DeviceError if fewer are visible
    state = jax.device_put(state, replicated(mesh))
    update = jax.jit(algo.update, in_shardings=(replicated(mesh), trajectory_sharding(mesh, batch)),
                     out_shardings=replicated(mesh))
    with jax.set_mesh(mesh):                                 # so split_samples sees the mesh
        update = update.lower(state, batch).compile()
    state, metrics = update(state, put_batch(batch, trajectory_sharding(mesh, batch)))

Shape letters: T time, B envs (columns), ``*O`` observation shape. The mesh axis ``batch``
spans every trainer device of every host, ordered by process, so host ``p`` owns a contiguous
block of B columns and feeds exactly that block (``put_batch`` on each host).
"""

from __future__ import annotations

import collections
from typing import Any, TypeVar

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from algos.parallel import BATCH, split_samples  # noqa: E402,F401  (re-exported: the math calls it, the mesh names it)
from srljax.types import Trajectory

T = TypeVar("T")


class DeviceError(RuntimeError):
    """The trainer asked for devices this process (or the distributed group) does not have."""


def make_mesh(devices_per_host: int = 1, num_hosts: int = 1) -> Mesh:
    """A 1-D ``batch`` mesh over the first ``devices_per_host`` local devices of every process.

    Built with ``Mesh(...)`` (classic ``Auto`` axis type), not ``jax.make_mesh``, whose default
    axis types became explicit in JAX 0.10 and would change how un-annotated ops are sharded.
    Raises ``DeviceError`` naming the devices found when there are too few.
    """
    if jax.process_count() != num_hosts:
        raise DeviceError(
            f"trainer.num_hosts={num_hosts} but this JAX runtime has {jax.process_count()} process(es); "
            "multi-host trainers join with srljax.parallel.multihost.initialize(...) before building the Learner"
        )
    local = jax.local_devices()
    if len(local) < devices_per_host:
        raise DeviceError(
            f"trainer.devices={devices_per_host} but process {jax.process_index()} sees {len(local)} "
            f"{jax.default_backend()} device(s): {', '.join(str(d) for d in local)}. Lower trainer.devices, "
            "run where more accelerators are visible (check CUDA_VISIBLE_DEVICES), or for tests on CPU set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={devices_per_host} before JAX starts"
        )
    by_process: dict[int, list[jax.Device]] = collections.defaultdict(list)
    for device in jax.devices():
        by_process[device.process_index].append(device)
    short = {p: len(ds) for p, ds in by_process.items() if len(ds) < devices_per_host}
    if short:
        raise DeviceError(f"trainer.devices={devices_per_host} but some processes have fewer devices: {short}")
    chosen = [d for p in sorted(by_process) for d in sorted(by_process[p], key=lambda d: d.id)[:devices_per_host]]
    return Mesh(np.array(chosen), (BATCH,))


def replicated(mesh: Mesh) -> NamedSharding:
    """Every device holds the whole value: params, optimizer state, metrics."""
    return NamedSharding(mesh, P())


def batch_axis_sharding(mesh: Mesh, axis: int) -> NamedSharding:
    """Split dimension ``axis`` over the mesh; other dimensions whole."""
    return NamedSharding(mesh, P(*([None] * axis), BATCH))


def trajectory_sharding(mesh: Mesh, traj: Trajectory) -> Trajectory:
    """A ``Trajectory``-shaped tree of shardings: [T+1, B, ...] fields split on B, ``policy_version`` [B] on B."""
    on_b = batch_axis_sharding(mesh, 1)
    return Trajectory(
        obs=on_b,
        action=on_b,
        reward=on_b,
        terminated=on_b,
        truncated=on_b,
        extras={k: on_b for k in traj.extras},
        policy_version=batch_axis_sharding(mesh, 0),
    )


def put_batch(batch: Any, shardings: Any) -> Any:
    """Start moving this process's part of a batch to its devices; returns global arrays at once.

    One process: ``jax.device_put`` (asynchronous, so the copy runs while an earlier update
    computes). Several: each process passes only its own columns (B / num_hosts of them) and
    ``jax.make_array_from_process_local_data`` assembles the global array without copying
    between hosts. Arrays already placed with these shardings pass through untouched.
    """
    if jax.process_count() == 1:
        return jax.device_put(batch, shardings)

    def one(x: Any, sharding: NamedSharding) -> jax.Array:
        if isinstance(x, jax.Array) and x.sharding == sharding:
            return x
        x = np.asarray(x)
        axis = next(i for i, name in enumerate(sharding.spec) if name == BATCH)
        global_shape = tuple(n * jax.process_count() if i == axis else n for i, n in enumerate(x.shape))
        return jax.make_array_from_process_local_data(sharding, x, global_shape)

    return jax.tree.map(one, batch, shardings)


def host_local(tree: T) -> T:
    """The copy on this process's first device of each replicated leaf (no transfer, no collective).

    Replicated global arrays of a multi-host mesh cannot be read with ``np.asarray``; their
    local replica can. Also keeps single-process actors from running ``act`` on every device.
    """
    return jax.tree.map(lambda x: x.addressable_data(0) if isinstance(x, jax.Array) else x, tree)


def needs_sync(mesh: Mesh) -> bool:
    """XLA:CPU with several devices: wait for each update before dispatching the next.

    Back-to-back jitted steps containing an all-reduce hung (XLA aborts after 60 s) in most
    runs on fake CPU devices here; blocking every ~10 steps avoided it. Accelerators stream.
    """
    return mesh.devices.size > 1 and mesh.devices.flat[0].platform == "cpu"


def sample_sharding(mesh: Mesh, batch: Any) -> Any:
    """A tree of shardings for a batch of independent samples (``ReplayBatch``): every leaf split on axis 0."""
    return jax.tree.map(lambda _: batch_axis_sharding(mesh, 0), batch)
