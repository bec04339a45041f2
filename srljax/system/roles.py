"""Role name -> worker class, for the backends: ``make_worker("actor", cfg, 0, names)``.

One ``match``, importing only the chosen role's module: a worker process then loads only what
its role needs (the actor no orbax, the trainer no inference client).
"""

from __future__ import annotations

from typing import Any

from srljax.system.worker import Worker

ROLES = ("trainer", "buffer", "policy", "actor")


def worker_class(role: str) -> type[Worker]:
    match role:
        case "actor":
            from srljax.system.actor import ActorWorker

            return ActorWorker
        case "policy":
            from srljax.system.policy import PolicyWorker

            return PolicyWorker
        case "trainer":
            from srljax.system.trainer import TrainerWorker

            return TrainerWorker
        case "buffer":
            from srljax.system.buffer import BufferWorker

            return BufferWorker
    raise ValueError(f"unknown worker role {role!r}; known: {', '.join(ROLES)}")


def make_worker(role: str, *args: Any, **kwargs: Any) -> Worker:
    """The worker class for ``role``, constructed with ``(cfg, index, names, ...)``."""
    return worker_class(role)(*args, **kwargs)
