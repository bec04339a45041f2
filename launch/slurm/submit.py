"""``python -m launch.slurm CFG.py [-e NAME] [-f TRIAL] [--resume | --resume-from N] [--dry-run] [--show] [key=value ...]``: run a trial on Slurm.

    python -m launch.slurm configs/cartpole_ppo_distributed.py -f try1          # submit; prints job id, logs
    python -m launch.slurm configs/atari_ppo_distributed.py --dry-run           # print the sbatch script only
    python -m launch.slurm configs/atari_ppo_distributed.py --show              # every key, its meaning, the job
    python -m launch.slurm status -e cartpole_ppo_distributed -f try1           # job state per group, env steps
    python -m launch.slurm stop -e cartpole_ppo_distributed -f try1             # clean stop, then scancel

The worker graph becomes one heterogeneous job (``launch/slurm/plan.py``: one component per
worker group, small groups optionally packed) whose batch script (``launch/slurm/sbatch.py``) starts
one ``srun`` step per group and runs the controller itself. Workers find each other through
``RUN_DIR/names`` on the shared filesystem, over ``tcp://`` on their node's address. Before
anything is written, the config and its ``slurm`` section are checked (every problem at once),
and a trial whose run folder is not empty (an earlier run, or its job still queued or running) or
whose job is in the queue is refused. If ``sbatch`` refuses the job, its message is shown and the
run folder is left as it was. ``-f TRIAL --resume`` submits a stopped trial again; its controller
continues from the newest checkpoint (as a job requeued by Slurm does, ``slurm.requeue``).
Exit codes: 0 submitted, 1 refused (Slurm, trial running), 2 bad config.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from launch.cli import make_parser, resolve, resume_of
from launch.slurm.jobs import SlurmError, jobs_named, partition_nodes, sbatch
from launch.slurm.plan import Component, plan
from launch.slurm.sbatch import job_name, render, resolved
from launch.slurm.trial import ACTIONS, RunFiles, Trial, trial_main
from srljax.config import ConfigError, Experiment
from srljax.layout import POLICY
from srljax.storage import run_dir as run_folder
from srljax.storage.run_dir import RunFolderInUse
from srljax.storage.run_dir import problems as run_folder_problems
from srljax.system.shell import auth

PROG = "python -m launch.slurm"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ACTIONS:
        return trial_main(argv, PROG)
    parser = make_parser(PROG, __doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the sbatch script; submit and write nothing")
    args = parser.parse_intermixed_args(argv)
    if args.show:  # the tree, the slurm section and the job's components; nothing is written
        from launch.show import show_config

        return show_config(args, PROG, slurm=True)
    try:
        cfg = resolved(resolve(args, "slurm"))  # every check, the Slurm section's too (srljax/prepare.py)
    except RunFolderInUse as err:  # an earlier run, or this trial's job still queued or running
        print(f"{PROG}: {err}\n(is its job still queued or running? {PROG} status -e NAME -f TRIAL shows it)\n"
              "nothing was submitted.", file=sys.stderr)
        return 1
    except ConfigError as err:
        print(f"{PROG}: {err}", file=sys.stderr)
        return 2
    if args.dry_run:
        print(render(cfg), end="")
        return 0
    try:
        return submit(cfg, resume=resume_of(args))
    except SlurmError as err:
        print(f"{PROG}: {err}\nnothing was submitted.", file=sys.stderr)
        return 1


def submit(cfg: Experiment, resume: bool | int = False) -> int:
    """Check, write the run folder, ``sbatch``; print where everything is. Returns the exit code.
    ``resume``: the trial's folder holds a checkpoint the job continues from (an int N: ``--resume-from N``, the
    steps after N moved to ``checkpoints.later/`` before the job can start, and back if ``sbatch`` refuses)."""
    trial = Trial(Path(cfg.run_dir))
    if refusal := _refusal(cfg, trial, resume):
        print(f"{PROG}: {refusal}\nnothing was submitted.", file=sys.stderr)
        return 1
    cfg = auth.resolved(cfg, slurm=True)
    if cfg.layout.auth == "off":
        print(f"{PROG}: layout.auth=off: the trial's sockets accept anyone who reaches the nodes", file=sys.stderr)
    files = RunFiles(trial)
    # sbatch refuses: a new run folder is left as it was (missing or empty); a resumed one keeps its run
    resuming = run_folder.resuming(resume)
    with files.transaction() if not resuming else contextlib.nullcontext():
        trial.run_dir.mkdir(parents=True, exist_ok=True)
        trial.run_dir.chmod(0o700)  # owner-only, as in every backend (srljax.storage.run_dir.claim)
        auth.prepare(cfg, trial.run_dir)  # RUN_DIR/keys (0700, files 0600) before any task can start
        files.write_config(cfg)
        files.write(trial.script, render(cfg))
        (trial.run_dir / "logs").mkdir(parents=True, exist_ok=True)
        later = run_folder.set_aside_later(trial.run_dir / "checkpoints", run_folder.resume_step(resume))
        try:
            job_id = sbatch(trial.script)
        except SlurmError:
            run_folder.put_back_later(trial.run_dir / "checkpoints")
            raise
        for note in later:
            print(f"resume: {note}", flush=True)
        files.write_record(job_id, job_name(cfg), plan(cfg))
    _print_submitted(cfg, trial, job_id)
    return 0


def _refusal(cfg: Experiment, trial: Trial, resume: bool = False) -> str:
    """Why this trial must not be submitted now ("" if it may)."""
    name = job_name(cfg)
    if job := next(iter(jobs_named(name)), ""):  # its run folder moved away, or another run root
        return (f"trial {name} is already queued or running as job {job}; stop it first "
                f"({PROG} stop -e {cfg.name} -f {cfg.trial}) or pick another trial name with -f")
    if in_use := run_folder_problems(cfg, resume):  # again: slurm.workdir may have moved the run root
        return in_use[0]
    return _capacity(plan(cfg))


def _capacity(comps: list[Component]) -> str:
    """Het-job components never share a node: refuse a job the partitions cannot ever start."""
    nodes, default = partition_nodes()
    need: dict[str, list[Component]] = {}
    for comp in comps:
        part = comp.partition or default
        if part in nodes:  # an unknown partition is left to sbatch, which names it
            need.setdefault(part, []).append(comp)
    for part, members in need.items():
        wanted = sum(c.nodes for c in members)
        if wanted > nodes[part]:
            what = ", ".join(c.describe() for c in members)
            # a component of several nodes takes no guest
            host = next((c.groups[0].role for c in comps if c.nodes == 1 and c.groups[0].role != POLICY), "")
            return (f"the job needs at least {wanted} nodes of partition {part} ({len(members)} het-job components: "
                    f"{what}; Slurm never puts two components of one job on a node) but it has {nodes[part]}. "
                    "Pack small groups into another's component"
                    + (f", e.g. slurm.policy.component={host}" if host else ""))
    return ""


def _print_submitted(cfg: Experiment, trial: Trial, job_id: str) -> None:
    run_dir, q = trial.run_dir, f"-e {cfg.name} -f {cfg.trial}"
    print(f"submitted job {job_id} ({job_name(cfg)}), {len(plan(cfg))} het-job components", flush=True)
    print(f"run folder: {run_dir}", flush=True)
    print(f"  batch script: {trial.script}", flush=True)
    print(f"  controller log: {run_dir / 'logs' / f'job-{job_id}.log'}   (tail -f it to follow the trial)", flush=True)
    print(f"  worker logs: {run_dir / 'logs'}/<role>-<index>.log; metrics: {run_dir / 'metrics.jsonl'}", flush=True)
    print(f"  status: {PROG} status {q}; live metrics and the bottleneck: python -m launch.status {q} "
          f"--run-root {cfg.log.run_root}", flush=True)
    print(f"  stop:   {PROG} stop {q}", flush=True)

