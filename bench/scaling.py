"""Actor scaling: envpool tasks at a fixed batch vs one process, or the data path itself on the synthetic env.

    python bench/scaling.py --env synthetic                   # 1..64 actors x 16 envs, 20 ms steps (rows below)
    python bench/scaling.py --env synthetic --actors 1 16 64 --only-inline --out rows.jsonl
    bash tests/slurm/cluster.sh exec .venv/bin/python bench/scaling.py --env synthetic --actors 1 16 --only-inline --slurm
    python bench/scaling.py                                   # HalfCheetah and CartPole, actors 1 2 4
    python bench/scaling.py --cases halfcheetah --actors 2 --repeats 3
    python bench/scaling.py --cases halfcheetah layout.max_segments_ahead=4 env.num_threads=1
    python bench/scaling.py --cases halfcheetah --actors 2 --variant "" --variant "layout.max_segments_ahead=4"

Every row trains the same batch with the same PPO settings: the case's single-process config file
as it is (``configs/mujoco_ppo.py``: 64 envs x 32 steps; ``configs/cartpole_ppo.py``: 8 envs x 128
steps). The ``single`` row is that file run by ``python -m launch.local`` (``layout.mode=single``,
``srljax.loops.train``). Each distributed row is the same file with only layout overrides:
``layout.mode=distributed layout.inference=inline layout.num_actors=N trainer.batch_envs=B
env.num_envs=B/N``, so the batch (and hence the algorithm) stays fixed while the envs are split
over N actor processes, each stepping its own envpool and acting on its own CPU core, plus one
trainer process. Key=value arguments on the command line are added to the distributed rows only
(the single row is the reference); each ``--variant "k=v ..."`` adds another set of distributed
rows with those overrides as well (``--variant ""``: the plain rows), to compare settings against
one single-process reference in one run; ``--common "k=v ..."`` changes the case's config for every
row, the single one included. Every run goes through ``python -m launch.local`` in a
subprocess, as a user runs it, into a fresh trial folder under a temporary run root.

Figures, per row (the median over ``--repeats`` interleaved runs; every run is printed as JSON):

* env steps/s: env steps trained on per second, from ``metrics.jsonl`` between the update that
  ends the warm-up (``--warmup`` of the run's updates: start-up and JIT compile excluded) and the
  last update; the ratio to the single-process row;
* policy lag: of the columns trained on (``lag/mean`` averaged over the steady updates, largest
  ``lag/max``), the trainer's whole-run histogram of segments by lag at arrival (``lag/received``
  in ``workers/trainer-0.jsonl``), and the columns dropped as staler than ``trainer.max_policy_lag``
  (at the trainer and at the actors);
* CPU: the cores the run's processes used in that window and the CPU milliseconds they spent per
  1,000 env steps (``/proc``: the launcher's process tree), next to the cores every other process on
  the machine used meanwhile, the load from other jobs that the ratios must be read against;
* where the time goes: the trainer's and the actors' time shares (``time/wait/*``, ``time/compute/*``
  from ``workers/*.jsonl``, averaged over the running lines after the first), the median update
  time; for the single row the loop's own split (``time_env`` / ``time_act`` / ``time_update`` /
  ``time_store``) per update.

``--env synthetic`` measures the worker graph rather than a simulator: every actor steps 16 envs of
``envs/synthetic.py`` whose batch step costs ``--step-ms`` (20) of wall time and almost no CPU, so on 2
cores the actors, inference, transport and trainer are what is measured. Rows: 1, 2, 4, 8, 16, 32, 64
actors with inline inference and CartPole-sized observations (4 float32); 84x84 uint8 frame stacks
(4x84x84, Nature CNN) at 1 and 16 actors; remote inference with 1, 2, 4 policy workers at 16; rings 2 and
4 at 16; with ``--slurm``, the 16-actor inline row again through ``launch.slurm`` (its efficiency against the
local 1-actor row). The batch is every actor's envs (``trainer.batch_envs = 16 x actors``) and the update is cheap
(one epoch of one minibatch; an MLP 64-64 for the vector rows), so the trainer should not bound them. Per
row: env steps/s trained on, efficiency = that / (actors x the 1-actor row of the same observations,
inference and ring), the policy lag of segments at arrival (p50 / p99, whole run), the CPU the run's
processes used per env step (``/proc``), the policy workers' batch fill, and the bound ``launch.status``
names (two scrapes of every worker's Prometheus endpoint, taken once the run is past its warm-up).
``--out FILE`` appends one JSON line per row.

The machine's load average is printed with each run (and ``--quiet`` can wait for a quieter
machine before each one): on a shared machine other jobs move the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from machine import describe  # bench/machine.py, next to this script

ROOT = Path(__file__).resolve().parents[1]
COMMON = ["log.wandb=disabled", "log.progress=lines", "checkpoint.final=false", "checkpoint.every_updates=0"]
CASES: dict[str, dict[str, Any]] = {
    # config file, env columns per batch (its env.num_envs), steps per column, default env steps per row
    "halfcheetah": {"config": "configs/mujoco_ppo.py", "batch": 64, "steps": 32, "total": 300_000},
    "cartpole": {"config": "configs/cartpole_ppo.py", "batch": 8, "steps": 128, "total": 200_000},
}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def row_overrides(case: dict[str, Any], actors: int, extra: list[str]) -> list[str]:
    """The layout overrides of a distributed row: the batch stays ``case["batch"]`` columns."""
    batch = case["batch"]
    if batch % actors:
        raise SystemExit(f"{batch} envs do not split over {actors} actors")
    return ["layout.mode=distributed", "layout.inference=inline", f"layout.num_actors={actors}",
            f"trainer.batch_envs={batch}", f"env.num_envs={batch // actors}", *extra]


def mean_shares(lines: list[dict[str, Any]]) -> dict[str, float]:
    """Time shares (``time/...``) averaged over a worker's running lines after the first."""
    running = [x for x in lines if x.get("state") == "running"][1:] or lines[-1:]
    keys = sorted({k for x in running for k in x if k.startswith("time/") and not k.startswith("time/update_s")})
    return {k[5:]: statistics.fmean(x.get(k, 0.0) for x in running) for k in keys}


