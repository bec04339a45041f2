"""Render a trial as one sbatch script: a heterogeneous job, one ``srun`` step per worker group.

    cfg = resolved(cfg)                # absolute run root; slurm.workdir / slurm.python filled in
    print(render(cfg))                 # what ``python -m launch.slurm CFG.py --dry-run`` shows

The script ``cd``s to the checkout, runs the set-up lines, starts every group as a background
``srun`` step (each task runs ``python -m launch.slurm.task RUN ROLE OFFSET``, worker index =
OFFSET + ``$SLURM_PROCID``) and runs the controller in the batch step itself, so Slurm's
time-limit warning (``--signal=B:USR1@N``), ``launch.slurm stop`` (``scancel --batch --signal=INT``) and
``scancel`` or preemption (SIGTERM) reach it through this shell: each becomes a clean stop (final
checkpoint, every worker told to stop). The job exits with the controller's code, so only a finished
or stopped trial is ``COMPLETED``; one cut short by the time limit or cancelled is not. A step's exit status lands in ``RUN/slurm/exit/ROLE``,
where the controller sees a group that died. A multi-host trainer's step spreads its tasks one per
node (``srun --nodes=N --ntasks=N --ntasks-per-node=1``).

With ``layout.max_restarts`` > 0 the steps of groups that restart workers (all but the trainer's,
``srljax/system/shell/restarts.py``) keep their other tasks running when one ends
(``--kill-on-bad-exit=0 --wait=0``, whatever the cluster's ``KillOnBadExit`` and ``WaitTime``): the
controller restarts the lost worker as a step of its own (``restart_command``).
"""

from __future__ import annotations

import dataclasses
import os
import shlex
import sys
from pathlib import Path

from launch.slurm.node import TIME_LIMIT_EXIT_CODE
from launch.slurm.plan import Component, GroupPlan, anakin, plan, time_limit
from srljax.config import Experiment
from srljax.system.shell.restarts import Restarts

STEP_GRACE_S = 60  # after the controller: how long the steps may take to close before the job ends


def job_name(cfg: Experiment) -> str:
    """``<experiment>/<trial>``: what ``squeue --name`` finds a trial by."""
    return f"{cfg.name}/{cfg.trial}"


def resolved(cfg: Experiment) -> Experiment:
    """``cfg`` with what the nodes need spelled out: an absolute ``log.run_root``, ``slurm.workdir``
    (default: the current directory) and ``slurm.python`` (default: this interpreter, unresolved,
    so a venv's ``bin/python`` stays the venv's)."""
    s = cfg.slurm
    workdir = os.path.abspath(s.workdir or os.getcwd())
    python = s.python or os.path.abspath(sys.executable)
    run_root = os.path.join(workdir, cfg.log.run_root)  # an absolute run_root stays as it is
    return dataclasses.replace(cfg, log=dataclasses.replace(cfg.log, run_root=os.path.normpath(run_root)),
                               slurm=dataclasses.replace(s, workdir=workdir, python=python))


