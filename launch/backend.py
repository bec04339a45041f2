"""The one interface every backend renders the worker graph through, and the trial loop they share.

    workers = ThreadWorkers(cfg, names)              # launch/threads.py: each worker a thread
    workers = WorkerProcesses(run_dir, envs)         # launch/processes.py: each worker a process
    result, killed = run_trial(cfg, workers, names, build_layout(cfg))

A backend is anything with

- ``start(role, index)``: start that worker (it finds the controller through ``names``); the
  controller calls it again for a worker it restarts, after ``kill``;
- ``kill(name)``: make sure worker ``"role/i"`` is gone, now, before a successor starts (the
  controller restarts lost workers, ``layout.max_restarts``);
- ``exited() -> {"role/i": exit code}``: the workers that have ended (of a restarted worker: the
  newest one, once started);
- ``tail(name) -> str``: the last lines of a worker's log (or its traceback), for failure messages;
- ``shutdown(grace_s) -> [names]``: make sure every worker is gone; return those that had to be killed.

The Slurm backend (``launch/slurm/controller.py``, ``GroupSteps``) has the same methods: there the
batch script's ``srun`` steps start whole groups and end with the job; a restarted worker is a
single-task ``srun`` step of the controller's own, which ``shutdown`` ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from srljax.comm import NameResolver
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import Layout
from srljax.system.shell.controller import Controller, TrialResult

STOP_GRACE_S = 5.0  # after a Ctrl-C before the controller ran: how long workers get to stop


class Backend(Protocol):
    def start(self, role: str, index: int) -> None: ...

    def kill(self, name: str) -> None: ...

    def exited(self) -> dict[str, int]: ...

    def tail(self, name: str) -> str: ...

    def shutdown(self, grace_s: float = ...) -> list[str]: ...


def run_trial(cfg: Experiment, backend: Backend, names: NameResolver, layout: Layout, *, verbose: bool = True,
              started: Callable[[], None] | None = None,
              keys: KeyRing | None = None, resume: bool = False) -> tuple[TrialResult | None, list[str], Controller]:
    """Start every worker of ``layout`` through ``backend``, run the controller to the trial's end,
    shut the backend down. Returns (result, killed, controller); result None if interrupted before
    the controller ran. ``started()`` is called once every worker has been started. ``keys``: the
    trial's CURVE keys (``srljax.system.shell.auth``), the controller's among them; None: auth off.
    ``resume``: the trial continues from its newest checkpoint (``srljax.storage.run_dir``)."""
    controller = Controller(cfg, names, layout, exited=backend.exited, log_tail=backend.tail, verbose=verbose,
                            keys=keys, start=backend.start, kill=backend.kill)
    controller.resume = resume  # the trainers restore the newest checkpoint in setup
    result: TrialResult | None = None
    try:
        for role, index in layout.workers():
            backend.start(role, index)
        if started is not None:
            started()
        result = controller.run()
    except KeyboardInterrupt:  # before the controller's own handler was running
        controller.stop_all(grace_s=STOP_GRACE_S)
    finally:
        try:
            killed = backend.shutdown()
        except KeyboardInterrupt:  # impatience: no more waiting
            killed = backend.shutdown(grace_s=0.5)
        controller.close()
    return result, killed, controller