TICKS = os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (all cores, /proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICKS  # all but idle and iowait


def tree_cpu_s(root: int, names: dict[int, str], marker: str = "",
               seen: dict[int, tuple[str, float]] | None = None) -> dict[str, float]:
    """CPU seconds used so far by process ``root`` and its living descendants (/proc/<pid>/stat), by
    worker (``trainer-0``, ``actor-1``, ...: the ``srljax.system.shell.run`` arguments) or ``launcher``; with a
    ``marker`` (a run folder) also every process whose command line holds it and their descendants (Slurm
    tasks, which slurmd starts). With ``seen`` (kept by the caller across calls), a process that has exited still
    counts with its last reading, so a worker restarted mid-run (a new process under the same name) adds its
    CPU instead of replacing the old process's (a Pong row of issue 42 read -0.025 cores for a restarted actor)."""
    procs: dict[int, tuple[int, int]] = {}
    marked: set[int] = set()
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                text = Path(entry.path, "stat").read_text()
            except OSError:
                continue
            fields = text[text.rindex(")") + 2:].split()
            procs[int(entry.name)] = (int(fields[1]), int(fields[11]) + int(fields[12]))
            if marker and int(entry.name) not in names:
                try:
                    if marker.encode() in Path(entry.path, "cmdline").read_bytes():
                        marked.add(int(entry.name))
                except OSError:
                    pass
    ours, grew = {root} | marked | (set(names) if marker else set()), True
    while grew:
        more = {pid for pid, (ppid, _) in procs.items() if ppid in ours} - ours
        ours |= more
        grew = bool(more)
    out: dict[str, float] = {}
    for pid in ours & procs.keys():
        name = names.get(pid)
        if name is None:
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                argv = []
            run = argv.index("srljax.system.shell.run") if "srljax.system.shell.run" in argv else -1
            name = f"{argv[run + 2]}-{argv[run + 3]}" if 0 <= run and len(argv) > run + 3 else "launcher"
            if name != "launcher" or pid == root:  # a worker just forked still shows the launcher's command line
                names[pid] = name
        out[name] = out.get(name, 0.0) + procs[pid][1] / TICKS
        if seen is not None:
            seen[pid] = (name, procs[pid][1] / TICKS)
    if seen is not None:
        out = {}
        for name, cpu in seen.values():
            out[name] = out.get(name, 0.0) + cpu
    return out


def wait_quiet(max_busy: float, max_wait: float) -> float:
    """Wait (at most ``max_wait`` s) until the machine uses under ``max_busy`` cores over 3 s; return that use."""
    deadline = time.monotonic() + max_wait
    while True:
        busy = machine_busy_s()
        time.sleep(3.0)
        cores = (machine_busy_s() - busy) / 3.0
        if cores < max_busy or time.monotonic() >= deadline:
            return cores


Sample = tuple[float, int, dict[str, float], float]  # time, metrics lines, CPU s of our processes by worker, of the machine


def launch_watched(cmd: list[str], metrics_path: Path, on_lines: Callable[[int], None] | None = None,
                   job_result: Path | None = None, timeout: float = 3600) -> tuple[subprocess.CompletedProcess, list[Sample]]:
    """Run ``cmd``; every 0.25 s note (time, metrics lines written, CPU s of its processes, CPU s of the machine)
    and call ``on_lines(metrics lines written)`` if given. ``job_result``: ``cmd`` submits a Slurm job, whose
    end writes that file: watch until it exists (the job's processes are found by the run folder's name)."""
    samples: list[Sample] = []
    names: dict[int, str] = {}
    seen: dict[int, tuple[str, float]] = {}  # every process of the run so far: (worker, its last CPU reading)
    marker = str(metrics_path.parent) if job_result else ""
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=err, text=True)
        while (proc.poll() is None or (job_result is not None and proc.returncode == 0 and not job_result.exists()
                                        and time.monotonic() < deadline)):
            lines = metrics_path.read_text().count("\n") if metrics_path.exists() else 0
            samples.append((time.monotonic(), lines, tree_cpu_s(proc.pid, names, marker, seen), machine_busy_s()))
            if on_lines is not None:
                on_lines(lines)
            time.sleep(0.25)
        out.seek(0)
        err.seek(0)
        code = proc.returncode
        if job_result is not None and code == 0:
            code = json.loads(job_result.read_text()).get("exit_code", 1) if job_result.exists() else 124
        return subprocess.CompletedProcess(cmd, code, out.read(), err.read()), samples


