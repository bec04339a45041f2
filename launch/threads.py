"""The in-process backend: every worker of the layout as a thread, the controller in the caller's thread.

    from launch.threads import run_threads
    result = run_threads(cfg)                       # blocks until done / timeout / a worker fails
    result.exit_code, result.reason                 # 0, "done"
    result.metrics[-1]["episode_return"]            # the trainer's metrics.jsonl lines
    result.worker_metrics("actor", 0)[-1]           # that worker's workers/actor-0.jsonl lines

Same workers, sockets (``tcp://127.0.0.1`` or ``ipc://``), controller and trial loop
(``launch/backend.py``) as ``launch.local``; names live in memory (pass ``names=`` to share them
with a test). For tests and notebooks. One process cannot give each worker its own GPU or
memory fraction, so configs that ask for that are refused (``srljax.parallel.devices.threads_problems``).
"""

from __future__ import annotations

import json
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from launch.backend import run_trial
from srljax.comm import MemoryNames, NameResolver
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import build_layout
from srljax.parallel.devices import threads_problems
from srljax.prepare import prepare, register
from srljax.storage import run_dir as run_dir_lock
from srljax.system.shell import auth
from srljax.system.shell.names_service import worker_names
from srljax.system.shell.roles import make_worker
from srljax.system.shell.worker import Worker

JOIN_S = 30.0

register("launch.threads", threads_problems, ("threads",))  # what one process cannot share among worker threads


@dataclass
class SystemResult:
    exit_code: int
    reason: str
    message: str
    run_dir: Path
    metrics: list[dict[str, Any]] = field(default_factory=list)
    pids: dict[str, int] = field(default_factory=dict)  # worker name -> pid it registered with
    controller_counters: dict[str, int] = field(default_factory=dict)  # received, drop.<reason>, unknown_worker
    restarts: dict[str, Any] = field(default_factory=dict)  # as in status.json: total, by_worker, events

    def worker_metrics(self, role: str, index: int) -> list[dict[str, Any]]:
        return read_jsonl(self.run_dir / "workers" / f"{role}-{index}.jsonl")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class ThreadWorkers:
    """The backend: ``start`` runs a worker's ``run()`` in a daemon thread; ``tail`` is its traceback.
    ``keys``: the trial's CURVE keys, in memory (None: auth off).

    A thread cannot be killed: ``kill`` asks the worker to stop and abandons it. Its exit no longer
    counts, and the controller ignores its messages (they carry the old ``incarnation``); a thread
    hung for good (an env that never returns) stays behind as a daemon until the process ends.
    """

    def __init__(self, cfg: Experiment, names: NameResolver, keys: KeyRing | None = None):
        self.cfg, self.names, self.keys = cfg, names, keys
        self.workers: dict[str, Worker] = {}  # name -> the worker now serving it
        self.threads: dict[str, threading.Thread] = {}
        self.abandoned: list[tuple[Worker, threading.Thread]] = []  # killed for a restart
        self._codes: dict[str, int] = {}
        self._errors: dict[str, str] = {}
        self._lock = threading.Lock()

    def start(self, role: str, index: int) -> None:
        worker = make_worker(role, self.cfg, index, worker_names(self.cfg, self.names), keys=self.keys)
        thread = threading.Thread(target=self._body, args=(worker,), name=worker.name, daemon=True)
        with self._lock:
            self.workers[worker.name] = worker
            self.threads[worker.name] = thread
            self._codes.pop(worker.name, None)
        thread.start()

    def kill(self, name: str) -> None:
        with self._lock:
            worker, thread = self.workers.pop(name, None), self.threads.pop(name, None)
            self._codes.pop(name, None)
        if worker is not None and thread is not None:
            worker.request_stop("replaced by a restart")
            self.abandoned.append((worker, thread))

    def _body(self, worker: Worker) -> None:
        try:
            code = worker.run()
        except Exception:  # before the loop (e.g. no controller): the loop reports its own errors
            code = 1
            with self._lock:
                self._errors[worker.name] = traceback.format_exc()
        with self._lock:
            if self.workers.get(worker.name) is worker:  # an abandoned one's exit is no news
                self._codes[worker.name] = code

    def exited(self) -> dict[str, int]:
        with self._lock:
            return dict(self._codes)

    def tail(self, name: str) -> str:
        with self._lock:
            return self._errors.get(name, "")

    def shutdown(self, grace_s: float = JOIN_S) -> list[str]:
        """Ask every worker to stop (whoever the controller could not reach), join; return the stuck ones
        (abandoned threads only get a moment: they were replaced and nobody waits for them)."""
        for worker in [*self.workers.values(), *(w for w, _ in self.abandoned)]:
            worker.request_stop("trial ended")
        for thread in self.threads.values():
            thread.join(timeout=grace_s)
        for _, thread in self.abandoned:
            thread.join(timeout=1.0)
        return [t.name for t in self.threads.values() if t.is_alive()]


def run_threads(cfg: Experiment, names: NameResolver | None = None, verbose: bool = False,
                keys: KeyRing | None = None, resume: bool | int = False) -> SystemResult:
    """Run ``cfg`` (``layout.mode=distributed``) with one thread per worker; return when the trial ends.

    ``layout.auth`` on (``auto`` is on, as in every backend) gives every worker its
    role's CURVE key pair, generated in memory (or ``keys``, e.g. a test's that also plays a peer).
    """
    if cfg.layout.mode != "distributed":
        raise ValueError("run_threads needs layout.mode=distributed; use srljax.loops.train for single")
    cfg = auth.resolved(cfg, slurm=False)
    prepare(cfg, resume, "threads")  # checks (threads_problems too), the folder, config.json, the compile cache
    names = names or MemoryNames()
    keys = keys or auth.prepare(cfg)  # memory only: every worker is in this process
    workers = ThreadWorkers(cfg, names, keys)
    try:
        trial, stuck, controller = run_trial(cfg, workers, names, build_layout(cfg), verbose=verbose, keys=keys,
                                               resume=run_dir_lock.resuming(resume))
    finally:
        run_dir_lock.release(cfg.run_dir)  # the trial's lock, taken by prepare (srljax.storage.run_dir)
    if trial is None:
        raise KeyboardInterrupt
    message = trial.message + (f"; threads still running: {stuck}" if stuck else "")
    pids = {controller.expected[k]: int(v.get("pid", -1)) for k, v in controller.info.items()}
    run_dir = Path(cfg.run_dir)
    return SystemResult(trial.exit_code or (1 if stuck else 0), trial.reason, message, run_dir,
                        read_jsonl(run_dir / "metrics.jsonl"), pids, controller.server.counters(),
                        controller.restarts.summary())
