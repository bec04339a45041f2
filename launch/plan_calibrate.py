"""The real actor worker's CPU per batch step, for ``python -m launch.plan CFG --measure``.

    unit = measure_actor_process(cfg_json, envs=64, seconds=6.0, root=tmp)   # {"wall_s", "cpu_s", "steps", ...}

``launch.plan_measure`` times the inline actor's loop (env step, act, segment store) without its sockets. A real
actor process spends more per batch step: the worker loop's poll of its control and params sockets, the params it
decodes, the segments it sends, its control and I/O threads. On the 2-core box the loop measured 0.41 ms of CPU
per step of 64 synthetic envs and the real actor 0.59 ms (bench/RESULTS.md, "Issue 42, session 26"). This runs
the config for a few seconds as one actor and a trainer (``launch.local``, processes, the plan's own overrides)
and reads the actor's process CPU (``cpu_s``, every worker's metrics line) against its env steps after a warm-up.
The planner adds what the process spends beyond the loop to every actor step (``Costs.actor_overhead_s``).

Then, where the plan for this machine puts more actors than cores (``crowded_choice``), the same run with that many
actors: actors taking turns on a core spend more CPU per step than one alone (on the 2-core box 0.58 ms per step of
64 synthetic 1 ms envs with 7 actors against 0.425 alone). The planner scales the actor step's CPU by that ratio at
that many actors per core (``Costs.crowding``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from srljax.layout import ACTOR
from srljax.sizing import Choice, Cluster, Costs, overrides, rank

TRIAL_PREFIX = "calibrate"
START_TIMEOUT_S = 240.0  # start-up and compiles before the actor's first steps
STOP_TIMEOUT_S = 60.0


def _lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:  # a line being written
            pass
    return out


def window(lines: list[dict[str, Any]], seconds: float, min_steps: int) -> dict[str, float] | None:
    """The steady window of an actor's metrics lines: from the second line that has env steps (the first holds the
    start-up) to the newest, once it spans ``seconds`` and ``min_steps`` env steps; None before."""
    stepping = [m for m in lines if m.get("state") == "running" and m.get("env_steps", 0) > 0 and "cpu_s" in m]
    if len(stepping) < 3:
        return None
    first, last = stepping[1], stepping[-1]
    steps = last["env_steps"] - first["env_steps"]
    dt = last["time"] - first["time"]
    if dt < seconds or steps < min_steps:
        return None
    return {"cpu_s_per_step": (last["cpu_s"] - first["cpu_s"]) / steps, "wall_s_per_step": dt / steps,
            "steps": steps, "seconds": dt}


def measure_actor_process(cfg_json: Path, envs: int, seconds: float, root: Path, log=print,
                          actors: int = 1) -> dict[str, float]:
    """``actors`` actors of ``envs`` envs and a trainer for ``seconds`` of steady running: the actor processes' CPU
    and wall per batch step, over all of them (``wall_s`` there includes any wait for the trainer's params and, with
    more actors than cores, for a core)."""
    config_py = root / "calibrate_config.py"
    config_py.write_text("import json\nfrom pathlib import Path\n\nfrom srljax.config import from_dict\n\n\n"
                         "def experiment():\n"
                         f"    return from_dict(json.loads(Path({str(cfg_json)!r}).read_text()))\n")
    trial = f"{TRIAL_PREFIX}_{actors}x{envs}_{os.getpid()}"
    planned = overrides(Choice(actors, envs), None, Cluster(1, os.cpu_count() or 1))
    cmd = [sys.executable, "-m", "launch.local", str(config_py), "-e", "plan_measure", "-f", trial,
           f"log.run_root={root}", "log.wandb=disabled", "log.progress=lines", "checkpoint.final=false",
           "checkpoint.every_updates=0", "total_env_steps=1000000000", f"timeout_seconds={START_TIMEOUT_S + 10 * seconds}",
           *planned]
    workers = root / "plan_measure" / trial / "workers"
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    found, deadline = None, time.monotonic() + START_TIMEOUT_S + 10 * seconds
    try:
        while found is None and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            windows = [window(_lines(workers / f"{ACTOR}-{i}.jsonl"), seconds, 20 * envs) for i in range(actors)]
            found = None if any(w is None for w in windows) else windows
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)  # as a scheduler's stop: the launcher ends the trial
            try:
                proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        output = proc.stdout.read() if proc.stdout else ""
    if found is None:
        raise RuntimeError(f"the calibration run ({actors} actor(s) of {envs} envs and a trainer) gave no steady "
                           f"window of {seconds:g} s (exit {proc.returncode}); its output:\n{output[-3000:]}")
    steps = sum(w["steps"] for w in found)
    unit = {"wall_s": sum(w["wall_s_per_step"] for w in found) / actors * envs,
            "cpu_s": sum(w["cpu_s_per_step"] * w["steps"] for w in found) / steps * envs,
            "steps": steps, "seconds": min(w["seconds"] for w in found)}
    if actors > 1:
        unit.update(envs=envs, actors=actors, cores=os.cpu_count() or 1)
    log(f"  {actors:3d} x {envs:5d} envs: the real actor process {unit['cpu_s'] * 1e3:.3f} ms CPU per batch step "
        f"({unit['wall_s'] * 1e3:.3f} ms wall, over {steps:,} env steps)")
    return unit


def crowded_choice(measured: dict[str, Any], max_policy_lag: int, cores: int | None = None) -> Choice | None:
    """The inline layout the plan for this machine picks from the units ``measured`` so far (one actor's costs),
    where it puts more actors than cores (None otherwise): the crowded calibration's layout."""
    cores = cores or os.cpu_count() or 1
    ranked = rank(Costs.from_dict(measured), Cluster(1, cores), max_policy_lag)
    best = next((s.choice for s in ranked if s.choice.inference == "inline"), None)
    return best if best is not None and best.actors > cores else None
