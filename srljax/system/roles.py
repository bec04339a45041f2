"""Role name -> worker class, for the backends: ``make_worker("actor", cfg, 0, names)``."""

from __future__ import annotations

from typing import Any

from srljax.system.actor import ActorWorker
from srljax.system.buffer import BufferWorker
from srljax.system.policy import PolicyWorker
from srljax.system.trainer import TrainerWorker
from srljax.system.worker import Worker

WORKERS: dict[str, type[Worker]] = {
    "actor": ActorWorker, "policy": PolicyWorker, "trainer": TrainerWorker, "buffer": BufferWorker,
}


def make_worker(role: str, *args: Any, **kwargs: Any) -> Worker:
    """The worker class for ``role``, constructed with ``(cfg, index, names, ...)``."""
    if role not in WORKERS:
        raise ValueError(f"unknown worker role {role!r}; known: {', '.join(WORKERS)}")
    return WORKERS[role](*args, **kwargs)
