"""A search sweep on Slurm: one job array of search workers sharing the study in the sweep's folder.

    python -m launch.sweep configs/sweeps/cartpole_search.py --slurm --jobs 4     # 4 workers (default: up to 4)
    python -m launch.sweep configs/sweeps/cartpole_search.py --slurm --dry-run    # print the array script

Each array task runs ``python -m launch.sweep SWEEP.py --search-worker`` on one node: it asks the study for a
trial, runs it there with ``python -m launch.local`` (pruning it as the local runner does), tells the study, and
asks again until ``Search.trials`` have been started. The workers share ``study.journal`` on the shared
filesystem (Optuna's journal file takes a lock per write); a task's shape (CPUs, memory, partition, set-up lines)
comes from the config's ``slurm`` section as for ``launch/sweep/slurm_array.py``. Trials a killed array left
running are continued by the next local launch (``python -m launch.sweep SWEEP.py``), or re-run as new trials
when a worker finds the budget unspent.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Any

from launch.slurm.jobs import SlurmError, sbatch
from launch.sweep.slurm_array import job_name, queued, task_options
from launch.sweep.spec import Sweep
from srljax.config import Experiment, apply_overrides

DEFAULT_WORKERS = 4


def render(sweep: Sweep, sweep_file: str, cfg: Experiment, sweep_dir: Path, workers: int) -> str:
    """The array script: ``workers`` tasks, each a search worker (``cfg``: the resolved base config)."""
    q = shlex.quote
    return "\n".join([
        "#!/bin/bash",
        f"# srljax search {sweep.name}: {workers} search workers as one job array, written by "
        "`python -m launch.sweep SWEEP.py --slurm`.",
        f"#SBATCH --job-name={job_name(sweep.name)}",
        f"#SBATCH --array=0-{workers - 1}",
        f"#SBATCH --output={sweep_dir}/logs/slurm-%A_%a.log",
        "#SBATCH --no-requeue",
        *[f"#SBATCH {option}" for option in task_options(cfg)],
        "", "cd " + q(cfg.slurm.workdir) + " || exit 1", *cfg.slurm.setup,
        f"PY={q(cfg.slurm.python)}", "export PYTHONUNBUFFERED=1",
        'command -v "$PY" >/dev/null || { echo "python $PY not found on $(hostname): set slurm.python or '
        'slurm.setup"; exit 1; }',
        f'exec "$PY" -m launch.sweep {q(sweep_file)} --search-worker', ""])


def submit(sweep: Sweep, base: Experiment, sweep_dir: Path, args: Any, prog: str) -> int:
    from launch.slurm.sbatch import resolved

    cfg = resolved(apply_overrides(base, list(sweep.overrides)))  # absolute run root, checkout and interpreter
    sweep_dir = Path(cfg.log.run_root) / sweep.name
    workers = args.jobs or min(sweep.search.trials, DEFAULT_WORKERS)
    script = render(sweep, str(Path(args.sweep).resolve()), cfg, sweep_dir, workers)
    if args.dry_run:
        print(script, end="")
        return 0
    try:
        if found := queued(sweep.name):
            print(f"{prog}: this search's job array {', '.join(found)} is still queued or running; wait for it or "
                  "scancel it. nothing was submitted.", file=sys.stderr)
            return 1
        (sweep_dir / "slurm").mkdir(parents=True, exist_ok=True)
        (sweep_dir / "logs").mkdir(parents=True, exist_ok=True)
        path = sweep_dir / "slurm" / "search.sh"
        path.write_text(script)
        job_id = sbatch(path)
    except SlurmError as err:
        print(f"{prog}: {err}\nnothing was submitted.", file=sys.stderr)
        return 1
    print(f"submitted job array {job_id} ({job_name(sweep.name)}): {workers} search workers; when it has ended: "
          f"{prog} {args.sweep} --report", flush=True)
    return 0