def steady_cpu(samples: list[Sample], first_line: int, last_line: int) -> tuple[dict[str, float], float]:
    """({worker: cores it used}, cores every other process used) between the samples that first saw those
    metrics lines."""
    a = next((x for x in samples if x[1] >= first_line), None)
    b = next((x for x in samples if x[1] >= last_line), samples[-1] if samples else None)
    if a is not None and b is not None:
        # the last sample up to b in which every worker of a still lives: once the last line is written the
        # workers stop, and one that had exited by b would drop out of the sum and its CPU count as other jobs'
        # (actors missing from 3 of 6 synthetic 1 ms rows of issue 42, whose "cores left" came out too few)
        alive = [x for x in samples if a[0] <= x[0] <= b[0] and set(a[2]) - {"launcher"} <= set(x[2])]
        b = alive[-1] if alive else b
    if a is None or b is None or b[0] - a[0] < 1.0:
        return {}, float("nan")
    dt = b[0] - a[0]
    workers = {k: round((b[2][k] - a[2].get(k, 0.0)) / dt, 3) for k in sorted(b[2])}
    return workers, (b[3] - a[3]) / dt - sum(workers.values())


def run_one(name: str, case: dict[str, Any], row: str, overrides: list[str], repeat: int, root: Path,
            warmup: float, quiet: tuple[float, float]) -> dict[str, Any]:
    trial = f"{row.split(' [')[0].replace(' ', '')}-r{repeat}-{os.getpid()}-{time.monotonic_ns()}"
    per_update = case["batch"] * case["steps"]
    cmd = [sys.executable, "-m", "launch.local", case["config"], "-e", f"scaling_{name}", "-f", trial,
           f"log.run_root={root}", f"total_env_steps={case['total']}", *COMMON, *overrides]
    busy_before = wait_quiet(*quiet) if quiet[1] > 0 else float("nan")
    load_before = os.getloadavg()[0]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    run_dir = root / f"scaling_{name}" / trial
    out, samples = launch_watched(cmd, run_dir / "metrics.jsonl")
    wall = time.monotonic() - start
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    if out.returncode or len(metrics) < 4:
        print(out.stdout[-3000:], out.stderr[-3000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"{name}/{row} failed (exit {out.returncode}); see {run_dir}")
    first_index = max(1, int(len(metrics) * warmup)) - 1
    first = metrics[first_index]
    last = metrics[-1]
    steady = [m for m in metrics if m["update"] > first["update"]]
    dt = last["time"] - first["time"]
    workers, others = steady_cpu(samples, first_index + 1, len(metrics))
    ours = sum(workers.values()) if workers else float("nan")
    sps = (last["update"] - first["update"]) * per_update / dt  # trained env steps/s
    result: dict[str, Any] = {
        "row": row,
        "sps": sps,
        "received_sps": (last["env_steps"] - first["env_steps"]) / dt,
        "steady_updates": f"{first['update']}-{last['update']}",
        "steady_s": round(dt, 1),
        "cores": round(ours, 2),  # CPU the run's processes used in the steady window
        "cores_by_worker": workers,
        "cpu_ms_per_1k_steps": round(1e6 * ours / sps, 1),
        "others_cores": round(others, 2),  # CPU the rest of the machine used meanwhile
        "others_cores_before": round(busy_before, 2),
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime, 1),
        "load": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "final_return": last.get("episode_return"),
    }
    if row == "single":
        result["split_s"] = {k[5:]: round(statistics.fmean(m[k] for m in steady), 4)
                             for k in ("time_env", "time_act", "time_update", "time_store") if k in last}
        return result
    workers = run_dir / "workers"
    trainer = read_jsonl(workers / "trainer-0.jsonl")
    actors = [read_jsonl(p) for p in sorted(workers.glob("actor-*.jsonl"))]
    actor_shares = [mean_shares(a) for a in actors]
    keys = sorted({k for s in actor_shares for k in s})
    result.update({
        "lag_mean": round(statistics.fmean(m.get("lag/mean", 0.0) for m in steady), 2),
        "lag_max": max(m.get("lag/max", 0) for m in steady),
        "lag_received": trainer[-1].get("lag/received", {}),
        "dropped_trainer": last.get("dropped_stale_columns", 0),
        "dropped_actors": sum(a[-1].get("dropped_stale_columns", 0) for a in actors if a),
        "trainer_shares": {k: round(v, 3) for k, v in mean_shares(trainer).items()},
        "actor_shares": {k: round(statistics.fmean(s.get(k, 0.0) for s in actor_shares), 3) for k in keys},
        "update_ms_p50": round(1e3 * trainer[-1].get("time/update_s/p50", float("nan")), 1),
    })
    return result


