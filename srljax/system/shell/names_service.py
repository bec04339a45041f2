"""Which name service a trial's workers use (``layout.names``), and the controller's side of it.

    store = served_store(cfg)                   # Controller.__init__: a MemoryNames when layout.names=controller
    names = worker_names(cfg, names)            # every backend, for the workers it starts

``layout.names=folder`` (default): workers use what the backend gives them, the run folder's
``names/`` (one file per name: local processes and Slurm) or one ``MemoryNames`` (threads).
``layout.names=controller``: the controller keeps the names (``served_store``) and answers
``names`` messages on its control socket (``Controller._tick``, ``srljax/comm/served_names.py``);
the folder (or memory) holds one entry, the controller's address, which a worker reads once to
connect; every other ``add``/``get``/``list`` of the worker (``Worker.ask_controller``) rides the
control connection it holds anyway. What it costs at 100 to 10,000 workers is printed by
``bench/control_plane.py``.
"""

from __future__ import annotations

from srljax.comm.names import MemoryNames, NameResolver, worker_key
from srljax.comm.served_names import ServedNames
from srljax.comm.served_names import answer as answer_names  # noqa: F401  (Controller._tick)
from srljax.config import Experiment
from srljax.layout import CONTROLLER


def served_store(cfg: Experiment) -> MemoryNames | None:
    """The names the controller keeps and serves (None for ``layout.names=folder``)."""
    return MemoryNames() if cfg.layout.names == "controller" else None


def worker_names(cfg: Experiment, bootstrap: NameResolver) -> NameResolver:
    """What a backend hands a worker: ``bootstrap`` itself, or names served by the controller, of
    which only the controller's own address is read from ``bootstrap``."""
    if cfg.layout.names != "controller":
        return bootstrap
    return ServedNames(bootstrap, direct={worker_key(cfg.name, cfg.trial, CONTROLLER, 0)})
