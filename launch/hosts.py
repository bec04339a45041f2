"""One process of an Anakin run over several hosts: a JAX env, ``layout.mode=single``, ``trainer.num_hosts=N`` > 1.

    python -m launch.local configs/gymnax_cartpole_ppo.py trainer.num_hosts=2    # N processes on this machine
    python -m launch.slurm configs/gymnax_cartpole_ppo.py trainer.num_hosts=2    # one per node, one srun step

What those start, one per host (nobody types these)::

    python -m launch.hosts RUN_DIR RANK --coordinator 127.0.0.1:PORT [--resume]   # launch.local's children
    python -m launch.hosts RUN_DIR --slurm                                         # a task of launch.slurm's step

Each process reads ``RUN_DIR/config.json``, joins the ``jax.distributed`` group (``srljax.parallel.multihost``; gloo
on CPU) with its own devices (``trainer.devices`` each) and runs ``srljax.loops.anakin.train_anakin``: one global
mesh, the envs and the batch split over every process's devices, the gradients all-reduced inside the program.
Process 0 writes the metrics lines and ``status.json`` (on Slurm also ``slurm/result.json``); every process writes
its part of each checkpoint. Ctrl-C (``launch.local`` forwards it) and Slurm's stops arrive as SIGTERM, which JAX
takes as a preemption notice: every process stops at the same call, after the final checkpoint (exit 130; on Slurm
the code and reason the Slurm controller gives the signal the batch script caught, ``RUN_DIR/slurm/stop``: 0
``stopped`` for ``launch.slurm stop``, 3 ``time_limit``, 4 ``cancelled``). A
process that fails ends at once (exit 3) and its launcher ends the others (SIGKILL: they would wait in a collective).
On Slurm the trial resumes from the newest checkpoint when there is one (a requeue, ``--resume``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import traceback
from pathlib import Path

EXIT = {"done": 0, "timeout": 1, "interrupted": 130}
FAILED = 3  # this process failed (not a timeout): its launcher ends the others


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launch.hosts", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("rank", nargs="?", type=int, help="this process's index in the group (launch.local)")
    parser.add_argument("--coordinator", help="host:port of process 0's coordinator (launch.local)")
    parser.add_argument("--resume", action="store_true", help="continue from the newest checkpoint (launch.local)")
    parser.add_argument("--slurm", action="store_true", help="a task of an srun step: rank and group from Slurm")
    args = parser.parse_args(argv)
    if args.slurm == (args.rank is not None) or (not args.slurm and not args.coordinator):
        parser.error("give RANK --coordinator HOST:PORT (launch.local) or --slurm (an srun task)")
    # Ctrl-C reaches every process of a terminal's group at its own moment: launch.local turns it into SIGTERM,
    # which JAX's preemption sync delivers to all processes at the same call
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    run_dir = Path(args.run_dir).absolute()
    if args.slurm:
        from launch.slurm.node import node_address
        from srljax.comm.hosts import BIND_HOST_ENV
        from srljax.layout import TRAINER
        from srljax.parallel.devices import apply_env, slurm_task_env

        apply_env(slurm_task_env(run_dir, TRAINER, os.environ), os.environ)  # before JAX starts: its devices
        os.environ.setdefault(BIND_HOST_ENV, node_address())

    from srljax.config import from_dict
    from srljax.parallel import multihost

    cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    if args.slurm:
        rank = int(os.environ.get("SLURM_PROCID", "0"))
        resume = _slurm_start(cfg, run_dir, rank)
        group = multihost.from_slurm()
    else:
        rank, resume = args.rank, args.resume
        group = multihost.Group(args.coordinator, rank, cfg.trainer.num_hosts, bind=args.coordinator if rank == 0 else None)
    if group.num_processes != cfg.trainer.num_hosts:
        print(f"[hosts] this group has {group.num_processes} processes but trainer.num_hosts={cfg.trainer.num_hosts}",
              flush=True)
        return 2
    where = os.environ.get("SLURMD_NODENAME") or "this machine"
    print(f"[hosts] process {rank} of {group.num_processes} on {where}: joining {group.coordinator}", flush=True)
    try:
        multihost.initialize(group)
        code = _train(cfg, run_dir, resume, rank, args.slurm)
    except BaseException:  # the others wait in a collective: end now, loudly; the launcher ends them
        traceback.print_exc()
        if rank == 0:
            _write(cfg, run_dir, 1, "failed", f"process {rank} of {group.num_processes} failed; see its log",
                   args.slurm)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(FAILED)
    multihost.shutdown()
    return code


def _slurm_start(cfg, run_dir: Path, rank: int) -> bool:
    """On Slurm: resume when a checkpoint exists (a requeued job, ``launch.slurm --resume``); process 0 holds the
    trial's lock and cuts ``metrics.jsonl`` back to that checkpoint, as the Slurm controller does."""
    from srljax.storage.steps import read_meta

    found = read_meta(run_dir / "checkpoints") is not None
    if rank == 0:
        import dataclasses

        from launch.slurm.controller import record_start
        from srljax.storage import run_dir as run_folder

        run_folder.lock(dataclasses.replace(cfg, log=dataclasses.replace(cfg.log, run_root=str(run_dir.parent.parent))))
        for earlier in ("slurm/result.json", STOP_FILE):  # an earlier start's
            (run_dir / earlier).unlink(missing_ok=True)
        record_start(run_dir)
    return found


def _train(cfg, run_dir: Path, resume: bool, rank: int, slurm: bool) -> int:
    from srljax.loops.anakin import train_anakin
    from srljax.prepare import joined

    result = train_anakin(joined(cfg, run_dir, resume))
    code, reason = EXIT.get(result.stopped_by, 1), result.stopped_by
    why = _slurm_stop(run_dir) if slurm and reason == "interrupted" else None
    if why is not None:  # as the Slurm controller ends a trial on that signal (every process exits with it)
        code, reason, _ = why
    if rank == 0:
        last = result.metrics[-1] if result.metrics else {}
        ret = last.get("episode_return", float("nan"))
        message = (f"{result.env_steps:,} env steps over {cfg.trainer.num_hosts} hosts; recent mean episode return "
                   f"{ret:.1f}; metrics in {run_dir / 'metrics.jsonl'}")
        if why is not None:
            message = f"{why[2]}; {message}"
        if result.stopped_by == "interrupted":
            message += f"; the final checkpoint is in {run_dir / 'checkpoints'}: continue with -f {cfg.trial} --resume"
        _write(cfg, run_dir, code, reason, message, slurm)
        print(f"finished ({result.stopped_by}): {message}", flush=True)
    return code


STOP_FILE = "slurm/stop"  # the signal the batch script caught (USR1, INT, TERM), written before it stops the tasks


def _slurm_stop(run_dir: Path) -> tuple[int, str, str] | None:
    """The Slurm controller's (exit code, reason, message) for the signal that stopped this job, if one did."""
    import signal as signals

    from launch.slurm.controller import REASONS

    try:
        name = (run_dir / STOP_FILE).read_text().strip()
    except OSError:
        return None
    return REASONS.get(getattr(signals, f"SIG{name}", None))


def _write(cfg, run_dir: Path, code: int, reason: str, message: str, slurm: bool) -> None:
    """``status.json`` (every backend's record of how a trial ended) and, on Slurm, ``slurm/result.json``."""
    from srljax.system.shell.controller import TrialResult, write_status

    write_status(run_dir, TrialResult(code, reason, message))
    if slurm:
        from launch.slurm.controller import write_result

        write_result(run_dir, code, reason, message)


if __name__ == "__main__":
    sys.exit(main())