def fmt_shares(shares: dict[str, float], digits: int = 2) -> str:
    return " ".join(f"{k} {v:.{digits}f}" for k, v in shares.items())


def table(name: str, case: dict[str, Any], runs: dict[str, list[dict[str, Any]]]) -> str:
    single = statistics.median(r["sps"] for r in runs["single"])
    lines = [f"{name}: {case['config']}, batch {case['batch']} envs x {case['steps']} steps, "
             f"{case['total']:,} env steps per run",
             "| layout | env steps/s, median (each run) | vs single | policy lag of trained columns: mean / max "
             "| segments by lag at arrival (last run) | dropped stale columns (all runs) | cores used: this run / other "
             "processes (median) | CPU ms per 1k steps (median) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row, rs in runs.items():
        sps = statistics.median(r["sps"] for r in rs)
        each = ", ".join(f"{r['sps']:,.0f}" for r in rs)
        cores = (f"{statistics.median(r['cores'] for r in rs):.2f} / {statistics.median(r['others_cores'] for r in rs):.2f}"
                 f" | {statistics.median(r['cpu_ms_per_1k_steps'] for r in rs):.0f}")
        label = "single process" if row == "single" else row
        if row == "single":
            lag = "0 / 0 | - | -"
        else:
            last = rs[-1]
            lag = (f"{statistics.median(r['lag_mean'] for r in rs):.2f} / {max(r['lag_max'] for r in rs)} | "
                   f"{last['lag_received']} | {sum(r['dropped_trainer'] + r['dropped_actors'] for r in rs)}")
        lines.append(f"| {label} | {sps:,.0f} ({each}) | {sps / single:.2f}x | {lag} | {cores} |")
    lines.append("")
    lines.append("where the time goes (last run of each row; shares of wall time):")
    for row, rs in runs.items():
        last = rs[-1]
        if row == "single":
            lines.append(f"  single: seconds per update {fmt_shares(last['split_s'], 3)}; cores {last['cores']}; "
                         f"wall {last['wall_s']} s, cpu {last['cpu_s']} s")
        else:
            lines.append(f"  {row}: trainer {fmt_shares(last['trainer_shares'])}, update p50 {last['update_ms_p50']} ms"
                         f" | actors (mean) {fmt_shares(last['actor_shares'])} | cores {fmt_shares(last['cores_by_worker'])}"
                         f" | wall {last['wall_s']} s, cpu {last['cpu_s']} s")
    return "\n".join(lines)


# -- the synthetic env: the data path itself -------------------------------------------------------------
SYNTHETIC_CONFIG = "configs/cartpole_ppo.py"  # PPO; everything that matters is overridden below
SYNTHETIC_ENVS = 16  # envs per actor
SYNTHETIC_STEPS = 32  # algo.num_steps: one segment is 16 envs x 32 steps
OBS = {"vector": ("4", "float32"), "image": ("4x84x84", "uint8")}  # CartPole-sized; an Atari frame stack
SYNTHETIC_UPDATE = ["trainer.update_epochs=1", "trainer.num_minibatches=1"]  # cheap: the trainer must not bound


def synthetic_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    """The grid: actors x inline (vector obs), the image rows, remote inference with 1..4 policy workers, rings."""
    rows = [dict(actors=n, inference="inline", policy_workers=0, ring=1, obs="vector", backend="local")
            for n in args.actors]
    biggest = max(n for n in args.actors if n <= 16)
    if args.slurm:
        rows.append(dict(actors=biggest, inference="inline", policy_workers=0, ring=1, obs="vector", backend="slurm"))
    if args.only_inline:
        return rows
    for n in sorted({1, biggest}):
        rows.append(dict(actors=n, inference="inline", policy_workers=0, ring=1, obs="image", backend="local"))
    rows.append(dict(actors=1, inference="remote", policy_workers=1, ring=1, obs="vector", backend="local"))
    rows += [dict(actors=biggest, inference="remote", policy_workers=p, ring=1, obs="vector", backend="local")
             for p in args.policy_workers]
    rows += [dict(actors=biggest, inference="inline", policy_workers=0, ring=r, obs="vector", backend="local")
             for r in args.rings if r > 1]
    return rows


def synthetic_overrides(row: dict[str, Any], step_ms: float) -> list[str]:
    n, (shape, dtype) = row["actors"], OBS[row["obs"]]
    out = ["layout.mode=distributed", f"layout.num_actors={n}", f"layout.inference={row['inference']}",
           f"layout.ring_size={row['ring']}", "env.factory=envs.synthetic:make_synthetic",
           f"env.num_envs={SYNTHETIC_ENVS}", f"env.options.step_ms={step_ms}", f"env.options.obs_shape={shape}",
           f"env.options.obs_dtype={dtype}", f"trainer.batch_envs={SYNTHETIC_ENVS * n}",
           f"algo.num_steps={SYNTHETIC_STEPS}", *SYNTHETIC_UPDATE]
    if row["inference"] == "remote":
        out.append(f"layout.num_policy_workers={row['policy_workers']}")
    return out


def row_label(row: dict[str, Any]) -> str:
    inference = f"remote x{row['policy_workers']}" if row["inference"] == "remote" else "inline"
    return f"{row['actors']} actors, {row['obs']}, {inference}, ring {row['ring']}, {row['backend']}"


def percentile(histogram: dict[str, int], q: float) -> float:
    """The ``q`` quantile of a ``{value: count}`` histogram (``lag/received``); NaN if empty."""
    items = sorted((int(k), v) for k, v in histogram.items())
    total, seen = sum(v for _, v in items), 0
    for value, count in items:
        seen += count
        if seen >= q * total:
            return float(value)
    return float("nan")


class StatusProbe:
    """Once the run is past its warm-up, asks ``launch.status`` (its library: two scrapes of every worker's
    Prometheus endpoint) what bounds it, in a thread, once."""

    def __init__(self, run_dir: Path, after_lines: int, interval: float):
        import threading

        self.run_dir, self.after_lines, self.interval = run_dir, after_lines, interval
        self.result: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._probe, daemon=True)

    def __call__(self, lines: int) -> None:
        if lines >= self.after_lines and not self._thread.is_alive() and not self.result:
            self.result["started"] = True
            self._thread.start()

    def _probe(self) -> None:
        sys.path.insert(0, str(ROOT))
        from launch.status import diagnose, measure, summarise
        from srljax.telemetry.prometheus import read_targets

        try:
            scrapes, problems = measure(read_targets(self.run_dir), self.interval)
            roles = summarise(scrapes)
            diagnosis = diagnose(roles)
            policy = roles.get("policy")
            self.result.update(bound=diagnosis.cause, sentence=diagnosis.sentence, problems=problems,
                               batch_fill=policy.figures.get("batch fill") if policy else None)
        except (OSError, ValueError) as error:
            self.result.update(bound="?", sentence=f"launch.status could not scrape: {error}")


