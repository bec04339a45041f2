"""The local process backend: one OS process per worker of the layout, the controller in this one.

    python -m launch.local configs/cartpole_ppo_distributed.py      # calls run_distributed(cfg)

    from launch.processes import run_distributed
    exit_code = run_distributed(cfg)

Refuses a run folder an earlier run left things in (``srljax.storage.run_dir``), writes
``runs/<exp>/<trial>/config.json``, starts ``python -m srljax.system.shell.run RUN_DIR ROLE I`` per
worker (each in its own process group, output in ``logs/<role>-<i>.log``, its GPUs, memory
fraction and XLA threads set by ``srljax.parallel.devices.process_env``), prints where the run folder and
every log are, and runs the ``Controller`` here. Sockets are ``tcp://127.0.0.1``
or ``ipc://`` (``layout.transport``), names are files under ``names/``. Ctrl-C or SIGTERM stops
every worker; whatever has not exited after the grace period is killed with its whole process
group, so nothing is left behind. Exit code: 0 done, 1 a worker failed, was lost or hung, the
trial stalled or timed out, 2 bad config (or a used run folder, or GPUs the node lacks), 130
interrupted.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from launch.backend import run_trial
from srljax.comm import DirectoryNames
from srljax.config import ConfigError, Experiment
from srljax.layout import Layout, plan_of
from srljax.parallel.devices import PlacementError, apply_env, process_env, visible_gpus
from srljax.prepare import check, prepare
from srljax.storage import run_dir as run_folder
from srljax.system.shell import auth
from srljax.telemetry.progress import summary_line, trial_record

KILL_GRACE_S = 5.0  # after the controller's stop: SIGTERM, this long, then SIGKILL
TAIL_LINES = 20


def worker_env(cfg: Experiment, role: str, index: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment worker ``role``/``index`` starts with on this node (``srljax.parallel.devices.process_env``).

    Every worker is on this one node: its index on the node is its index in its role, and the
    config's trainers (``trainer.num_hosts`` x ``trainer.devices`` GPUs) hold the first GPUs.
    """
    environ = os.environ if environ is None else environ
    trainer_gpus = cfg.trainer.num_hosts * cfg.trainer.devices if visible_gpus(environ) else 0
    return dict(apply_env(process_env(cfg, role, index, environ, trainer_gpus=trainer_gpus), dict(environ)))


def worker_envs(cfg: Experiment, layout: Layout) -> dict[tuple[str, int], dict[str, str]]:
    """``worker_env`` of every worker, computed before any starts (a placement error starts none)."""
    return {(role, index): worker_env(cfg, role, index) for role, index in layout.workers()}


