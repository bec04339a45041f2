"""Role name -> a constructed worker, for the backends: ``make_worker("actor", cfg, 0, names)``.

The class comes from the role's row of ``srljax.layout.ROLES`` (or ``layout.custom_roles``) and is
imported only here, so a worker process loads only what its role needs (the actor no orbax, the
trainer no inference client).
"""

from __future__ import annotations

from typing import Any

from srljax.config import Experiment
from srljax.layout import worker_class
from srljax.system.shell.worker import Worker


def make_worker(role: str, cfg: Experiment, *args: Any, **kwargs: Any) -> Worker:
    """The worker class for ``role``, constructed with ``(cfg, index, names, ...)``."""
    cls = worker_class(cfg, role)
    if not (isinstance(cls, type) and issubclass(cls, Worker)):
        raise TypeError(f"role {role!r}: {cls!r} is not a srljax.system.shell.worker.Worker subclass")
    if cls.role != role:
        raise TypeError(f"role {role!r}: {cls.__name__}.role is {cls.role!r}")
    return cls(cfg, *args, **kwargs)