def run_synthetic(row: dict[str, Any], args: argparse.Namespace, root: Path) -> dict[str, Any]:
    n = row["actors"]
    per_update = SYNTHETIC_ENVS * n * SYNTHETIC_STEPS
    trial = f"{row['obs']}-{row['inference']}{row['policy_workers']}-r{row['ring']}-a{n}-{time.monotonic_ns()}"
    overrides = synthetic_overrides(row, args.step_ms)
    launcher = "launch.slurm" if row["backend"] == "slurm" else "launch.local"
    if row["backend"] == "slurm":  # the trainer on one node, the actors over two more
        trial += "-slurm"
        overrides += ["slurm.actor.nodes=2", "slurm.actor.mem_gb_per_task=1"]
    cmd = [sys.executable, "-m", launcher, SYNTHETIC_CONFIG, "-e", "scaling_synthetic", "-f", trial,
           f"log.run_root={root}", f"total_env_steps={per_update * args.updates}", *COMMON, *overrides]
    run_dir = root / "scaling_synthetic" / trial
    first_line = max(1, int(args.updates * args.warmup))
    probe = StatusProbe(run_dir, first_line + 1, args.status_interval)
    start = time.monotonic()
    job_result = run_dir / "slurm" / "result.json" if row["backend"] == "slurm" else None
    out, samples = launch_watched(cmd, run_dir / "metrics.jsonl", probe, job_result)
    wall = time.monotonic() - start
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    if out.returncode or len(metrics) < first_line + 2:
        print(out.stdout[-3000:], out.stderr[-3000:], sep="\n", file=sys.stderr)
        raise SystemExit(f"{row_label(row)} failed (exit {out.returncode}); see {run_dir}")
    return synthetic_figures(row, metrics, run_dir, first_line, samples, probe.result, wall)


