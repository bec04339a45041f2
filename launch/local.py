"""``python -m launch.local CFG.py [-e NAME] [-f TRIAL] [--resume | --resume-from N] [key=value ...]``: run on this machine.

A config whose ``layout.mode`` is ``single`` trains in this process (``srljax.loops.train``);
``distributed`` layouts start one process per worker. ``-f TRIAL --resume`` continues that trial
from its newest checkpoint (``--resume-from N``: from step N) (``srljax.storage.run_dir`` says what may change). SIGTERM stops a run as
Ctrl-C does: the final checkpoint is written (``checkpoint.final``) and the exit code is 130. A single-process
run ends by writing ``RUN_DIR/status.json`` as the distributed controller does (``done``, ``timeout`` or
``interrupted``), so ``python -m launch.status RUN_DIR`` says how it ended. A trial another launch is running is
refused with one line naming its pid and host (exit 2); a single-process run whose disk fills up or turns
read-only stops at its first failed save with one ``FAILED:`` line (exit 1).
"""

from __future__ import annotations

import errno
import signal
import sys

from launch.cli import run_cli
from srljax.config import ConfigError, Experiment
from srljax.config.experiment import seed_trials
from srljax.layout import describe_batch

DISK_ERRNOS = (errno.ENOSPC, errno.EROFS, errno.EDQUOT, errno.EACCES, errno.EIO)  # a run's writes that failed


def main(cfg: Experiment, resume: bool | int = False) -> int:
    trials = seed_trials(cfg)  # one, or each of ``seeds`` (trained together in one program: srljax/loops/anakin.py)
    for trial in trials:
        print(f"run folder: {trial.run_dir}  (config.json, metrics.jsonl, checkpoints/)", flush=True)
    print(describe_batch(cfg), flush=True)
    if cfg.layout.mode == "single":
        from srljax.loops.train import train
        from srljax.prepare import prepare
        from srljax.storage.checkpoint import CheckpointError, disk_fix

        signal.signal(signal.SIGTERM, _interrupt)  # a scheduler's stop: end as Ctrl-C does, checkpoint kept
        if cfg.trainer.num_hosts > 1:  # a JAX env over several processes: their devices, before the folder is claimed
            from srljax.parallel.devices import PlacementError

            try:
                envs = host_envs(cfg)
            except PlacementError as err:
                print(f"python -m launch.local: {err}", file=sys.stderr, flush=True)
                return 2
        try:
            run = prepare(cfg, resume, "single", checked=True)  # launch.cli ran the checks; the folder is locked
        except ConfigError as err:  # e.g. another launch took the trial since the checks: one line, exit 2
            print(f"python -m launch.local: {err}", file=sys.stderr, flush=True)
            return 2
        except OSError as err:
            if err.errno not in DISK_ERRNOS:
                raise
            print(f"FAILED: {err}. {disk_fix(err, cfg.run_dir)}", flush=True)
            return 1
        if cfg.trainer.num_hosts > 1:  # a JAX env over several processes (srljax/prepare.py refused the rest)
            return run_hosts(run, envs)
        try:
            result = train(run)
        except (CheckpointError, OSError) as err:  # the disk: full, read-only, gone; named once, no traceback
            if isinstance(err, OSError) and err.errno not in DISK_ERRNOS:
                raise
            where = cfg.run_dir / "checkpoints"
            said = err if isinstance(err, CheckpointError) else f"{err}. {disk_fix(err, where)}"
            for trial in trials:  # how it ended, in the room the run folder kept for it (a full disk)
                try:
                    _status(trial, 1, "error", str(said))
                except OSError:
                    pass
            print(f"FAILED: {said}", flush=True)
            return 1
        except KeyboardInterrupt:
            message = (f"interrupted; the final checkpoint is in {trials[0].run_dir / 'checkpoints'}: continue with "
                       f"-f {cfg.trial} --resume")
            if cfg.pbt.enabled or (cfg.selfplay.enabled and cfg.selfplay.league) or cfg.psro.enabled:
                message = (f"interrupted; what it wrote so far is in {trials[0].run_dir}, but a population, a league "
                           "or PSRO does not resume: start a new trial")
            for trial in trials:
                _status(trial, 130, "interrupted", message)
            print(message, flush=True)
            return 130
        last = result.metrics[-1] if result.metrics else {}
        ret = last.get("episode_return", float("nan"))
        line = (f"finished ({result.stopped_by}): {result.env_steps:,} env steps, "
                f"recent mean episode return {ret:.1f}; metrics in {trials[0].run_dir / 'metrics.jsonl'}"
                + (" and the other seeds' folders beside it" if len(trials) > 1 else ""))
        # as the controller records it: a time limit reached before total_env_steps is not a finished trial
        for trial in trials:
            _status(trial, 0 if result.stopped_by == "done" else 1, result.stopped_by,
                    f"{result.env_steps:,} env steps; metrics in {trial.run_dir / 'metrics.jsonl'}")
        print(line, flush=True)
        return 0
    from launch.processes import run_distributed

    return run_distributed(cfg, resume=resume, checked=True)


