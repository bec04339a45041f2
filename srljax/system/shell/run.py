"""One worker as an OS process: ``python -m srljax.system.shell.run RUN_DIR ROLE INDEX [--parent-pid PID]``.

Started by ``launch/processes.py`` (one per worker). Reads ``RUN_DIR/config.json``, finds the
controller in ``RUN_DIR/names`` and serves it until ``stop``. SIGTERM / SIGINT stop it cleanly
(a second one exits at once); so does the death of the launcher (``PR_SET_PDEATHSIG`` on Linux,
and the control thread watches the parent pid), so no worker outlives its launcher. The process leaves with
``os._exit`` once its worker has closed everything: the interpreter's teardown (a full garbage collection over
JAX's and envpool's objects) outlasted the launcher's stop grace on a busy box.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import signal
import sys
from pathlib import Path

_TEARDOWN = True  # exit through the interpreter's teardown (a multi-host trainer: jax.distributed's shutdown)


def _die_with_parent() -> None:
    """Ask Linux to send SIGTERM when the launcher dies; elsewhere the parent-pid watch is enough."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m srljax.system.shell.run", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("role")
    parser.add_argument("index", type=int)
    parser.add_argument("--parent-pid", type=int, default=None)
    args = parser.parse_args(argv)
    _die_with_parent()
    if args.parent_pid is not None and os.getppid() != args.parent_pid:
        return 1  # the launcher died before we got here

    from srljax.system.shell.fd_limits import raise_to_hard

    raise_to_hard()  # a cluster's 1,024 soft limit: a flood of idle connections has more to eat before writes fail
    from srljax.comm import DirectoryNames
    from srljax.config import from_dict
    from srljax.system.shell import auth
    from srljax.system.shell.names_service import worker_names
    from srljax.system.shell.roles import make_worker

    run_dir = Path(args.run_dir)
    cfg = from_dict(json.loads((run_dir / "config.json").read_text()))
    from srljax.layout import ACTOR, SAMPLES, TRAINER, role_spec
    from srljax.system.shell.worker import lower_priority  # imports no jax

    spec = role_spec(cfg, args.role)
    placement = spec.placement
    if SAMPLES in spec.serves:  # a trainer or a buffer: received frames reuse freed memory (not fresh mappings)
        from srljax.comm.sockets import keep_freed_memory

        keep_freed_memory()
    if placement == ACTOR and cfg.layout.actor_nice:
        lower_priority(cfg.layout.actor_nice)  # before jax starts its compute threads, which inherit it
    from srljax.parallel import compile_cache, dispatch

    if placement != TRAINER:
        dispatch.run_cpu_inline()  # light roles: small programs, no hand-off to a worker thread

    compile_cache.enable(cfg.compile_cache)  # the run's folder, shared with the other workers
    keys = auth.load(cfg, run_dir, slurm=bool(os.environ.get("SLURM_JOB_ID")))  # RUN_DIR/keys when auth is on
    names = worker_names(cfg, DirectoryNames(run_dir / "names"))  # layout.names=controller: served by the controller
    worker = make_worker(args.role, cfg, args.index, names, parent_pid=args.parent_pid, keys=keys)

    def on_signal(signum: int, frame: object) -> None:
        if worker.stopping:
            os._exit(128 + signum)  # asked twice: do not wait for a clean close
        worker.request_stop(f"signal {signal.Signals(signum).name}")

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    global _TEARDOWN
    _TEARDOWN = placement == TRAINER and cfg.trainer.num_hosts > 1  # jax.distributed's shutdown runs at exit
    return worker.run()  # returns once the worker closed its sockets, env, checkpoints and metrics files


if __name__ == "__main__":
    code = main()
    # Skip the interpreter's teardown: nothing of the trial is left in it, and its last garbage collection over
    # JAX's and envpool's objects took workers (actors at nice 10 first) on a busy box past the launcher's stop
    # grace, so every trial ended with SIGTERM and SIGKILL (gdb: Py_FinalizeEx -> gc_collect_main).
    if _TEARDOWN:
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
