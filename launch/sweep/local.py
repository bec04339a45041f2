"""Run a sweep's trials on this machine, ``jobs`` at a time, each as ``python -m launch.local`` in a subprocess.

    code = run_trials(to_run, sweep_dir, jobs=1)     # 0 when every trial exited 0

Each trial's output goes to ``<sweep>/logs/<trial>.log`` and its exit code and wall time (launch to
exit, start-up and JIT included; a resumed trial's attempts added up) to ``<sweep>/logs/<trial>.json``,
which the report reads. Trials
run in their own sessions, so Ctrl-C reaches this process only: it forwards SIGINT to every
running trial, waits for them to stop (then kills what is left) and returns 130. A trial also
dies with the sweep (``PR_SET_PDEATHSIG``), so a killed sweep leaves no trial writing behind it;
its folder is partial and the next launch moves it aside or resumes it.
"""

from __future__ import annotations

import ctypes
import dataclasses
import fcntl
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from launch.sweep.spec import TrialSpec
from launch.sweep.trials import NEW, Planned, last_record, read_json
from srljax.config import Experiment, consumes
from srljax.config.experiment import seed_trials
from srljax.layout import build_layout, plan_of

STOP_GRACE_S = 30.0  # after Ctrl-C: how long trials get to stop before they are killed
POLL_S = 0.2
LIVE_EVERY_S = 30.0  # how often the running trials' progress is printed as a table
SINGLE_PROCESS_CORES = 2  # the loop plus envpool's and XLA's threads: two trials on two cores slow each other ~2x


def trial_cores(cfg: Experiment) -> float:
    """Cores one trial keeps busy: 2 for the single-process loop, else its workers' CPUs plus the controller."""
    if cfg.layout.mode == "single":
        return SINGLE_PROCESS_CORES
    return sum(g.count * g.cpus for g in build_layout(cfg).groups) + 1


def available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_jobs(cfgs: list[Experiment], cores: int | None = None) -> int:
    """Trials at once so that the hungriest trial's share fits the cores (at least 1)."""
    need = max((trial_cores(c) for c in cfgs), default=SINGLE_PROCESS_CORES)
    return max(1, math.floor((cores or available_cores()) / need))


def command(p: Planned, extra: tuple[str, ...] = ()) -> list[str]:
    """The command line that runs trial ``p`` (as a user would type it)."""
    spec = p.spec
    return [sys.executable, "-m", "launch.local", spec.config, "-e", p.cfg.name, "-f", spec.name, *extra,
            *spec.overrides]


def packed(to_run: list[tuple[Planned, tuple[str, ...]]]) -> list[tuple[Planned, tuple[str, ...]]]:
    """Fresh trials of one config and grid point that differ only in their seed and run on the Anakin path (a JAX
    env, ``srljax/loops/anakin.py``) as one launch with ``seeds=[...]``: one compile, one vmapped program, and each
    seed's folder named as the sweep names that trial (``<config>__<point>__seed=<s>``)."""
    out: list[tuple[Planned, tuple[str, ...]]] = []
    groups: dict[tuple, list[Planned]] = {}
    for p, extra in to_run:
        suffix = f"__seed={p.spec.seed}"
        if (not extra and p.state == NEW and p.spec.name.endswith(suffix) and p.cfg.layout.mode == "single"
                and not p.cfg.seeds and plan_of(p.cfg).loop == "anakin"):
            rest = tuple(o for o in p.spec.overrides if o != f"seed={p.spec.seed}")
            groups.setdefault((p.spec.config, p.spec.point, p.spec.name.removesuffix(suffix), rest), []).append(p)
        else:
            out.append((p, extra))
    for (config, point, base, rest), group in groups.items():
        if len(group) == 1:
            out.append((group[0], ()))
            continue
        seeds = tuple(p.spec.seed for p in group)
        spec = TrialSpec(base, config, point, seeds[0], (*rest, f"seeds=[{','.join(map(str, seeds))}]"))
        cfg = dataclasses.replace(group[0].cfg, trial=base, seed=seeds[0], seeds=seeds)
        out.append((Planned(spec, cfg, NEW, f"seeds {list(seeds)} in one program"), ()))
    return out


def log_path(sweep_dir: Path, trial: str) -> Path:
    return sweep_dir / "logs" / f"{trial}.log"


def record_path(sweep_dir: Path, trial: str) -> Path:
    return sweep_dir / "logs" / f"{trial}.json"


@dataclass
class Running:
    planned: Planned
    proc: subprocess.Popen[bytes]
    log: IO[bytes]
    started: float
    extra: tuple[str, ...] = ()
    earlier_s: float = 0.0  # wall time of the attempts a resumed trial continues
    busy: list[subprocess.Popen[bytes]] = field(default_factory=list)  # CPU-bound loops beside it (a gate's load)


def run_trials(to_run: list[tuple[Planned, tuple[str, ...]]], sweep_dir: Path, jobs: int,
               busy_loops: dict[str, int] | None = None) -> int:
    """Run every ``(trial, extra launch.local flags)``, ``jobs`` at a time; 0 if all exit 0, 1 if any fails,
    130 if interrupted. ``busy_loops``: trial name -> CPU-bound processes run beside it while it runs."""
    busy_loops = busy_loops or {}
    pending, running, failed, done = deque(to_run), [], 0, 0
    total = len(to_run)
    (sweep_dir / "logs").mkdir(parents=True, exist_ok=True)
    next_table = time.monotonic() + LIVE_EVERY_S
    try:
        while pending or running:
            while pending and len(running) < jobs:
                planned, extra = pending.popleft()
                running.append(_start(planned, extra, sweep_dir, total - len(pending), total,
                                      busy_loops.get(planned.spec.name, 0)))
            for run in [r for r in running if r.proc.poll() is not None]:
                running.remove(run)
                failed += _finish(run, sweep_dir) != 0
                done += 1
            if running and time.monotonic() >= next_table:
                print(live_table(running, done, len(pending)), flush=True)
                next_table = time.monotonic() + LIVE_EVERY_S
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        print(f"interrupted: stopping {len(running)} running trial(s) (each writes a checkpoint as "
              "it stops; launch the sweep again to resume them)", flush=True)
        _stop(running, sweep_dir)
        return 130
    return 1 if failed else 0