class WorkerProcesses:
    """The backend (``launch/backend.py``): ``start`` one process per worker with its environment from
    ``envs``; ``exited()`` and ``tail(name)`` for the controller, ``shutdown()`` at the end. ``kill``
    (before a restart) SIGKILLs the worker's process group and reaps it; the successor appends to
    the same log."""

    def __init__(self, run_dir: Path, envs: Mapping[tuple[str, int], dict[str, str]]):
        self.run_dir = run_dir
        self.envs = envs
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.logs: dict[str, Path] = {}
        self._files: list[IO[bytes]] = []

    def start(self, role: str, index: int) -> None:
        name = f"{role}/{index}"
        log = self.run_dir / "logs" / f"{role}-{index}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        out = log.open("ab")
        self._files.append(out)
        if name in self.procs:  # a restart: mark where the newcomer's lines begin
            try:
                out.write(f"----- {name} restarted by the controller at {time.strftime('%H:%M:%S')} -----\n"
                          .encode())
                out.flush()
            except OSError:  # a full disk: the worker still starts (its own writes will say what is wrong)
                pass
        cmd = [sys.executable, "-m", "srljax.system.shell.run", str(self.run_dir), role, str(index),
               "--parent-pid", str(os.getpid())]
        self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            env=self.envs[role, index], start_new_session=True)
        self.logs[name] = log

    def kill(self, name: str, wait_s: float = KILL_GRACE_S) -> None:
        """SIGKILL ``name``'s whole process group (a stopped or hung one too) and wait until it is gone."""
        proc = self.procs.get(name)
        if proc is None:
            return
        self._signal_group(proc, signal.SIGKILL)
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:  # uninterruptible sleep: the successor starts regardless
            pass

    def exited(self) -> dict[str, int]:
        return {name: code for name, p in self.procs.items() if (code := p.poll()) is not None}

    def tail(self, name: str, lines: int = TAIL_LINES) -> str:
        try:
            text = self.logs[name].read_bytes()[-20_000:].decode(errors="replace")
        except (KeyError, OSError):
            return ""
        return "\n".join(f"  | {line}" for line in text.splitlines()[-lines:])

    def shutdown(self, grace_s: float = KILL_GRACE_S) -> list[str]:
        """Wait for the workers to exit, then SIGTERM and SIGKILL their process groups; return who was killed."""
        killed = []
        for sig, wait in ((None, grace_s), (signal.SIGTERM, grace_s), (signal.SIGKILL, grace_s)):
            alive = [n for n, p in self.procs.items() if p.poll() is None]
            if sig is not None:
                for name in alive:
                    self._signal_group(self.procs[name], sig)
                killed += [f"{n} ({sig.name})" for n in alive]
            deadline = time.monotonic() + wait
            while alive and time.monotonic() < deadline:
                time.sleep(0.05)
                alive = [n for n, p in self.procs.items() if p.poll() is None]
        for p in self.procs.values():  # the leaders are gone; a group member may not be
            self._signal_group(p, signal.SIGKILL)
        for f in self._files:
            try:
                f.close()
            except OSError:  # a full disk: the restart marker could not be flushed; nothing else is lost
                pass
        return killed

    @staticmethod
    def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
        try:
            os.killpg(proc.pid, sig)  # start_new_session: the group id is the worker's pid
        except (ProcessLookupError, PermissionError):
            pass


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM to the launcher takes the same path as Ctrl-C: stop every worker, then exit."""

    def raise_interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_distributed(cfg: Experiment, resume: bool | int = False, checked: bool = False) -> int:
    """Run ``cfg`` as local processes; return the exit code (0 done, 1 failed, 2 bad config, 130 interrupted).
    ``resume``: continue the trial from its newest checkpoint (an int N: from step N); ``checked``: the launcher just ran the checks."""
    try:
        cfg = auth.resolved(cfg, slurm=False)
        plan = plan_of(cfg) if checked else check(cfg, resume, "processes")
        envs = worker_envs(cfg, plan.layout)
        run_dir = prepare(cfg, resume, "processes", checked=True).run_dir  # the folder, config.json
    except (ConfigError, PlacementError) as err:
        print(err, file=sys.stderr)
        return 2
    keys = auth.prepare(cfg, run_dir)  # RUN_DIR/keys, owner-only, before any worker starts
    names = DirectoryNames(run_dir / "names")
    names.clear("")  # an earlier launch's addresses (resume): every worker registers afresh
    procs = WorkerProcesses(run_dir, envs)

    def started() -> None:
        print(f"worker logs (run folder {run_dir}):", flush=True)
        for name, log in procs.logs.items():
            print(f"  {name:<10} log: {log}", flush=True)
        metrics = ", ".join(str(run_dir / "policies" / p / "metrics.jsonl") for p in cfg.policies.training()) \
            if cfg.policies.enabled else run_dir / "metrics.jsonl"  # several policies: one file per policy
        print(f"  metrics: {metrics}; per worker: {run_dir / 'workers'}", flush=True)
        if cfg.log.prometheus_port >= 0:
            print(f"  live: python -m launch.status -e {cfg.name} -f {cfg.trial} --run-root {cfg.log.run_root} "
                  f"(Prometheus targets: {run_dir / 'prometheus_targets.json'})", flush=True)
        print(f"  sockets: CURVE, keys in {run_dir / auth.KEYS_DIR}" if keys is not None
              else "  sockets: not authenticated (layout.auth=off)", flush=True)

    began = time.monotonic()
    try:
        with sigterm_as_interrupt():
            result, killed, _ = run_trial(cfg, procs, names, plan.layout, started=started, keys=keys,
                                          resume=run_folder.resuming(resume))
    finally:
        run_folder.release(run_dir)  # the trial's lock, taken by prepare (srljax.storage.run_dir)
    if killed:
        print(f"killed after the grace period: {', '.join(killed)}", flush=True)
    if result is None:
        print("interrupted", flush=True)
        return 130
    if result.exit_code != 0:  # the whole message: who was lost or stalled, and why
        print("FAILED: " + result.message, flush=True)
    # a finished trial's restarts (the message's later lines) were printed once, in the controller's "ending the trial"
    print(summary_line(result.exit_code == 0, result.reason, trial_record(cfg), cfg,
                       time.monotonic() - began), flush=True)
    if cfg.eval.every_updates > 0:  # the eval manager's last and best evaluations (srljax/evaluation/evaluator.py)
        from srljax.evaluation.evaluator import summary_from_files

        if line := summary_from_files(cfg.run_dir):
            print(line, flush=True)
    return result.exit_code
