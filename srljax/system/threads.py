"""The in-process backend: every worker of the layout as a thread, the controller in the caller's thread.

    from srljax.system import run_threads
    result = run_threads(cfg)                       # blocks until done / timeout / a worker fails
    result.exit_code, result.reason                 # 0, "done"
    result.metrics[-1]["episode_return"]            # the trainer's metrics.jsonl lines
    result.worker_metrics("actor", 0)[-1]           # that worker's workers/actor-0.jsonl lines

Same workers, sockets (``tcp://127.0.0.1`` or ``ipc://``) and controller as ``launch.local``;
names live in memory (pass ``names=`` to share them with a test). For tests and notebooks.
"""

from __future__ import annotations

import json
import threading
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from srljax.comm import MemoryNames, NameResolver
from srljax.config import ConfigError, Experiment, write_json
from srljax.devices import threads_problems
from srljax.layout import build_layout, validate
from srljax.run_dir import claim
from srljax.system.controller import Controller, TrialResult
from srljax.system.roles import make_worker

JOIN_S = 30.0


@dataclass
class SystemResult:
    exit_code: int
    reason: str
    message: str
    run_dir: Path
    metrics: list[dict[str, Any]] = field(default_factory=list)
    pids: dict[str, int] = field(default_factory=dict)  # worker name -> pid it registered with
    controller_counters: dict[str, int] = field(default_factory=dict)  # received, drop.<reason>, unknown_worker

    def worker_metrics(self, role: str, index: int) -> list[dict[str, Any]]:
        return read_jsonl(self.run_dir / "workers" / f"{role}-{index}.jsonl")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def result_of(cfg: Experiment, controller: Controller, trial: TrialResult) -> SystemResult:
    pids = {controller.expected[k]: int(v.get("pid", -1)) for k, v in controller.info.items()}
    run_dir = Path(cfg.run_dir)
    return SystemResult(trial.exit_code, trial.reason, trial.message, run_dir, read_jsonl(run_dir / "metrics.jsonl"),
                        pids, controller.server.counters())


def run_threads(cfg: Experiment, names: NameResolver | None = None, verbose: bool = False) -> SystemResult:
    """Run ``cfg`` (``layout.mode=distributed``) with one thread per worker; return when the trial ends."""
    validate(cfg)
    if found := threads_problems(cfg):
        raise ConfigError(found)
    if cfg.layout.mode != "distributed":
        raise ValueError("run_threads needs layout.mode=distributed; use srljax.train for single")
    claim(cfg)  # refuses a run folder an earlier run left files in
    write_json(cfg, Path(cfg.run_dir) / "config.json")
    names = names or MemoryNames()
    layout = build_layout(cfg)
    codes: dict[str, int] = {}
    errors: dict[str, str] = {}
    lock = threading.Lock()

    def exited() -> dict[str, int]:
        with lock:
            return dict(codes)

    def tail(name: str) -> str:
        with lock:
            return errors.get(name, "")

    controller = Controller(cfg, names, layout, exited=exited, log_tail=tail, verbose=verbose)
    workers = [make_worker(role, cfg, i, names) for role, i in layout.workers()]

    def body(worker: Any) -> None:
        try:
            code = worker.run()
        except Exception:  # before the loop (e.g. no controller): the loop reports its own errors
            code = 1
            with lock:
                errors[worker.name] = traceback.format_exc()
        with lock:
            codes[worker.name] = code

    threads = [threading.Thread(target=body, args=(w,), name=w.name, daemon=True) for w in workers]
    for thread in threads:
        thread.start()
    try:
        trial = controller.run()
    finally:
        for worker in workers:
            worker.request_stop("trial ended")  # whoever the controller could not reach
        for thread in threads:
            thread.join(timeout=JOIN_S)
        controller.close()
    stuck = [t.name for t in threads if t.is_alive()]
    if stuck:
        trial = TrialResult(trial.exit_code or 1, trial.reason, f"{trial.message}; threads still running: {stuck}")
    return result_of(cfg, controller, trial)
