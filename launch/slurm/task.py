"""One worker as a Slurm task: ``python -m launch.slurm.task RUN_DIR ROLE OFFSET``, run by ``srun``.

The sbatch script of ``python -m launch.slurm`` starts one step per worker group; task
``$SLURM_PROCID`` of it becomes worker ``OFFSET + $SLURM_PROCID`` of ``ROLE``. Before JAX is
imported this sets the role's environment (``srljax.parallel.devices.slurm_task_env``), binds sockets to
the node's cluster address (``$SRLJAX_BIND_HOST``, found by ``node_address``) and sends its
output to ``RUN_DIR/logs/ROLE-INDEX.log``, as the local launcher does; then it becomes
``python -m srljax.system.shell.run RUN_DIR ROLE INDEX`` (``exec``, same pid, the new environment).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from launch.slurm.node import node_address
from srljax.comm.hosts import BIND_HOST_ENV
from srljax.parallel.devices import apply_env, slurm_task_env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launch.slurm.task", description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("role")
    parser.add_argument("offset", type=int, help="index of the group's first worker; plus $SLURM_PROCID")
    args = parser.parse_args(argv)
    rank = os.environ.get("SLURM_PROCID")
    if rank is None:
        parser.error("$SLURM_PROCID is unset: run this under srun (python -m launch.slurm writes the script)")
    index = args.offset + int(rank)
    log = Path(args.run_dir) / "logs" / f"{args.role}-{index}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    apply_env(slurm_task_env(args.run_dir, args.role, os.environ), os.environ)
    os.environ.setdefault(BIND_HOST_ENV, node_address())
    print(f"[slurm_task] {args.role}/{index} on node {os.environ.get('SLURMD_NODENAME', '?')} "
          f"(job {os.environ.get('SLURM_JOB_ID', '?')}, step {os.environ.get('SLURM_STEP_ID', '?')}), "
          f"binding {os.environ[BIND_HOST_ENV]}", flush=True)

    # a fresh interpreter: importing srljax (above) already imported JAX, which reads JAX_PLATFORMS at import
    os.execv(sys.executable, [sys.executable, "-m", "srljax.system.shell.run", args.run_dir, args.role, str(index)])


if __name__ == "__main__":
    sys.exit(main())
