"""A submitted Slurm trial by name: its files, ``status`` and ``stop``.

    python -m launch.slurm status -e cartpole_ppo_distributed -f try1   # or: status configs/x.py -f try1
    python -m launch.slurm status -e cartpole_ppo_distributed           # every trial with a Slurm job
    python -m launch.slurm stop -e cartpole_ppo_distributed -f try1 [--wait 180]

A trial is found by its run folder ``<run root>/<experiment>/<trial>`` (``--run-root``, default
the config's ``log.run_root``, else ``runs``), where ``slurm/job.json`` records the job id and
which groups each het-job component holds. ``stop`` signals only the batch shell
(``scancel --batch --signal=INT``): the controller stops every worker and the trainer writes its
final checkpoint; a job still there after ``--wait`` seconds is cancelled outright.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launch.slurm.jobs import SlurmError, final_state, jobs_named, queue, scancel
from launch.slurm.plan import Component
from srljax.telemetry.progress import last_json_line

ACTIONS = ("status", "stop")
STOP_WAIT_S = 180.0  # the controller waits up to 30 s per worker group, the trainer checkpoints


@dataclass(frozen=True)
class Trial:
    run_dir: Path

    @property
    def script(self) -> Path:
        return self.run_dir / "slurm" / "job.sh"

    @property
    def record(self) -> Path:
        return self.run_dir / "slurm" / "job.json"

    @property
    def result(self) -> Path:
        """Written last by the Slurm controller (``launch/slurm/controller.py``), with the job id."""
        return self.run_dir / "slurm" / "result.json"

    @property
    def status(self) -> Path:
        """Written by the ``Controller`` itself in every backend."""
        return self.run_dir / "status.json"

    def outcome(self) -> dict[str, Any]:
        """How the trial ended (``exit_code``, ``reason``, ``message``), {} while it runs: the Slurm
        controller's record, else the ``Controller``'s (its batch step was killed before writing)."""
        return self.read(self.result) or self.read(self.status)

    def read(self, path: Path) -> dict[str, Any]:
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return {}

    def checkpoint_steps(self) -> list[int]:
        folder = self.run_dir / "checkpoints"
        return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) if folder.is_dir() else []


class RunFiles:
    """Writes into a new or empty run folder; ``transaction`` leaves it as it was if anything in it raises."""

    def __init__(self, trial: Trial):
        self.trial = trial

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        run_dir = self.trial.run_dir
        created = None  # the outermost folder this creates (the run root itself, on a first run)
        for folder in (run_dir, *run_dir.parents):
            if folder.exists():
                break
            created = folder
        if created is None and any(run_dir.iterdir()):
            raise ValueError(f"{run_dir} is not empty: check srljax.storage.run_dir.problems first")
        try:
            yield
        except BaseException:
            for path in [created] if created is not None else list(run_dir.iterdir()):
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
            raise

    def write(self, path: Path, text: str) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def write_config(self, cfg: Any) -> None:
        from srljax.config import to_dict
        from srljax.storage.run_dir import keep_config

        keep_config(self.trial.run_dir)  # a resubmitted trial (--resume) keeps the config it started with

        self.write(self.trial.run_dir / "config.json", json.dumps(to_dict(cfg), indent=2, sort_keys=True) + "\n")

    def write_record(self, job_id: str, name: str, comps: list[Component]) -> None:
        groups = [[{"role": g.role, "count": g.count} for g in c.groups] for c in comps]
        self.write(self.trial.record, json.dumps({"job_id": job_id, "job_name": name, "submitted": round(time.time(), 3),
                                                  "components": groups, "script": str(self.trial.script)}, indent=2))


# -- status -------------------------------------------------------------------------------------------
def status_lines(trial: Trial, name: str) -> list[str]:
    record = trial.read(trial.record)
    if not record:
        return [f"{name}: no Slurm job recorded in {trial.run_dir} (submit it with python -m launch.slurm CFG.py)"]
    job = str(record["job_id"])
    rows = {r.component: r for r in queue(job, record.get("job_name", ""))}
    ended = "" if rows else (final_state(job, record.get("job_name", "")) or "ENDED")
    state = ended + (" (no longer known to Slurm)" if ended == "ENDED" else "")
    state = state or ", ".join(sorted({r.state for r in rows.values()}))
    out = [f"{name}: job {job}, {state}; run folder {trial.run_dir}"]
    out.append(f"  {'group':<8} {'tasks':>5}  {'component':<9}  {'Slurm state':<12} {'nodes / reason':<18} workers")
    for index, groups in enumerate(record.get("components", [])):
        row = rows.get(index)
        state = row.state if row else ended
        where = (row.nodes or f"({row.reason})") if row else "-"
        for g in groups:
            out.append(f"  {g['role']:<8} {g['count']:>5}  {index:<9}  {state:<12} {where:<18} "
                       f"{_worker_states(trial.run_dir, g['role'], g['count'])}")
    out.append("  " + _progress(trial.run_dir))
    starts = [json.loads(line) for line in (trial.run_dir / "slurm" / "starts.jsonl").read_text().splitlines()
              if line.strip()] if (trial.run_dir / "slurm" / "starts.jsonl").exists() else []
    if len(starts) > 1 or (starts and starts[-1].get("restart_count")):
        last = starts[-1]
        out.append(f"  starts: {len(starts)} (requeued {last.get('restart_count', 0)} times by Slurm); the last "
                   f"resumed from update {last.get('resumed_from_update')}")
    result = trial.outcome()
    if result:
        out.append(f"  controller: {'finished' if result.get('exit_code') == 0 else 'FAILED'} ({result.get('reason')}): "
                   f"{str(result.get('message', '')).splitlines()[0] if result.get('message') else ''}")
    if steps := trial.checkpoint_steps():
        out.append(f"  checkpoints: {trial.run_dir / 'checkpoints'} (latest step {steps[-1]})")
    return out


def _worker_states(run_dir: Path, role: str, count: int) -> str:
    states = Counter(last_json_line(run_dir / "workers" / f"{role}-{i}.jsonl").get("state", "not started")
                     for i in range(count))
    return ", ".join(f"{n} {state}" for state, n in sorted(states.items()))


def _progress(run_dir: Path) -> str:
    last = last_json_line(run_dir / "metrics.jsonl")
    total = json.loads((run_dir / "config.json").read_text()).get("total_env_steps") if (run_dir / "config.json").exists() else None
    if not last:
        return f"progress: no metrics yet ({run_dir / 'metrics.jsonl'})"
    ret = last.get("episode_return")
    return (f"progress: update {last.get('update')}, env steps {last.get('env_steps', 0):,}"
            + (f" / {total:,}" if total else "") + (f", episode return {ret:.1f}" if isinstance(ret, (int, float)) else ""))


# -- stop ------------------------------------------------------------------------------------------------
def stop(trial: Trial, name: str, wait_s: float) -> int:
    job = str(trial.read(trial.record).get("job_id", ""))
    if not (job and queue(job, name)):  # not recorded, or the id now belongs to another job
        job = next(iter(jobs_named(name)), "")
    rows = queue(job, name) if job else []
    if not rows:
        state = final_state(job, name) if job else ""
        print(f"{name}: not queued or running" + (f" (job {job}: {state or 'ended'})" if job else ""), flush=True)
        return 0
    if all(r.state == "PENDING" for r in rows):
        scancel(job)
        print(f"{name}: job {job} was still pending: cancelled", flush=True)
        return 0
    scancel(job, signal="INT", batch=True)  # SIGTERM would read as scancel: "cancelled", non-zero
    print(f"{name}: asked the controller of job {job} to stop (SIGINT to the batch shell); "
          f"waiting up to {wait_s:g} s for the workers to stop and the final checkpoint", flush=True)
    deadline = time.monotonic() + wait_s
    while (rows := queue(job, name)) and any(r.state != "COMPLETING" for r in rows) and time.monotonic() < deadline:
        time.sleep(1.0)
    if rows and any(r.state != "COMPLETING" for r in rows):
        scancel(job)
        print(f"{name}: job {job} did not end within {wait_s:g} s: cancelled it (scancel); "
              "the last complete checkpoint is kept", flush=True)
        return 1
    result = trial.outcome()
    print(f"{name}: job {job} ended; controller: {result.get('message', '(no result written)')}", flush=True)
    if steps := trial.checkpoint_steps():
        print(f"  checkpoints: {trial.run_dir / 'checkpoints'} (latest step {steps[-1]})", flush=True)
    return 0


# -- command line ----------------------------------------------------------------------------------------
def trial_main(argv: list[str], prog: str) -> int:
    """``status`` / ``stop`` [CFG.py] [-e NAME] [-f TRIAL] [--run-root DIR] [--wait S]."""
    action, rest = argv[0], argv[1:]
    parser = argparse.ArgumentParser(prog=f"{prog} {action}", description=__doc__.splitlines()[0])
    parser.add_argument("config", nargs="?", help="config file, for the experiment name and run root")
    parser.add_argument("-e", "--experiment", help="experiment name (default: the config's)")
    parser.add_argument("-f", "--trial", required=action == "stop", help="trial name" + (
        "" if action == "stop" else " (default: every trial of the experiment that has a Slurm job)"))
    parser.add_argument("--run-root", help="run root (default: the config's log.run_root, else runs)")
    parser.add_argument("--wait", type=float, default=STOP_WAIT_S, help="stop: seconds to wait for a clean stop")
    args = parser.parse_args(rest)
    name, run_root = args.experiment, args.run_root
    if args.config:
        from srljax.config import ConfigError, load_file

        try:
            cfg = load_file(args.config)
        except ConfigError as err:
            parser.error(str(err))
        name, run_root = name or cfg.name, run_root or cfg.log.run_root
    if not name:
        parser.error("name the experiment: -e NAME or a config file")
    root = Path(run_root or "runs") / name
    try:
        if action == "stop":
            return stop(Trial(root / args.trial), f"{name}/{args.trial}", args.wait)
        trials = [args.trial] if args.trial else sorted(p.parent.parent.name for p in root.glob("*/slurm/job.json"))
        if not trials:
            print(f"no Slurm trials of {name} under {root}")
            return 1
        for t in trials:
            print("\n".join(status_lines(Trial(root / t), f"{name}/{t}")), flush=True)
        return 0
    except SlurmError as err:
        print(f"{prog} {action}: {err}")
        return 1