def synthetic_figures(row: dict[str, Any], metrics: list[dict[str, Any]], run_dir: Path, first_line: int,
                      samples: list[Sample], status: dict[str, Any], wall: float) -> dict[str, Any]:
    per_update = SYNTHETIC_ENVS * row["actors"] * SYNTHETIC_STEPS
    first, last = metrics[first_line - 1], metrics[-1]
    dt = last["time"] - first["time"]
    sps = (last["update"] - first["update"]) * per_update / dt
    workers, others = steady_cpu(samples, first_line, len(metrics)) if samples else ({}, float("nan"))
    ours = sum(workers.values()) if workers else float("nan")
    trainer = read_jsonl(run_dir / "workers" / "trainer-0.jsonl")
    lag = trainer[-1].get("lag/received", {}) if trainer else {}
    return {**row, "obs": " ".join(OBS[row["obs"]]), "obs_kind": row["obs"], "env_steps_per_s": round(sps, 1), "steady_updates": f"{first['update']}-{last['update']}",
            "steady_s": round(dt, 1), "lag_p50": percentile(lag, 0.5), "lag_p99": percentile(lag, 0.99),
            "cores": round(ours, 2), "cpu_us_per_env_step": round(1e6 * ours / sps, 1) if workers else None,
            "cores_by_role": {role: round(sum(v for k, v in workers.items() if k.split("-")[0] == role), 3)
                              for role in sorted({k.split("-")[0] for k in workers})},
            "others_cores": round(others, 2), "batch_fill": status.get("batch_fill"),
            "bound": status.get("bound", "?"), "bound_sentence": status.get("sentence", "not measured"),
            "wall_s": round(wall, 1), "load": round(os.getloadavg()[0], 1)}