def render(cfg: Experiment) -> str:
    """The whole sbatch script for a ``resolved`` config whose ``slurm_problems`` are empty."""
    comps = plan(cfg)
    run_dir, workdir, python = Path(cfg.run_dir), cfg.slurm.workdir, cfg.slurm.python
    if not (run_dir.is_absolute() and os.path.isabs(workdir) and python):
        raise ValueError("render() needs a resolved config: call launch.slurm.sbatch.resolved(cfg) first")
    if anakin(cfg):
        return _render_anakin(cfg, comps[0])
    lines = ["#!/bin/bash",
             f"# srljax trial {job_name(cfg)}, written by `python -m launch.slurm`: resubmit with it rather than edit this.",
             *_sbatch(["--job-name=" + job_name(cfg), f"--output={run_dir}/logs/job-%j.log", f"--time={time_limit(cfg)}",
                       f"--signal=B:USR1@{cfg.slurm.signal_seconds}",
                       # requeued, the script runs again and the controller resumes from the newest checkpoint
                       "--requeue" if cfg.slurm.requeue else "--no-requeue",
                       *cfg.slurm.sbatch])]
    for comp in comps:
        if comp.index:
            lines.append("#SBATCH hetjob")
        where = " (the batch script and the controller run on its first node)" if comp.index == 0 else ""
        lines += [f"# component {comp.index}: {comp.describe()}{where}", *_sbatch(comp.options)]
    q = shlex.quote
    lines += ["", "cd " + q(workdir) + " || exit 1", *cfg.slurm.setup,
              f"RUN={q(str(run_dir))}", f"PY={q(python)}", "export PYTHONUNBUFFERED=1",
              'command -v "$PY" >/dev/null || { echo "python $PY not found on $(hostname): set slurm.python or slurm.setup"; exit 1; }',
              "# an earlier start of this job (requeued) or of this trial (--resume) left exit files and addresses",
              'rm -rf "$RUN/slurm/exit" "$RUN/names"; mkdir -p "$RUN/slurm/exit"', "",
              "# SIGUSR1: the time limit is near (--signal); SIGINT: launch.slurm stop; SIGTERM: scancel or",
              "# preemption. The controller turns each into a clean stop (checkpoint written, workers ended) and",
              "# exits 0 only for the stop asked for (a background job ignores SIGINT: Python's handler takes it back).",
              'controller="" pending=""',
              *[f'trap \'if [ -n "$controller" ]; then kill -{s} "$controller"; else pending={s}; fi\' {s}'
                for s in ("USR1", "INT", "TERM")], "",
              "# workers: one step per group; task i of a step is worker OFFSET + i"]
    lines += [_step(cfg, comp, g, len(comps)) for comp in comps for g in comp.groups]
    lines += ["", "# the controller: registers the workers, starts them, watches heartbeats, ends the trial",
              _controller(cfg, len(comps)),
              'controller=$!',
              '[ -n "$pending" ] && kill -"$pending" "$controller"',
              'while kill -0 "$controller" 2>/dev/null; do wait "$controller"; done',
              'wait "$controller"; code=$?',
              f"# the workers were told to stop: give their steps {STEP_GRACE_S} s to close, then end the job",
              f'for _ in $(seq {STEP_GRACE_S}); do [ -z "$(jobs -pr)" ] && break; sleep 1; done',
              'echo "controller exited with code $code"',
              *([f'if [ "$code" = {TIME_LIMIT_EXIT_CODE} ]; then  # slurm.requeue: continue in a new start of this job',
                 '  echo "requeueing job $SLURM_JOB_ID: the next start resumes from the newest checkpoint"',
                 '  scontrol requeue "$SLURM_JOB_ID"', "fi"] if cfg.slurm.requeue else []),
              'exit "$code"', ""]
    return "\n".join(lines)


def _render_anakin(cfg: Experiment, comp: Component) -> str:
    """An Anakin run's script: one ``srun`` step of ``trainer.num_hosts`` tasks, one per node, each a
    ``launch/hosts.py`` process of one ``jax.distributed`` group (joined through Slurm's environment); no controller.
    The time-limit warning (USR1), ``launch.slurm stop`` (INT) and ``scancel`` (TERM) reach the tasks as SIGTERM
    (``scancel --signal=TERM JOB.0``: srun cancels its step on a SIGTERM of its own),
    JAX's preemption notice: every process stops at the same call, checkpointed. The job exits with the processes'
    code, for such a stop the Slurm controller's (``launch/hosts.py``); with ``slurm.requeue`` a time-limit stop
    requeues the job, which resumes."""
    (g,) = comp.groups
    run_dir, q = Path(cfg.run_dir), shlex.quote
    srun = ["srun", "--label", *g.step_options(), *_container(cfg)]
    lines = ["#!/bin/bash",
             f"# srljax trial {job_name(cfg)}, written by `python -m launch.slurm`: resubmit with it rather than edit this.",
             f"# an Anakin run over {g.count} host(s): one process per node, one jax.distributed group (launch/hosts.py)",
             *_sbatch(["--job-name=" + job_name(cfg), f"--output={run_dir}/logs/job-%j.log", f"--time={time_limit(cfg)}",
                       f"--signal=B:USR1@{cfg.slurm.signal_seconds}",
                       "--requeue" if cfg.slurm.requeue else "--no-requeue", *cfg.slurm.sbatch, *comp.options]),
             "", "cd " + q(cfg.slurm.workdir) + " || exit 1", *cfg.slurm.setup,
             f"RUN={q(str(run_dir))}", f"PY={q(cfg.slurm.python)}", "export PYTHONUNBUFFERED=1",
             'command -v "$PY" >/dev/null || { echo "python $PY not found on $(hostname): set slurm.python or slurm.setup"; exit 1; }',
             "",
             "# USR1: the time limit is near; INT: launch.slurm stop; TERM: scancel or preemption. Each reaches the",
             "# processes as SIGTERM (scancel --signal: a SIGTERM to srun itself would cancel the step), which JAX",
             "# turns into one stop of the group, checkpointed.",
             'step="" caught=""',
             'stop() { caught=$1; echo "$1" > "$RUN/slurm/stop"; [ -n "$step" ] && scancel --signal=TERM "$SLURM_JOB_ID.0"; }',
             *[f"trap 'stop {s}' {s}" for s in ("USR1", "INT", "TERM")],
             f"{' '.join(srun)} \\\n    \"$PY\" -m launch.hosts \"$RUN\" --slurm &",
             'step=$!',
             '[ -n "$caught" ] && stop "$caught"',
             'while kill -0 "$step" 2>/dev/null; do wait "$step"; done',
             'wait "$step"; code=$?',
             'echo "the processes exited with code $code"',
             *([f'if [ "$caught" = USR1 ] && [ "$code" = {TIME_LIMIT_EXIT_CODE} ]; then  # slurm.requeue: a new start',
                '  echo "requeueing job $SLURM_JOB_ID: the next start resumes from the newest checkpoint"',
                '  scontrol requeue "$SLURM_JOB_ID"', "fi"] if cfg.slurm.requeue else []),
             'exit "$code"', ""]
    return "\n".join(lines)


