"""The controller of a Slurm trial: ``python -m launch.slurm.controller RUN_DIR``, in the batch step.

Started by the sbatch script of ``python -m launch.slurm`` next to the worker steps, which it
does not own: it waits for their registrations in ``RUN_DIR/names``, configures and starts them,
watches heartbeats and each group's step (a step that ended writes its exit status to
``RUN_DIR/slurm/exit/ROLE``), and ends the trial. SIGUSR1 (Slurm's warning before the time
limit) and SIGTERM / SIGINT (``launch.slurm stop``, ``scancel``) become a clean stop: every
worker is told to stop and the trainer writes its final checkpoint. The outcome goes to
``RUN_DIR/slurm/result.json`` for ``launch.slurm status`` (the ``Controller`` also writes
``RUN_DIR/status.json``, as in every backend; this file adds the job id and covers a signal that
came before or after ``Controller.run``). Exit code, which becomes the job's: 0 only when the
trial reached ``total_env_steps`` or was stopped on request; ``TIME_LIMIT_EXIT_CODE`` when
Slurm's time limit cut it short (the job shows ``FAILED``: the training did not finish, and a
resubmission must resume it); otherwise the ``Controller``'s non-zero code (a worker failed or
was lost, a timeout).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

from launch.slurm.node import BIND_HOST_ENV, node_address

TIME_LIMIT_EXIT_CODE = 3
"""Slurm's time-limit warning ended the trial before ``total_env_steps``: a failure, told apart from
a worker's (1) so a script can resubmit rather than debug."""
REASONS = {signal.SIGUSR1: (TIME_LIMIT_EXIT_CODE, "time_limit", "Slurm's time limit is near (SIGUSR1): stopped "
                                                                "before total_env_steps"),
           signal.SIGTERM: (0, "stopped", "stopped by request (SIGTERM: launch.slurm stop or scancel)"),
           signal.SIGINT: (0, "stopped", "stopped by request (SIGINT)")}


class GroupSteps:
    """The Slurm backend as the controller sees it (``launch/backend.py``): exit files and per-worker logs."""

    def __init__(self, run_dir: Path, counts: dict[str, int]):
        self.run_dir, self.counts = run_dir, counts

    def exited(self) -> dict[str, int]:
        """``{"actor/3": code}`` for every worker of a group whose whole step has ended."""
        out = {}
        for role, count in self.counts.items():
            try:
                code = int((self.run_dir / "slurm" / "exit" / role).read_text().strip() or "1")
            except (OSError, ValueError):
                continue
            out.update({f"{role}/{i}": code for i in range(count)})
        return out

    def start(self, role: str, index: int) -> None:
        """Nothing per worker: the batch script's ``srun`` step of each group starts all of its tasks."""

    def shutdown(self, grace_s: float = 0.0) -> list[str]:
        """Nothing to kill from here: the steps end when their workers stop, or with the job."""
        return []

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
        raise ending[0]

    for sig in REASONS:  # first: a signal while JAX imports must not kill us uncleanly
        signal.signal(sig, lambda signum, frame: caught.append(signal.Signals(signum)))
    os.environ.setdefault(BIND_HOST_ENV, node_address())

    from srljax.comm import DirectoryNames
    from srljax.config import from_dict
    from srljax.layout import build_layout
    from srljax.system import auth
    from srljax.system.controller import Controller, TrialEnded, TrialResult, write_status

    cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    layout = build_layout(cfg)
    steps = GroupSteps(run_dir, {g.role: g.count for g in layout.groups if g.count})
    print(f"[slurm_controller] {cfg.name}/{cfg.trial}: job {os.environ.get('SLURM_JOB_ID', '?')} on node "
          f"{os.environ.get('SLURMD_NODENAME', '?')}, binding {os.environ[BIND_HOST_ENV]}", flush=True)
    controller = Controller(cfg, DirectoryNames(run_dir / "names"), layout, exited=steps.exited, log_tail=steps.tail,
                            keys=auth.load(cfg, run_dir, slurm=True))  # RUN_DIR/keys, written at submit
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
        controller.close()
    write_result(run_dir, result.exit_code, result.reason, result.message)
    print(("finished: " if result.exit_code == 0 else "FAILED: ") + result.message, flush=True)
    return result.exit_code


def write_result(run_dir: Path, exit_code: int, reason: str, message: str) -> None:
    path = run_dir / "slurm" / "result.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"exit_code": exit_code, "reason": reason, "message": message,
                               "time": round(time.time(), 3), "job_id": os.environ.get("SLURM_JOB_ID", "")}) + "\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