def host_envs(cfg: Experiment) -> list[dict[str, str]]:
    """Each process's environment: trainer i's GPUs where there are some (consecutive blocks of ``trainer.devices``),
    CPU otherwise; ``PlacementError`` when this machine has too few."""
    from launch.processes import worker_env
    from srljax.layout import TRAINER

    return [worker_env(cfg, TRAINER, rank) for rank in range(cfg.trainer.num_hosts)]


def run_hosts(run, envs: list[dict[str, str]], poll_s: float = 0.2) -> int:
    """An Anakin run over ``trainer.num_hosts`` processes of this machine (``launch/hosts.py``), this one holding the
    trial's folder: Ctrl-C or SIGTERM becomes a SIGTERM to each (JAX's preemption notice: all stop at one call,
    checkpointed); one that fails ends the others (SIGKILL: they would wait in a collective). Returns the exit code:
    process 0's, else the first failure's."""
    import os
    import subprocess
    import time

    from srljax.parallel.multihost import _free_port

    cfg = run.cfg
    coordinator = f"127.0.0.1:{_free_port('127.0.0.1')}"
    hosts = cfg.trainer.num_hosts
    print(f"{hosts} processes in one jax.distributed group (coordinator {coordinator}), {cfg.trainer.devices} "
          f"device(s) each; process 0 writes the lines", flush=True)
    stops: list[int] = []

    def on_stop(signum: int, frame: object) -> None:
        stops.append(signum)

    previous = {s: signal.signal(s, on_stop) for s in (signal.SIGINT, signal.SIGTERM)}
    procs = []
    try:
        for rank in range(hosts):
            env = envs[rank]
            cmd = [sys.executable, "-m", "launch.hosts", str(run.run_dir), str(rank), "--coordinator", coordinator]
            procs.append(subprocess.Popen(cmd + (["--resume"] if run.resume else []), env=env,
                                          cwd=os.getcwd(), start_new_session=True))  # Ctrl-C reaches only this one
        told = False
        while any(p.poll() is None for p in procs):
            if stops and not told:
                print("stopping: every process checkpoints at the same call (SIGTERM to each)", flush=True)
                for p in procs:
                    if p.poll() is None:
                        p.send_signal(signal.SIGTERM)
                told = True
            failed = [p for p in procs if p.poll() not in (None, 0, 1, 130)]
            if failed:
                for p in procs:
                    if p.poll() is None:
                        p.kill()
                break
            time.sleep(poll_s)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()
        for s, handler in previous.items():
            signal.signal(s, handler)
    codes = [p.returncode for p in procs]
    bad = next((c for c in codes if c not in (0, 1, 130)), None)
    if bad is not None:
        print(f"FAILED: a process of the group exited with code {bad} (codes {codes}); its traceback is above",
              flush=True)
        return 1
    return codes[0]


def _status(cfg: Experiment, exit_code: int, reason: str, message: str) -> None:
    from srljax.system.shell.controller import TrialResult, write_status

    write_status(cfg.run_dir, TrialResult(exit_code, reason, message))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(run_cli(main, None, "python -m launch.local", __doc__.splitlines()[0]))
