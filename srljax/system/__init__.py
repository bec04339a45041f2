"""Worker shells (layer 2): stateful processes that own sockets, envs and devices and call layer 1.

    from srljax.system import run_threads
    result = run_threads(cfg)            # the whole layout as threads in this process (tests, notebooks)
    result.exit_code, result.metrics[-1]["episode_return"]

    python -m launch.local CFG.py        # the same layout, one process per worker (launch/processes.py)

Roles: ``ActorWorker`` (actor.py), ``PolicyWorker`` (policy.py), ``TrainerWorker`` (trainer.py),
``BufferWorker`` (buffer.py), all on the ``Worker`` base (worker.py: loop, control, heartbeats,
metrics), driven by the ``Controller`` (controller.py).
"""

from __future__ import annotations

from srljax.system.actor import ActorWorker
from srljax.system.buffer import BufferWorker
from srljax.system.controller import Controller, TrialResult
from srljax.system.policy import PolicyWorker
from srljax.system.roles import WORKERS, make_worker
from srljax.system.threads import SystemResult, run_threads
from srljax.system.trainer import TrainerWorker
from srljax.system.worker import Worker

__all__ = ["ActorWorker", "BufferWorker", "Controller", "PolicyWorker", "SystemResult", "TrainerWorker",
           "TrialResult", "WORKERS", "Worker", "make_worker", "run_threads"]
