"""The environment each worker process starts with: which devices it sees, how much GPU memory it takes.

    env = devices.process_env(cfg, "policy", 1, os.environ, trainer_gpus=4)   # {"CUDA_VISIBLE_DEVICES": "5", ...}
    subprocess.Popen(cmd, env=devices.apply_env(env, dict(os.environ)))       # None values are removed

Every launcher builds a worker's environment here and nowhere else (``launch/processes.py``,
``launch/slurm/task.py``): JAX reads these variables when its backends start, so they are set before the
child imports JAX, and this module imports no JAX. By the role's ``placement`` (``srljax.layout.ROLES``):
trainer k on a node takes ``gpus[k*d:(k+1)*d]`` (d = ``trainer.devices``; ``trainer.memory_fraction``);
policy and actor processes run on CPU or share the GPUs no trainer holds (``layout.*_device``,
``layout.memory_fraction``, never JAX's default 75%); ``cpu`` roles run on CPU with ``JAX_PLATFORMS=cpu``.
Every role but the trainer gets single-threaded XLA:CPU flags so many light processes do not oversubscribe
the cores. A ``JAX_PLATFORMS`` the user exported is kept where the config leaves the choice open (without
``cuda`` it rules GPUs out; ``layout.*_device=gpu`` is then an error). Memory: ``XLA_PYTHON_CLIENT_PREALLOCATE``,
``XLA_CLIENT_MEM_FRACTION`` (the old ``XLA_PYTHON_CLIENT_MEM_FRACTION`` is removed when a fraction is set).
``launch.threads.run_threads`` cannot place roles and refuses configs that ask (``threads_problems``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from srljax.config import Experiment, from_dict
from srljax.layout import ACTOR, POLICY, TRAINER, role_spec

Platform = Literal["cpu", "gpu"]
MEMORY_KEYS = ("XLA_PYTHON_CLIENT_PREALLOCATE", "XLA_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_MEM_FRACTION")
# One XLA:CPU thread pool for the light roles, so many processes on a few cores do not
# oversubscribe them; the trainer keeps XLA's default (all cores for the update).
SINGLE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


class PlacementError(RuntimeError):
    """The config asks for GPUs this node does not have (or the environment rules them out)."""


@dataclass(frozen=True)
class Placement:
    """One process's device choice; ``env()`` is what it sets."""

    platform: Platform
    gpu_ids: tuple[str, ...] = ()  # as CUDA_VISIBLE_DEVICES names them (ordinals or UUIDs)
    memory_fraction: float = 0.0  # > 0: preallocate this share of each GPU
    preallocate: bool | None = None  # None: JAX's default; ignored when memory_fraction > 0

    def env(self) -> dict[str, str | None]:
        """Variables to set (None: remove); memory variables are left alone where JAX's default applies."""
        if self.platform == "cpu":
            # an empty CUDA_VISIBLE_DEVICES keeps a CPU worker from opening a CUDA context at all
            return {"JAX_PLATFORMS": "cpu", "CUDA_VISIBLE_DEVICES": ""}
        out: dict[str, str | None] = {"JAX_PLATFORMS": "cuda,cpu", "CUDA_VISIBLE_DEVICES": ",".join(self.gpu_ids)}
        if self.memory_fraction > 0:
            out.update({k: None for k in MEMORY_KEYS})
            out["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true"
            out["XLA_CLIENT_MEM_FRACTION"] = f"{self.memory_fraction:.4g}"
        elif self.preallocate is not None:
            out.update({k: None for k in MEMORY_KEYS})
            out["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true" if self.preallocate else "false"
        return out


def apply_env(env: Mapping[str, str | None], environ: MutableMapping[str, str]) -> MutableMapping[str, str]:
    """Write ``env`` into ``environ`` (a child's env dict, or ``os.environ``), removing None values; return it."""
    for key, value in env.items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value
    return environ


def visible_gpus(environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """GPUs this process may use, without importing JAX or CUDA."""
    environ = os.environ if environ is None else environ
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return tuple(g.strip() for g in listed.split(",") if g.strip() and g.strip() != "-1")
    driver = Path("/proc/driver/nvidia/gpus")
    return tuple(str(i) for i in range(len(list(driver.iterdir())))) if driver.is_dir() else ()


def place(
    cfg: Experiment,
    role: str,
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
    rule = role_spec(cfg, role).placement
    if rule == TRAINER:
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
    if rule not in (POLICY, ACTOR):
        return Placement("cpu")
    choice = cfg.layout.policy_device if rule == POLICY else cfg.layout.actor_device
    if choice == "cpu" or (choice == "auto" and not gpus):
        return Placement("cpu")
    if not gpus:
        raise PlacementError(f"layout.{rule}_device=gpu but this node has no visible GPU "
                             "(CUDA_VISIBLE_DEVICES, /proc/driver/nvidia)")
    pool = gpus[trainer_gpus:] or gpus
    return Placement("gpu", (pool[local_index % len(pool)],), cfg.layout.memory_fraction, preallocate=False)


def process_env(
    cfg: Experiment,
    role: str,
    local_index: int = 0,
    environ: Mapping[str, str] | None = None,
    *,
    gpus: Sequence[str] | None = None,
    trainer_gpus: int = 0,
) -> dict[str, str | None]:
    """Every variable a ``role`` worker process (number ``local_index`` of its role on this node) must
    start with, given the environment ``environ`` it inherits (None: remove the variable).

    ``gpus`` defaults to ``visible_gpus(environ)``; ``trainer_gpus`` as in ``place``. Raises
    ``PlacementError`` if the config asks for GPUs the node does not have.
    """
    environ = os.environ if environ is None else environ
    gpus = tuple(visible_gpus(environ) if gpus is None else gpus)
    exported = environ.get("JAX_PLATFORMS", "").strip()
    no_gpus_wanted = bool(exported) and not any(p.strip() in ("cuda", "gpu") for p in exported.split(","))
    try:
        placement = place(cfg, role, local_index, gpus=() if no_gpus_wanted else gpus, trainer_gpus=trainer_gpus)
    except PlacementError as error:
        if no_gpus_wanted:
            raise PlacementError(f"{error}: JAX_PLATFORMS={exported} in the environment rules GPUs out") from None
        raise
    out: dict[str, str | None] = {"PYTHONUNBUFFERED": "1", **placement.env()}
    is_trainer = role_spec(cfg, role).placement == TRAINER
    if exported and (placement.platform == "gpu" or (is_trainer and no_gpus_wanted)):
        out["JAX_PLATFORMS"] = exported  # the user's choice, where the config leaves it open
    if not is_trainer:
        out["XLA_FLAGS"] = f"{environ.get('XLA_FLAGS', '')} {SINGLE_THREAD_XLA}".strip()
    return out


def slurm_task_env(run_dir: str | Path, role: str, environ: Mapping[str, str]) -> dict[str, str | None]:
    """``process_env`` of a Slurm task of ``role`` in trial ``run_dir``.

    Slurm gives each task its own GPUs (``--gpus-per-task``; they arrive in
    ``CUDA_VISIBLE_DEVICES``), so no trainer holds any of the GPUs a task sees, and the task's
    index among its role's processes on the node is ``$SLURM_LOCALID``.
    """
    cfg = from_dict(json.loads((Path(run_dir) / "config.json").read_text()))
    return process_env(cfg, role, int(environ.get("SLURM_LOCALID", "0")), environ, trainer_gpus=0)


def threads_problems(cfg: Experiment) -> list[str]:
    """Keys the threads backend cannot honour (every worker shares this process's devices), each with the fix."""
    out = []
    how = "use python -m launch.local (one process per worker) or launch.slurm"
    for key, value in [("trainer.memory_fraction", cfg.trainer.memory_fraction),
                       ("layout.memory_fraction", cfg.layout.memory_fraction)]:
        if value > 0:
            out.append(f"{key}={value} needs a process of its own, but run_threads runs every worker in this one "
                       f"(one JAX client, one memory pool): {how}, or set {key}=0")
    for key, value in [("layout.actor_device", cfg.layout.actor_device),
                       ("layout.policy_device", cfg.layout.policy_device)]:
        if value == "gpu":
            out.append(f"{key}=gpu cannot give each worker its own GPU in run_threads (every worker uses this "
                       f"process's devices): {how}, or set {key}=auto")
    return out
