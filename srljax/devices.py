"""Which device each worker process uses, and how much GPU memory it may take. Call before JAX starts.

    from srljax import devices
    placement = devices.configure_process(cfg, "policy", local_index=2)   # first thing in the worker
    import jax                                                             # now sees only its GPU

    env = devices.place(cfg, "actor", 5).apply(dict(os.environ))          # or: a child's environment

The rule (one place, so launchers and workers agree), on a node whose visible GPUs are ``gpus``
(``CUDA_VISIBLE_DEVICES`` if set, e.g. by Slurm, else every GPU the driver lists):

- ``trainer`` number k on the node takes ``gpus[k*d:(k+1)*d]`` with d = ``trainer.devices``; on a
  node without GPUs it runs on CPU. ``trainer.memory_fraction`` > 0 preallocates that share.
- ``policy`` / ``actor`` number i runs on CPU or, per ``layout.policy_device`` / ``actor_device``,
  on ``pool[i % len(pool)]``, where ``pool`` is the GPUs no trainer on this node holds
  (``trainer_gpus``), or all of them if trainers hold every GPU. Several such processes share a
  GPU, so they never take JAX's default 75%: ``layout.memory_fraction`` > 0 preallocates that
  share, 0 turns preallocation off (memory on demand).
- anything else (controller, buffer, eval) runs on CPU.

Environment variables are the only knobs JAX reads for this, and it reads them when its backends
start: ``JAX_PLATFORMS``, ``CUDA_VISIBLE_DEVICES``, ``XLA_PYTHON_CLIENT_PREALLOCATE`` and
``XLA_CLIENT_MEM_FRACTION`` (jaxlib 0.10's name; it refuses the old
``XLA_PYTHON_CLIENT_MEM_FRACTION`` alongside it, so that one is removed).
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from srljax.config import Experiment

Role = Literal["trainer", "policy", "actor", "other"]
Platform = Literal["cpu", "gpu"]
MEMORY_KEYS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")


class PlacementError(RuntimeError):
    """The config asks for GPUs this node does not have, or JAX started before ``configure``."""


@dataclass(frozen=True)
class Placement:
    """One process's device choice; ``env()`` is what it sets."""

    platform: Platform
    gpu_ids: tuple[str, ...] = ()  # as CUDA_VISIBLE_DEVICES names them (ordinals or UUIDs)
    memory_fraction: float = 0.0  # > 0: preallocate this share of each GPU
    preallocate: bool | None = None  # None: JAX's default; ignored when memory_fraction > 0

    def env(self) -> dict[str, str | None]:
        """Variables to set (None: remove)."""
        if self.platform == "cpu":
            # an empty CUDA_VISIBLE_DEVICES keeps a CPU worker from opening a CUDA context at all
            return {"JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": "", **{k: None for k in MEMORY_KEYS}}
        out: dict[str, str | None] = {"JAX_PLATFORMS": "cuda,cpu", "CUDA_VISIBLE_DEVICES": ",".join(self.gpu_ids)}
        out.update({k: None for k in MEMORY_KEYS})
        if self.memory_fraction > 0:
            out["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true"
            out["XLA_CLIENT_MEM_FRACTION"] = f"{self.memory_fraction:.4g}"
        elif self.preallocate is not None:
            out["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true" if self.preallocate else "false"
        return out

    def apply(self, environ: MutableMapping[str, str]) -> MutableMapping[str, str]:
        """Write ``env()`` into ``environ`` (a child's env dict, or ``os.environ``) and return it."""
        for key, value in self.env().items():
            if value is None:
                environ.pop(key, None)
            else:
                environ[key] = value
        return environ


def visible_gpus(environ: MutableMapping[str, str] | None = None) -> tuple[str, ...]:
    """GPUs this process may use, without importing JAX or CUDA."""
    environ = os.environ if environ is None else environ
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return tuple(g.strip() for g in listed.split(",") if g.strip() and g.strip() != "-1")
    driver = Path("/proc/driver/nvidia/gpus")
    return tuple(str(i) for i in range(len(list(driver.iterdir())))) if driver.is_dir() else ()


def place(
    cfg: Experiment,
    role: Role,
    local_index: int = 0,
    *,
    gpus: Sequence[str] | None = None,
    trainer_gpus: int = 0,
) -> Placement:
    """The placement of the ``local_index``-th ``role`` process on this node (see the module rule).

    ``gpus``: the node's GPUs (default ``visible_gpus()``); ``trainer_gpus``: how many of them,
    from the front, trainer processes on this node hold.
    """
    gpus = tuple(visible_gpus() if gpus is None else gpus)
    if role == "trainer":
        if not gpus:
            return Placement("cpu")
        d = cfg.trainer.devices
        mine = gpus[local_index * d : (local_index + 1) * d]
        if len(mine) < d:
            raise PlacementError(
                f"trainer {local_index} on this node needs GPUs {local_index * d}..{(local_index + 1) * d - 1} "
                f"(trainer.devices={d}) but the node has {len(gpus)}: {', '.join(gpus)}"
            )
        return Placement("gpu", mine, cfg.trainer.memory_fraction)
    if role not in ("policy", "actor"):
        return Placement("cpu")
    choice = cfg.layout.policy_device if role == "policy" else cfg.layout.actor_device
    if choice == "cpu" or (choice == "auto" and not gpus):
        return Placement("cpu")
    if not gpus:
        key = "layout.policy_device" if role == "policy" else "layout.actor_device"
        raise PlacementError(f"{key}=gpu but this node has no visible GPU (CUDA_VISIBLE_DEVICES, /proc/driver/nvidia)")
    pool = gpus[trainer_gpus:] or gpus
    return Placement("gpu", (pool[local_index % len(pool)],), cfg.layout.memory_fraction, preallocate=False)


def configure(placement: Placement) -> Placement:
    """Apply ``placement`` to this process; raise if JAX's backends have already started."""
    if "jax" in sys.modules:
        from jax._src import xla_bridge  # private, but the only way to ask without starting them

        if xla_bridge.backends_are_initialized():
            raise PlacementError(
                "devices.configure must run before the first JAX computation in this process "
                "(JAX has already chosen its devices); call it at the top of the worker's entry point"
            )
        import jax

        # JAX copied JAX_PLATFORMS into its config at import; the other variables are read later
        jax.config.update("jax_platforms", placement.env()["JAX_PLATFORMS"])
    placement.apply(os.environ)
    return placement


def configure_process(
    cfg: Experiment, role: Role, local_index: int = 0, *, gpus: Sequence[str] | None = None, trainer_gpus: int = 0
) -> Placement:
    """``configure(place(...))``: the one call a worker makes before it imports or uses JAX."""
    return configure(place(cfg, role, local_index, gpus=gpus, trainer_gpus=trainer_gpus))