def synthetic_table(results: list[dict[str, Any]], step_ms: float) -> str:
    lines = [f"synthetic env: {step_ms:g} ms per batch step, {SYNTHETIC_ENVS} envs per actor, segments of "
             f"{SYNTHETIC_STEPS} steps, batch = all actors' envs, PPO update of 1 epoch x 1 minibatch (MLP 64-64; "
             "image rows: Nature CNN)",
             "| actors | obs | inference | ring | backend | env steps/s | efficiency | policy lag p50 / p99 | "
             "CPU us per env step | cores: run / others | inference batch fill | bound (launch.status) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        fill = f"{100 * r['batch_fill']:.0f}%" if r.get("batch_fill") is not None else "-"
        inference = f"remote x{r['policy_workers']}" if r["inference"] == "remote" else "inline"
        cpu = f"{r['cpu_us_per_env_step']:.0f}" if r.get("cpu_us_per_env_step") is not None else "-"
        lines.append(f"| {r['actors']} | {r['obs']} | {inference} | {r['ring']} | "
                     f"{r['backend']} | {r['env_steps_per_s']:,.0f} | {r['efficiency']:.2f} | "
                     f"{r['lag_p50']:g} / {r['lag_p99']:g} | {cpu} | {r['cores']:.2f} / {r['others_cores']:.2f} | "
                     f"{fill} | {r['bound']} |")
    lines.append("")
    lines += [f"  {row_label({**r, 'obs': r['obs_kind']})}: {r['bound_sentence']}" for r in results]
    return "\n".join(lines)


def main_synthetic(args: argparse.Namespace) -> int:
    results: list[dict[str, Any]] = []
    baselines: dict[tuple[str, str, int], float] = {}  # (obs, inference, ring) -> the 1-actor row's env steps/s
    out = open(args.out, "a") if args.out else None
    with tempfile.TemporaryDirectory(prefix="srljax-scaling-") as tmp:
        for row in synthetic_rows(args):
            result = run_synthetic(row, args, Path(tmp))
            key = (row["obs"], row["inference"], row["ring"])  # the row's obs kind (the result's "obs" is its shape)
            if row["actors"] == 1 and row["backend"] == "local":
                baselines.setdefault(key, result["env_steps_per_s"])
            base = baselines.get(key) or baselines.get((row["obs"], "inline", 1))
            result["efficiency"] = round(result["env_steps_per_s"] / (row["actors"] * base), 3) if base else float("nan")
            result["step_ms"] = args.step_ms
            results.append(result)
            line = json.dumps(result)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
                out.flush()
    if out:
        out.close()
    print(f"machine at the end: {describe()}")
    print(synthetic_table(results, args.step_ms))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=["envpool", "synthetic"], default="envpool",
                        help="envpool: the --cases (HalfCheetah, CartPole) at a fixed batch; synthetic: the data path "
                             "with envs/synthetic.py (rows below)")
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--actors", type=int, nargs="+", default=None,
                        help="actor counts (default: 1 2 4; synthetic: 1 2 4 8 16 32 64)")
    parser.add_argument("--step-ms", type=float, default=20.0, help="synthetic: wall time of one batch step")
    parser.add_argument("--updates", type=int, default=24, help="synthetic: updates per row")
    parser.add_argument("--policy-workers", type=int, nargs="+", default=[1, 2, 4],
                        help="synthetic: remote-inference rows at the largest actor count up to 16, with these policy workers")
    parser.add_argument("--rings", type=int, nargs="+", default=[1, 2, 4], help="synthetic: ring sizes (rows > 1)")
    parser.add_argument("--only-inline", action="store_true", help="synthetic: only the inline vector rows")
    parser.add_argument("--slurm", action="store_true",
                        help="synthetic: also the largest inline vector row up to 16 actors through launch.slurm (the "
                             "trainer on one node, the actors on two; run the bench where sbatch works, e.g. "
                             "bash tests/slurm/cluster.sh exec .venv/bin/python bench/scaling.py ...)")
    parser.add_argument("--status-interval", type=float, default=4.0,
                        help="synthetic: seconds between launch.status's two scrapes")
    parser.add_argument("--out", default="", help="synthetic: append one JSON line per row to this file")
    parser.add_argument("--steps", type=int, default=0, help="env steps per run (default: per case)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of every row, interleaved")
    parser.add_argument("--warmup", type=float, default=0.2, help="share of a run's updates left out")
    parser.add_argument("--quiet", type=float, nargs=2, default=[0.5, 0.0], metavar=("CORES", "SECONDS"),
                        help="before each run wait until other processes use under CORES cores, at most SECONDS "
                             "(default 0.5 0: do not wait)")
    parser.add_argument("--common", default="", metavar='"k=v ..."',
                        help="overrides for every row, the single-process one included (changes the case's config)")
    parser.add_argument("--variant", action="append", default=None, metavar='"k=v ..."',
                        help="another set of distributed rows with these overrides (repeatable; \"\": the plain rows)")
    argv = sys.argv[1:]
    # key=value anywhere on the line (not the value of --variant or --common): overrides for every distributed row
    is_extra = [("=" in a and not a.startswith("-") and (i == 0 or argv[i - 1] not in ("--variant", "--common")))
                for i, a in enumerate(argv)]
    extra = [a for a, x in zip(argv, is_extra) if x]
    args = parser.parse_args([a for a, x in zip(argv, is_extra) if not x])
    print(f"machine: {describe()}", flush=True)
    if args.env == "synthetic":
        args.actors = args.actors or [1, 2, 4, 8, 16, 32, 64]
        return main_synthetic(args)
    args.actors = args.actors or [1, 2, 4]
    if args.common:
        print(f"every row takes: {args.common}", flush=True)
    if extra:
        print(f"distributed rows also take: {' '.join(extra)}", flush=True)
    tables = []
    with tempfile.TemporaryDirectory(prefix="srljax-scaling-") as tmp:
        for name in args.cases:
            case = dict(CASES[name], total=args.steps or CASES[name]["total"])
            common = args.common.split()
            rows: dict[str, list[str]] = {"single": common}
            for variant in args.variant or [""]:
                for n in args.actors:
                    label = f"{n} actor{'s' if n > 1 else ''} x {case['batch'] // n} envs" + (f" [{variant}]" if variant else "")
                    rows[label] = row_overrides(case, n, common + extra + variant.split())
            runs: dict[str, list[dict[str, Any]]] = {row: [] for row in rows}
            for repeat in range(args.repeats):
                for row, overrides in rows.items():
                    result = run_one(name, case, row, overrides, repeat, Path(tmp), args.warmup, tuple(args.quiet))
                    runs[row].append(result)
                    print(json.dumps({"case": name, **result}), flush=True)
            tables.append(table(name, case, runs))
            print("\n" + tables[-1] + "\n", flush=True)
    print(f"machine at the end: {describe()}")
    print("\n\n".join(tables))
    return 0


if __name__ == "__main__":
    sys.exit(main())