def _sbatch(options: list[str] | tuple[str, ...]) -> list[str]:
    return [f"#SBATCH {option}" for option in options]


def _container(cfg: Experiment) -> list[str]:
    if not cfg.slurm.container_image:
        return []
    workdir, root = cfg.slurm.workdir, cfg.log.run_root  # the run root, so names, logs and checkpoints are shared
    mounts = ",".join(dict.fromkeys([f"{workdir}:{workdir}", f"{root}:{root}"]))
    return [f"--container-image={cfg.slurm.container_image}", f"--container-mounts={mounts}",
            f"--container-workdir={workdir}"]


def _het(index: int, num_components: int) -> list[str]:
    return [f"--het-group={index}"] if num_components > 1 else []


def _step(cfg: Experiment, comp: Component, g: GroupPlan, num_components: int) -> str:
    restarts = cfg.layout.max_restarts > 0 and Restarts.policy(g.role) == "worker"  # a trainer group ends together
    keep = ["--kill-on-bad-exit=0", "--wait=0"] if restarts else []
    srun = ["srun", *_het(comp.index, num_components), *g.step_options(), *keep, *_container(cfg)]
    return (f"{{ {' '.join(srun)} \\\n    \"$PY\" -m launch.slurm.task \"$RUN\" {g.role} {g.offset}; "
            f"echo $? > \"$RUN/slurm/exit/{g.role}\"; }} &")


def restart_command(cfg: Experiment, role: str, index: int, node: str = "") -> list[str]:
    """The ``srun`` command that restarts worker ``role``/``index`` (on Slurm node ``node``, if known): a
    single-task step in its group's component with the group's per-task resources; ``--overlap``
    because the lost task's step holds its share until the group's other tasks end."""
    comps = plan(cfg)
    comp, g = next((c, g) for c in comps for g in c.groups if g.role == role)
    per_task = [o for o in g.task_options() if o.split("=")[0] in ("--cpus-per-task", "--mem-per-cpu", "--gpus-per-task")]
    return ["srun", *_het(comp.index, len(comps)), "--overlap", "--nodes=1", "--ntasks=1", *per_task,
            *([f"--nodelist={node}"] if node else []), *_container(cfg),
            cfg.slurm.python, "-m", "launch.slurm.task", str(cfg.run_dir), role, str(index)]


def kill_command(cfg: Experiment, role: str, node: str, pid: int) -> list[str]:
    """``srun`` of ``kill -KILL PID`` on Slurm node ``node`` (no container: the host's process table)."""
    comps = plan(cfg)
    comp = next(c for c in comps for g in c.groups if g.role == role)
    return ["srun", *_het(comp.index, len(comps)), "--overlap", "--nodes=1", "--ntasks=1", f"--nodelist={node}",
            "kill", "-KILL", str(pid)]


def _controller(cfg: Experiment, num_components: int) -> str:
    container = _container(cfg)
    if not container:  # a child of this shell: signals pass through the traps above
        return '"$PY" -m launch.slurm.controller "$RUN" &'
    # in the image too: a step on this node sharing the trainer's CPUs (srun forwards USR1 and TERM)
    srun = ["srun", *_het(0, num_components), "--overlap", "--nodes=1", "--ntasks=1", *container]
    return f"{' '.join(srun)} \"$PY\" -m launch.slurm.controller \"$RUN\" &"