def live_table(running: list[Running], done: int, pending: int) -> str:
    """The running trials' progress (their newest metrics line), with how many ended and wait."""
    lines = [f"sweep: {done} ended, {len(running)} running, {pending} waiting"]
    for run in running:
        last = last_record(run.planned.run_dir / "metrics.jsonl")
        total = run.planned.cfg.total_env_steps
        ret = last.get("episode_return")
        sps = last.get("sps")
        lines.append(f"  {run.planned.spec.name:<40} {int(last.get('env_steps', 0)):>11,} / {total:,} env steps"
                     + (f"  return {ret:8.1f}" if isinstance(ret, (int, float)) else "")
                     + (f"  {sps:,.0f} steps/s" if isinstance(sps, (int, float)) else "")
                     + f"  {time.time() - run.started:.0f} s")
    return "\n".join(lines)


BUSY_LOOP = "while True: pass"


def _start(p: Planned, extra: tuple[str, ...], sweep_dir: Path, index: int, total: int, busy: int = 0) -> Running:
    resumed = "--resume" in extra  # the log continues, and the wall time adds to the earlier attempts'
    earlier = float(read_json(record_path(sweep_dir, p.spec.name)).get("wall_s", 0.0)) if resumed else 0.0
    log = log_path(sweep_dir, p.spec.name).open("ab" if resumed else "wb")
    cmd = command(p, extra)
    log.write(f"$ {' '.join(cmd)}\n".encode())
    log.flush()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=_die_with_parent)
    loops = [subprocess.Popen([sys.executable, "-c", BUSY_LOOP], stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
             for _ in range(busy)]
    print(f"[{index}/{total}] started {p.spec.name}" + (f" beside {busy} busy loops" if busy else "")
          + f"  (log: {log_path(sweep_dir, p.spec.name)})", flush=True)
    return Running(p, proc, log, time.time(), extra, earlier, loops)


def _finish(run: Running, sweep_dir: Path) -> int:
    run.log.close()
    for loop in run.busy:
        loop.kill()
        loop.wait()
    code, wall = run.proc.returncode, time.time() - run.started
    name = run.planned.spec.name
    record = {"exit_code": code, "wall_s": round(run.earlier_s + wall, 1), "started": time.strftime(
              "%Y-%m-%dT%H:%M:%S", time.localtime(run.started)), "command": command(run.planned, run.extra)}
    trials = seed_trials(run.planned.cfg)  # a pack of seeds (``packed``): each seed's trial gets the record
    for trial in [name] + ([t.trial for t in trials] if len(trials) > 1 else []):
        record_path(sweep_dir, trial).write_text(json.dumps(record, indent=1) + "\n")
    last = last_record(trials[0].run_dir / "metrics.jsonl")
    ret = last.get("episode_return")
    how = f"return {ret:.1f}" if isinstance(ret, (int, float)) else "no episode finished"
    if code == 0:
        cfg = run.planned.cfg
        short = last.get("env_steps", 0) < cfg.total_env_steps and consumes(cfg.algo) == "segments"
        why = (f" (whole updates: {cfg.num_updates} x {cfg.env_steps_per_update:,} of total_env_steps="
               f"{cfg.total_env_steps:,})" if short else "")
        print(f"finished {name} in {wall:.0f} s: {last.get('env_steps', 0):,} env steps{why}, {how}", flush=True)
    elif code == 130:
        print(f"stopped {name} after {wall:.0f} s at {last.get('env_steps', 0):,} env steps", flush=True)
    else:
        print(f"FAILED {name} (exit {code}) after {wall:.0f} s; log: {log_path(sweep_dir, name)}", flush=True)
    return code


def _stop(running: list[Running], sweep_dir: Path) -> None:
    for run in running:
        _signal(run.proc, signal.SIGINT)
    deadline = time.time() + STOP_GRACE_S
    while time.time() < deadline and any(r.proc.poll() is None for r in running):
        time.sleep(POLL_S)
    for run in running:
        if run.proc.poll() is None:
            _signal(run.proc, signal.SIGKILL)
            run.proc.wait()
        _finish(run, sweep_dir)


def _signal(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)  # the trial's process group; a distributed launch.local stops its workers itself
    except ProcessLookupError:
        pass


def _die_with_parent() -> None:
    """In the child: SIGTERM when the sweep process dies (Linux ``PR_SET_PDEATHSIG``; elsewhere nothing)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except OSError:
        pass


@contextmanager
def locked(sweep_dir: Path) -> Iterator[str]:
    """Hold ``<sweep>/sweep.lock`` while trials run; yields "" if we hold it, else who does."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    path = sweep_dir / "sweep.lock"
    with path.open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            yield handle.read().strip() or "pid unknown"
            return
        handle.truncate(0)
        handle.write(f"pid {os.getpid()}\n")
        handle.flush()
        try:
            yield ""
        finally:
            handle.truncate(0)
