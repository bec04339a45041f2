"""``python -m launch.sweep SWEEP.py [--dry-run] [--jobs N] [--slurm] [--report]``: run a sweep, then report it.

    python -m launch.sweep configs/sweeps/cartpole_smoke.py          # 2 CartPole trials, then results.md
    python -m launch.sweep configs/sweeps/mujoco.py --dry-run        # what would run, and where each trial stands

Before any trial starts, every trial of the sweep is resolved and checked as ``launch.local`` would
check it (``launch/sweep/trials.py``); every problem is listed at once and the sweep exits 2 having
created nothing. Finished trials are skipped. A trial folder with a partial run continues from its
newest checkpoint (``launch.local --resume``; an interrupted trial writes one as it stops); one that
cannot (no checkpoint, or written with other settings) is moved aside to
``<trial>.failed-<timestamp>`` and the trial runs again from the start. Trials run ``--jobs`` at a
time (default: as many as the cores hold, a single-process trial counting 2 cores) or, with
``--slurm``, as one job array. At the end (locally) or with ``--report``: ``results.md`` and
``curves.png`` in ``runs/<sweep>/``.
A sweep that names ``Search(space=...)`` runs an Optuna study instead of a grid (``launch/sweep/search.py``:
samplers, pruning, ``search.md``); run again, it continues the study.
Exit codes: 0 every trial finished (or submitted), 1 a trial failed or Slurm refused, 2 bad sweep,
130 interrupted. A gate sweep (``configs/sweeps/gate.py``, ``launch/sweep/gate.py``): 0 every promise kept, 1 one
broke (the last line names each with its seeds' figures); ``--full`` adds the long promises, ``--compare
OLD/gate.json`` prints what moved.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

from launch.slurm.jobs import SlurmError
from launch.sweep import gate, slurm_array
from launch.sweep.local import (
    SINGLE_PROCESS_CORES,
    available_cores,
    command,
    default_jobs,
    log_path,
    packed,
    run_trials,
)
from launch.sweep.local import locked as _locked
from launch.sweep.report import write_report
from launch.sweep.spec import Sweep, load_sweep, shape
from launch.sweep.trials import DONE, PARTIAL, Planned, move_aside, resolve_trials
from srljax.config import ConfigError
from srljax.storage import run_dir as run_folder

PROG = "python -m launch.sweep"


def make_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("sweep", help="sweep file exposing sweep() -> Sweep, e.g. configs/sweeps/cartpole_smoke.py")
    parser.add_argument("--dry-run", action="store_true",
                        help="list every trial, its state and its command (with --slurm: print the array script); "
                             "start, move and write nothing")
    parser.add_argument("--jobs", type=int, help="trials at once (default: the cores / the cores one trial needs, "
                        "at least 1; a gate: one per core); with --slurm: array tasks at once (default: no limit)")
    parser.add_argument("--slurm", action="store_true", help="submit the unfinished trials as one Slurm job array")
    parser.add_argument("--report", action="store_true",
                        help="only write results.md and curves.png from the runs that exist")
    parser.add_argument("--full", action="store_true",
                        help="a gate sweep: every promise, the long ones too (default: the quick ones, Promise.quick)")
    parser.add_argument("--search-worker", action="store_true", help=argparse.SUPPRESS)  # a search's Slurm task
    parser.add_argument("--compare", metavar="OLD_GATE_JSON",
                        help="a gate sweep: print what moved since an earlier gate's gate.json (or its folder)")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = make_parser()
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: must be at least 1")
    try:
        sweep = load_sweep(args.sweep)
        if sweep.search is not None:  # an Optuna search instead of a grid (launch/sweep/search.py)
            from launch.sweep import search

            if args.full or args.compare:
                raise ConfigError(["--full and --compare are for a gate sweep, not a search"])
            return search.main(sweep, args, PROG)
        if (args.full or args.compare) and not sweep.gate:
            raise ConfigError(["--full and --compare are for a gate sweep (Sweep(gate=True), e.g. "
                               "configs/sweeps/gate.py)"])
        if sweep.gate:
            sweep = gate.tier(sweep, args.full)
            if not (args.report or args.dry_run):
                moved = _move_earlier_gate(sweep, args.slurm)
                if moved and (moved / "gate.json").exists() and not args.compare:
                    args.compare = str(moved / "gate.json")  # what moved since the last gate, said at the end
        planned = resolve_trials(sweep, check_env=not args.report)
        if args.slurm and not args.report:
            planned = slurm_array.resolve_for_slurm(planned)
            if found := slurm_array.array_problems([p for p in planned if p.state != DONE]):
                raise ConfigError(found)
    except ConfigError as err:
        print(f"{PROG}: {args.sweep}: {err}\nno trial was started.", file=sys.stderr)
        return 2
    sweep_dir = planned[0].run_dir.parent
    if args.report:
        return _report(sweep, planned, sweep_dir, args.sweep, args.compare)
    to_run = [p for p in planned if p.state != DONE]
    resume = resume_flag()
    _print_summary(sweep, planned, to_run, sweep_dir, resume)
    if args.dry_run:
        _print_trials(planned, resume)
        if args.slurm and to_run:
            print(slurm_array.render(to_run, sweep_dir, args.jobs, _extras(to_run, resume)), end="")
        return 0
    if not to_run:
        print("every trial is finished: nothing to run", flush=True)
        return _report(sweep, planned, sweep_dir, args.sweep, args.compare)
    if args.slurm:
        return _submit(sweep, to_run, sweep_dir, args, resume)
    # a gate's verdicts do not depend on load (single-process runs repeat per seed; asynchronous ones are judged on
    # their best window), so it runs a trial per core: on 2 cores 20 min instead of ~40
    jobs = args.jobs or (available_cores() if sweep.gate else default_jobs([p.cfg for p in to_run]))
    with _locked(sweep_dir) as holder:
        if holder:
            print(f"{PROG}: another launch.sweep is running this sweep ({holder}); nothing was started.",
                  file=sys.stderr)
            return 1
        if array := _queued_array(sweep, sweep_dir):
            print(f"{PROG}: this sweep's Slurm job array {array} is still queued or running; wait for it, or "
                  f"scancel it, before running trials here. nothing was started.", file=sys.stderr)
            return 1
        _set_aside(to_run, sweep_dir, resume)
        print(f"running {len(to_run)} trial(s), {jobs} at a time", flush=True)
        busy = {p.spec.name: gate.promise_of(p.spec.config).busy_loops for p in to_run} if sweep.gate else {}
        # seeds of a JAX-env trial run as one program (launch.sweep.local.packed); a gate times each seed alone
        trials = list(zip(to_run, _extras(to_run, resume)))
        code = run_trials(trials if sweep.gate else packed(trials), sweep_dir, jobs, busy)
    report = _report(sweep, planned, sweep_dir, args.sweep, args.compare)
    return report if sweep.gate and code != 130 else code


def resume_flag() -> bool:
    """Whether ``launch.local`` takes ``--resume`` (continue a trial folder); else partial folders are moved aside."""
    from launch.cli import make_parser as launch_parser

    return "--resume" in launch_parser("launch.local", "").format_help()


def why_not_resume(p: Planned, resume: bool) -> str:
    """Why partial trial ``p`` cannot continue with ``launch.local --resume`` ("" if it can)."""
    if not resume:
        return "launch.local has no --resume"
    found = run_folder.problems(p.cfg, resume=True)  # no checkpoint, or one written with other settings
    return found[0] if found else ""


def _extras(to_run: list[Planned], resume: bool) -> list[tuple[str, ...]]:
    """Extra ``launch.local`` flags per trial: ``--resume`` for a partial trial that can continue."""
    return [("--resume",) if p.state == PARTIAL and not why_not_resume(p, resume) else () for p in to_run]


def _set_aside(to_run: list[Planned], sweep_dir: Path, resume: bool) -> None:
    """Move every partial trial folder that cannot be resumed to ``<trial>.failed-<time>`` (its log too)."""
    for p in to_run:
        if p.state == PARTIAL and (why := why_not_resume(p, resume)):
            moved = move_aside(p.run_dir)
            log = log_path(sweep_dir, p.spec.name)
            if log.exists():
                log.rename(log.with_name(f"{moved.name}.log"))
            print(f"moved the partial run of {p.spec.name} ({p.detail}) aside to {moved}, because {why}; "
                  "the trial runs again from the start", flush=True)


def _submit(sweep: Sweep, to_run: list[Planned], sweep_dir: Path, args: argparse.Namespace, resume: bool) -> int:
    try:
        if queued := slurm_array.queued(sweep.name):
            print(f"{PROG}: this sweep's job array {', '.join(queued)} ({slurm_array.job_name(sweep.name)}) is still "
                  "queued or running; wait for it or scancel it. nothing was submitted.", file=sys.stderr)
            return 1
        _set_aside(to_run, sweep_dir, resume)
        job_id = slurm_array.submit(to_run, sweep_dir, args.jobs, _extras(to_run, resume))
    except SlurmError as err:
        print(f"{PROG}: {err}\nnothing was submitted.", file=sys.stderr)
        return 1
    print(f"submitted job array {job_id} ({slurm_array.job_name(sweep.name)}): {len(to_run)} trial(s)", flush=True)
    print(f"  script: {sweep_dir / 'slurm' / 'array.sh'}; trial logs: {sweep_dir / 'logs'}/<trial>.log", flush=True)
    print(f"  when it has ended: {PROG} {args.sweep} --report   (or run it again to redo failed trials)", flush=True)
    return 0


def _report(sweep: Sweep, planned: list[Planned], sweep_dir: Path, sweep_file: str, compare_to: str | None = None
            ) -> int:
    """results.md and curves.png; for a gate also gate.md / gate.json, its verdicts and, with ``compare_to``, what
    moved since then: 1 when a promise broke (or the earlier gate.json is not one)."""
    path = write_report(sweep, planned, sweep_dir, sweep_file)
    print(f"report: {path}" + (f" and {path.with_name('curves.png')}" if path.with_name("curves.png").exists() else ""),
          flush=True)
    if not sweep.gate:
        return 0
    verdicts = gate.judge(planned, sweep_dir)
    table = gate.write(verdicts, sweep_dir, sweep_file)
    if compare_to:
        try:
            print(gate.compare(compare_to, json.loads((sweep_dir / "gate.json").read_text())), flush=True)
        except ConfigError as err:
            print(f"{PROG}: {err}", file=sys.stderr)
            return 2
    print(gate.summary(verdicts, table), flush=True)
    return 0 if all(v.kept for v in verdicts) else 1


def _move_earlier_gate(sweep: Sweep, slurm: bool) -> Path | None:
    """A gate measures the tree it runs on: an earlier gate's folder moves to ``<gate>.<time>`` (for --compare)."""
    from srljax.config import Experiment

    root = Path(Experiment().log.run_root)
    for override in sweep.overrides:
        if override.startswith("log.run_root="):
            root = Path(override.split("=", 1)[1])
    folder = root / sweep.name
    if folder.is_dir() and any(p.is_dir() and p.name not in ("logs", "slurm") for p in folder.iterdir()):
        moved = folder.with_name(f"{folder.name}.{time.strftime('%Y%m%d-%H%M%S')}")
        folder.rename(moved)
        print(f"the earlier gate run moved to {moved}/; every promise runs anew{' as a job array' if slurm else ''}",
              flush=True)
        return moved
    return None


