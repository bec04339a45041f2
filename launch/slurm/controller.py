"""The controller of a Slurm trial: ``python -m launch.slurm.controller RUN_DIR``, in the batch step.

Started by the sbatch script of ``python -m launch.slurm`` next to the worker steps, which it does not own:
it waits for their registrations in ``RUN_DIR/names``, configures, starts and watches them (a step that ended
writes its exit status to ``RUN_DIR/slurm/exit/ROLE``) and ends the trial. SIGUSR1 (Slurm's time-limit
warning), SIGTERM and SIGINT become a clean stop with a final checkpoint. The outcome goes to
``RUN_DIR/slurm/result.json`` for ``launch.slurm status``; the exit code (the job's) is 0 only for a finished
or requested stop, ``TIME_LIMIT_EXIT_CODE`` when Slurm's limit cut it short. A run folder with a checkpoint
(requeue, ``--resume``) continues from the newest; every start is appended to ``RUN_DIR/slurm/starts.jsonl``.
A lost worker comes back as a single-task ``srun --overlap`` step of the controller's own on its node, after
the old process is killed there (needs ``srun`` where the controller runs). ``docs/architecture.md``, "Slurm".
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from launch.slurm.node import CANCELLED_EXIT_CODE, TIME_LIMIT_EXIT_CODE, node_address
from srljax.comm.hosts import BIND_HOST_ENV

REASONS = {signal.SIGUSR1: (TIME_LIMIT_EXIT_CODE, "time_limit", "Slurm's time limit is near (SIGUSR1): stopped "
                                                                "before total_env_steps"),
           signal.SIGTERM: (CANCELLED_EXIT_CODE, "cancelled", "cancelled (SIGTERM: scancel, preemption without requeue "
                                                             "or a node shutting down) before total_env_steps"),
           signal.SIGINT: (0, "stopped", "stopped by request (SIGINT: launch.slurm stop)")}


KILL_STEP_S = 60.0  # how long the srun that kills a lost task may take
STEP_GRACE_S = 30.0  # at the end: how long restart steps get to end after their workers stopped


class GroupSteps:
    """The Slurm backend as the controller sees it (``launch/backend.py``): exit files, per-worker logs,
    and the single-task steps of restarted workers.

    ``commands``: ``(restart, kill)``, the ``srun`` command lines of ``launch.slurm.sbatch``
    (``restart_command`` / ``kill_command``); None: this controller restarts nothing.
    ``where(name)``: the register payload of a worker now (pid, node), for ``kill``.
    """

    def __init__(self, run_dir: Path, counts: dict[str, int],
                 commands: tuple[Callable[..., list[str]], Callable[..., list[str]]] | None = None,
                 where: Callable[[str], dict[str, Any]] | None = None):
        self.run_dir, self.counts, self.commands = run_dir, counts, commands
        self.where = where or (lambda name: {})
        self.replaced: set[str] = set()  # workers whose task in the group's step was given up
        self.own: dict[str, subprocess.Popen[bytes]] = {}  # name -> the srun step of its newest restart
        self.nodes: dict[str, str] = {}  # name -> the Slurm node it last registered from

    def exited(self) -> dict[str, int]:
        """``{"actor/3": code}``: workers of a group whose whole step has ended (unless restarted), and
        restarted workers whose own step has."""
        out = {}
        for role, count in self.counts.items():
            try:
                code = int((self.run_dir / "slurm" / "exit" / role).read_text().strip() or "1")
            except (OSError, ValueError):
                continue
            out.update({name: code for i in range(count) if (name := f"{role}/{i}") not in self.replaced})
        out.update({name: code for name, step in self.own.items() if (code := step.poll()) is not None})
        return out

    def start(self, role: str, index: int) -> None:
        """Nothing for a worker of the batch script's steps; after ``kill``, a single-task step of its own."""
        name = f"{role}/{index}"
        if name not in self.replaced:
            return  # the batch script's ``srun`` step of its group started it
        if self.commands is None:
            raise RuntimeError("this controller restarts no worker (no srun)")
        cmd = self.commands[0](role, index, self.nodes.get(name, ""))
        print(f"[slurm_controller] restarting {name}: {' '.join(cmd)}", flush=True)
        self.own[name] = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, start_new_session=True)

    def kill(self, name: str) -> None:
        """Make sure ``name`` is gone: kill its process on the node it registered from, end its own step."""
        self.replaced.add(name)
        where = self.where(name)
        pid, node = where.get("pid"), where.get("node")
        if isinstance(node, str) and node:
            self.nodes[name] = node
        if self.commands is not None and isinstance(pid, int) and isinstance(node, str) and node:
            cmd = self.commands[1](name.split("/")[0], node, pid)
            try:
                subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=KILL_STEP_S, check=False)
            except (OSError, subprocess.TimeoutExpired) as error:
                print(f"[slurm_controller] could not kill {name} (pid {pid} on {node}): {error}", flush=True)
        step = self.own.pop(name, None)
        if step is not None:
            self._end(step, grace_s=5.0)

    @staticmethod
    def _end(step: subprocess.Popen[bytes], grace_s: float) -> bool:
        """End an srun step (SIGTERM reaches its task, SIGKILL the srun itself); True if it had to be signalled."""
        if step.poll() is not None:
            return False
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(step.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                step.wait(timeout=grace_s)
                break
            except subprocess.TimeoutExpired:
                continue
        return True

    def shutdown(self, grace_s: float = STEP_GRACE_S) -> list[str]:
        """The batch script's steps end when their workers stop, or with the job; restart steps are this
        controller's: wait for them, then end them. Returns those that had to be ended."""
        deadline = time.monotonic() + grace_s
        while any(step.poll() is None for step in self.own.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return [name for name, step in self.own.items() if self._end(step, grace_s=5.0)]

    def tail(self, name: str, lines: int = 20) -> str:
        role, index = name.split("/")
        log = self.run_dir / "logs" / f"{role}-{index}.log"
        try:
            text = log.read_bytes()[-20_000:].decode(errors="replace")
        except OSError:
            job = os.environ.get("SLURM_JOB_ID", "%j")
            return f"  | (no {log.name}: the task never started; srun's errors are in logs/job-{job}.log)"
        return "\n".join(f"  | {line}" for line in text.splitlines()[-lines:])


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m launch.slurm.controller RUN_DIR", file=sys.stderr)
        return 2
    run_dir = Path(argv[0])
    caught: list[signal.Signals] = []
    ending: list[BaseException] = []

    def on_signal(signum: int, frame: object) -> None:  # installed once TrialEnded is imported below
        caught.append(signal.Signals(signum))
        if ending:  # the first signal raised below and the trial is stopping; one stop is enough
            return
        code, reason, message = REASONS[signal.Signals(signum)]
        ending.append(TrialEnded(TrialResult(code, reason, message)))
        # written now as well as at the end: scancel's SIGKILL follows after Slurm's KillWait (30 s by
        # default), which a final checkpoint may outlast
        write_result(run_dir, code, reason, message)
        write_status(run_dir, ending[0].result)
        raise ending[0]

    for sig in REASONS:  # first: a signal while JAX imports must not kill us uncleanly
        signal.signal(sig, lambda signum, frame: caught.append(signal.Signals(signum)))
    os.environ.setdefault(BIND_HOST_ENV, node_address())

    from launch.slurm.sbatch import kill_command, restart_command
    from srljax.comm import DirectoryNames
    from srljax.config import from_dict
    from srljax.layout import build_layout
    from srljax.system.shell import auth
    from srljax.system.shell.controller import Controller, TrialEnded, TrialResult, write_status

    cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    from srljax.storage import run_dir as run_folder

    try:  # one live launch per trial, as every backend: held for the controller's life, released by its death
        run_folder.lock(dataclasses.replace(cfg, log=dataclasses.replace(cfg.log, run_root=str(run_dir.parent.parent))))
    except run_folder.RunFolderInUse as err:  # nothing of the live trial's (status, result) is touched
        print(f"[slurm_controller] {err}", flush=True)
        return 2
    layout = build_layout(cfg)
    print(f"[slurm_controller] {cfg.name}/{cfg.trial}: job {os.environ.get('SLURM_JOB_ID', '?')} on node "
          f"{os.environ.get('SLURMD_NODENAME', '?')}, binding {os.environ[BIND_HOST_ENV]}", flush=True)
    restarts = cfg.layout.max_restarts > 0 and shutil.which("srun") is not None
    if cfg.layout.max_restarts > 0 and not restarts:
        print(f"[slurm_controller] layout.max_restarts={cfg.layout.max_restarts}, but srun is not on this "
              "controller's PATH (slurm.container_image: the image lacks it), so a lost worker ends the trial",
              flush=True)
    commands = ((lambda role, index, node: restart_command(cfg, role, index, node)),
                (lambda role, node, pid: kill_command(cfg, role, node, pid))) if restarts else None
    steps = GroupSteps(run_dir, {g.role: g.count for g in layout.groups if g.count}, commands)
    controller = Controller(cfg, DirectoryNames(run_dir / "names"), layout, exited=steps.exited, log_tail=steps.tail,
                            keys=auth.load(cfg, run_dir, slurm=True),  # RUN_DIR/keys, written at submit
                            start=steps.start if restarts else None, kill=steps.kill if restarts else None)
    names = {name: key for key, name in controller.expected.items()}
    steps.where = lambda name: controller.info.get(names.get(name, ""), {})
    controller.resume = record_start(run_dir)
    try:
        for sig in REASONS:
            signal.signal(sig, on_signal)
        if caught and not ending:  # asked to stop while starting up
            on_signal(caught[0], None)
        result = controller.run()  # catches the TrialEnded a signal raises, then stops every worker
    except TrialEnded as ended:  # raised outside run()'s own handler (before it, or while it returned)
        result = ended.result
        controller.stop_all()
        write_status(run_dir, result)
    finally:
        for sig in REASONS:
            signal.signal(sig, signal.SIG_IGN)  # closing: a late signal must not cut it short
        if ended := steps.shutdown():
            print(f"[slurm_controller] restart steps ended after the grace period: {', '.join(ended)}", flush=True)
        controller.close()
    write_result(run_dir, result.exit_code, result.reason, result.message)
    print(("finished: " if result.exit_code == 0 else "FAILED: ") + result.message, flush=True)
    if cfg.eval.every_updates > 0:  # the eval manager's last and best evaluations (srljax/evaluation/evaluator.py)
        from srljax.evaluation.evaluator import summary_from_files

        if line := summary_from_files(run_dir):
            print(line, flush=True)
    return result.exit_code


def record_start(run_dir: Path) -> bool:
    """Note this start in ``slurm/starts.jsonl``; True when it resumes the trial (a checkpoint exists),
    after cutting ``metrics.jsonl`` back to that checkpoint's update."""
    from srljax.storage.run_dir import rollback_metrics
    from srljax.storage.steps import read_meta

    found = read_meta(run_dir / "checkpoints")
    step = found[0] if found else 0
    moved = rollback_metrics(run_dir / "metrics.jsonl", step)  # no checkpoint yet: an earlier start's lines go
    restarts = int(os.environ.get("SLURM_RESTART_COUNT", "0") or 0)
    if found or restarts:
        print(f"[slurm_controller] start {restarts + 1} of job {os.environ.get('SLURM_JOB_ID', '?')}: "
              + (f"resuming from the checkpoint of update {step}" if found else "no checkpoint yet, starting over")
              + (f"; {moved} metrics lines after it moved to metrics.discarded.jsonl" if moved else ""), flush=True)
    path = run_dir / "slurm" / "starts.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps({"job_id": os.environ.get("SLURM_JOB_ID", ""), "restart_count": restarts,
                              "resumed_from_update": step if found else None, "time": round(time.time(), 3)}) + "\n")
    return found is not None


def write_result(run_dir: Path, exit_code: int, reason: str, message: str) -> None:
    path = run_dir / "slurm" / "result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"exit_code": exit_code, "reason": reason, "message": message,
                               "time": round(time.time(), 3), "job_id": os.environ.get("SLURM_JOB_ID", "")}) + "\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
