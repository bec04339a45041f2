"""A sweep's trials as one Slurm job array: task i runs trial i with ``python -m launch.local``.

    script = render(planned, sweep_dir, jobs=4)       # what ``--slurm --dry-run`` prints
    job_id = submit(planned, sweep_dir, jobs=None)    # writes <sweep>/slurm/array.sh, sbatch, <sweep>/slurm/array.json

Every task is one node's share (``slurm.trainer``'s CPUs, GPUs and memory, default: the trial's
cores from the layout and 4 GB) and runs its trial entirely on that node, a distributed layout as
local processes; partition, account, QOS, constraint, set-up lines, interpreter and checkout come
from the config's ``slurm`` section as for ``python -m launch.slurm`` (``launch/slurm/sbatch.py``:
``resolved``). One array has one shape, so the trials must agree on those settings. ``--jobs N``
caps the tasks running at once (``--array=0-K%N``). Each task writes the trial's output to
``<sweep>/logs/<trial>.log`` and its exit code and wall time to ``<sweep>/logs/<trial>.json``,
as the local runner does, so ``python -m launch.sweep SWEEP.py --report`` reads both the same way.
"""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

from launch.slurm.jobs import jobs_named, sbatch
from launch.slurm.plan import setting, slurm_group, time_limit, time_limit_seconds
from launch.slurm.sbatch import resolved
from launch.sweep.local import trial_cores
from launch.sweep.trials import Planned, trial_state
from srljax.config import Experiment
from srljax.layout import TRAINER

DEFAULT_MEM_GB = 4.0


def job_name(sweep_name: str) -> str:
    """``sweep/<name>``: what ``squeue --name`` finds the array by."""
    return f"sweep/{sweep_name}"


def resolve_for_slurm(planned: list[Planned]) -> list[Planned]:
    """Trials with absolute run roots, checkout and interpreter (``launch.slurm.sbatch.resolved``)."""
    out = []
    for p in planned:
        cfg = resolved(p.cfg)
        out.append(Planned(p.spec, cfg, *trial_state(cfg)))  # slurm.workdir may move the run root
    return out


def task_options(cfg: Experiment) -> list[str]:
    """``#SBATCH`` options of one array task for ``cfg`` (one task, one node)."""
    group = slurm_group(cfg, TRAINER)
    cpus = group.cpus_per_task or math.ceil(trial_cores(cfg))
    mem_mb = math.ceil((group.mem_gb_per_task or DEFAULT_MEM_GB) * 1024)
    out = ["--nodes=1", "--ntasks=1", f"--cpus-per-task={cpus}", f"--mem={mem_mb}M", f"--time={time_limit(cfg)}"]
    out += [f"--gpus-per-task={group.gpus_per_task}"] if group.gpus_per_task else []
    out += [f"--{key}={value}" for key in ("partition", "account", "qos", "constraint")
            if (value := setting(cfg, TRAINER, key))]
    return out + list(cfg.slurm.sbatch) + list(group.sbatch)


def array_problems(planned: list[Planned]) -> list[str]:
    """What stops the trials from being one job array (run on resolved configs)."""
    out = []
    shapes = {(tuple(task_options(p.cfg)), tuple(p.cfg.slurm.setup), p.cfg.slurm.python, p.cfg.slurm.workdir)
              for p in planned}
    if len(shapes) > 1:
        out.append(f"the trials ask for {len(shapes)} different Slurm task shapes (slurm.* settings or "
                   "timeout_seconds differ), but one job array has one: set them in Sweep.overrides")
    for p in planned:
        limit = time_limit(p.cfg)
        if time_limit_seconds(limit) is None:
            out.append(f"slurm.time_limit={limit!r} is not a Slurm time (e.g. 3-00:00:00, 12:00:00 or 90 minutes)")
        if p.cfg.slurm.container_image:
            out.append("slurm.container_image: launch.sweep --slurm runs trials without a container; "
                       "set slurm.setup lines instead, or submit trials one by one with python -m launch.slurm")
    return list(dict.fromkeys(out))


def render(planned: list[Planned], sweep_dir: Path, jobs: int | None, extras: list[tuple[str, ...]] | None = None) -> str:
    """The array's batch script for resolved trials (``resolve_for_slurm``) that pass ``array_problems``;
    ``extras[i]``: more ``launch.local`` flags for trial i (``--resume``)."""
    extras = extras or [()] * len(planned)
    first = planned[0].cfg
    q = shlex.quote
    limit = f"%{jobs}" if jobs else ""
    lines = ["#!/bin/bash",
             f"# srljax sweep {first.name}: {len(planned)} trials as one job array, written by "
             "`python -m launch.sweep SWEEP.py --slurm`.",
             "# Task i runs trial i with python -m launch.local on one node; its output: $SWEEP/logs/<trial>.log.",
             f"#SBATCH --job-name={job_name(first.name)}",
             f"#SBATCH --array=0-{len(planned) - 1}{limit}",
             f"#SBATCH --output={sweep_dir}/logs/slurm-%A_%a.log",
             "#SBATCH --no-requeue",  # a requeued task would find its trial's folder partial
             *[f"#SBATCH {option}" for option in task_options(first)],
             "", "cd " + q(first.slurm.workdir) + " || exit 1", *first.slurm.setup,
             f"PY={q(first.slurm.python)}", f"SWEEP={q(str(sweep_dir))}", "export PYTHONUNBUFFERED=1",
             'command -v "$PY" >/dev/null || { echo "python $PY not found on $(hostname): set slurm.python or '
             'slurm.setup"; exit 1; }', "",
             'case "$SLURM_ARRAY_TASK_ID" in']
    for index, (p, extra) in enumerate(zip(planned, extras)):
        args = [p.spec.config, "-e", p.cfg.name, "-f", p.spec.name, *extra, *p.spec.overrides,
                f"log.run_root={p.cfg.log.run_root}"]
        lines.append(f"  {index}) trial={q(p.spec.name)}; set -- {' '.join(map(q, args))} ;;")
    lines += ['  *) echo "array task $SLURM_ARRAY_TASK_ID has no trial"; exit 1 ;;', "esac",
              'start=$(date +%s)',
              '"$PY" -m launch.local "$@" > "$SWEEP/logs/$trial.log" 2>&1',
              "code=$?",
              'printf \'{"exit_code": %d, "wall_s": %d, "where": "slurm job %s, array task %s on %s"}\\n\' '
              '"$code" "$(( $(date +%s) - start ))" "$SLURM_ARRAY_JOB_ID" "$SLURM_ARRAY_TASK_ID" "$(hostname)" '
              '> "$SWEEP/logs/$trial.json"',
              'exit "$code"', ""]
    return "\n".join(lines)


def queued(sweep_name: str) -> list[str]:
    """Ids of this sweep's arrays still in the queue."""
    return jobs_named(job_name(sweep_name))


def submit(planned: list[Planned], sweep_dir: Path, jobs: int | None, extras: list[tuple[str, ...]] | None = None) -> str:
    """Write the script and ``sbatch`` it; the job id (``SlurmError`` with sbatch's message if refused)."""
    folder = sweep_dir / "slurm"
    folder.mkdir(parents=True, exist_ok=True)
    (sweep_dir / "logs").mkdir(parents=True, exist_ok=True)
    script = folder / "array.sh"
    script.write_text(render(planned, sweep_dir, jobs, extras))
    job_id = sbatch(script)
    record = {"job_id": job_id, "job_name": job_name(planned[0].cfg.name), "trials": [p.spec.name for p in planned]}
    (folder / "array.json").write_text(json.dumps(record, indent=1) + "\n")
    return job_id