def _print_summary(sweep: Sweep, planned: list[Planned], to_run: list[Planned], sweep_dir: Path, resume: bool) -> None:
    partial = [p for p in to_run if p.state == PARTIAL]
    resumable = sum(not why_not_resume(p, resume) for p in partial)
    what = f"{resumable} resumed with --resume, {len(partial) - resumable} moved aside and rerun"
    print(f"sweep {sweep.name}: {len(planned)} trials ({shape(sweep, len(planned))}) in {sweep_dir}/", flush=True)
    print(f"  finished (skipped): {len(planned) - len(to_run)}; partial: {len(partial)} ({what}); "
          f"new: {len(to_run) - len(partial)}", flush=True)
    if to_run and sweep.gate:
        print(f"  this machine: {available_cores()} cores; a gate runs one trial per core unless --jobs says "
              "otherwise", flush=True)
    elif to_run:
        print(f"  this machine: {available_cores()} cores; a single-process trial keeps ~{SINGLE_PROCESS_CORES} "
              f"busy, so --jobs defaults to {default_jobs([p.cfg for p in to_run])}", flush=True)


def _print_trials(planned: list[Planned], resume: bool) -> None:
    for p in planned:
        print(f"  {p.state:8} {p.spec.name}  ({p.detail})")
        if p.state == DONE:
            continue
        why = why_not_resume(p, resume) if p.state == PARTIAL else ""
        if why:
            print(f"           would move {p.run_dir} aside to {p.run_dir.name}.failed-<time>: {why}")
        extra = ("--resume",) if p.state == PARTIAL and not why else ()
        print(f"           $ {shlex.join(['python', *command(p, extra)[1:]])}")


def _queued_array(sweep: Sweep, sweep_dir: Path) -> str:
    """The sweep's job array still in the Slurm queue, if it ever submitted one and Slurm is reachable."""
    if not (sweep_dir / "slurm" / "array.json").exists():
        return ""
    try:
        return ", ".join(slurm_array.queued(sweep.name))
    except SlurmError:  # not a Slurm node: no array of ours can be queued here
        return ""
