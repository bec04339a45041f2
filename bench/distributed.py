"""Distributed local layout vs single process, same config: env steps/s, inference latency, policy lag.

    python bench/distributed.py                          # Pong and HalfCheetah (tens of minutes on 2 CPU cores)
    python bench/distributed.py --cases pong --updates 5
    python bench/distributed.py --cases publish_every --updates 60 --warmup 10 --repeats 3   # publish_every 4 vs 1
    python bench/distributed.py --record                 # also append the table to bench/RESULTS.md

For each case the first variant is the baseline the others are compared with. For pong and
halfcheetah it is the single-process run of the config file as it is (``configs/atari_ppo.py``,
``configs/mujoco_ppo.py``); the distributed runs are the same file with overrides that only change
the layout: 2 actors (each half of the envs, ``trainer.batch_envs`` keeping the batch), 1
trainer, and either ``remote`` inference (a policy worker) or ``inline`` inference (each actor
runs the policy on its own CPU core). ``publish_every`` runs ``configs/cartpole_ppo_distributed.py``
with ``trainer.publish_every`` 1 and 4: an update that does not publish must cost nothing, so the
ratio should be ~1. Every run trains on the same batch (envs x steps) with the same
hyperparameters, as ``python -m launch.local`` in a subprocess, as a user would. The layouts are
run ``--repeats`` times each, interleaved, and the median is reported: on a shared machine the
load changes from minute to minute.

env steps/s is measured from the trainer's ``metrics.jsonl`` between the end of update
``--warmup`` (compilation done) and the last update, so start-up is excluded for all; for the
distributed runs only env steps that went into updates count (none dropped as too stale). The
inference round trip (p50/p99 per actor) and the policy lag histogram come from
``workers/*.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from machine import describe  # bench/machine.py, next to this script

ROOT = Path(__file__).resolve().parents[1]
COMMON = ["log.wandb=disabled", "log.progress=lines", "checkpoint.final=false"]
DISTRIBUTED = ["layout.mode=distributed", "layout.num_actors=2", "layout.num_policy_workers=1"]
CASES: dict[str, tuple[str, int, dict[str, list[str]]]] = {
    # name: (config file, env steps per update in it, {variant: overrides}); "single" is the file as it is.
    # Pong's remote layout is configs/atari_ppo_distributed.py (rings of 2 x 2 envs). MuJoCo steps in
    # microseconds: on a 2-core box every request costs more than an env ring can hide, so its
    # remote layout sends one request per actor step (ring 1) and its inline layout has no policy worker.
    "pong": ("configs/atari_ppo.py", 8 * 128, {
        "single": [],
        "remote": [*DISTRIBUTED, "layout.inference=remote", "layout.ring_size=2", "env.num_envs=4",
                   "trainer.batch_envs=8"]}),
    "halfcheetah": ("configs/mujoco_ppo.py", 64 * 32, {
        "single": [],
        "remote": [*DISTRIBUTED, "layout.inference=remote", "layout.ring_size=1", "env.num_envs=32",
                   "trainer.batch_envs=64"],
        "inline": [*DISTRIBUTED, "layout.inference=inline", "layout.ring_size=1", "env.num_envs=32",
                   "trainer.batch_envs=64"]}),
    "publish_every": ("configs/cartpole_ppo_distributed.py", 8 * 128, {
        "publish_every=1": [], "publish_every=4": ["trainer.publish_every=4"]}),
}


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def launch(config: str, name: str, trial: str, root: Path, overrides: list[str]) -> tuple[int, float, Path]:
    cmd = [sys.executable, "-m", "launch.local", config, "-e", name, "-f", trial, f"log.run_root={root}",
           *COMMON, *overrides]
    start = time.monotonic()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    run_dir = root / name / trial
    if out.returncode:
        print(out.stdout[-3000:], out.stderr[-3000:], sep="\n", file=sys.stderr)
    return out.returncode, time.monotonic() - start, run_dir


def steady_rate(metrics: list[dict[str, Any]], warmup: int, per_update: int) -> tuple[float, float]:
    """(env steps/s, trained env steps/s) between update ``warmup`` and the last one."""
    first = next(m for m in metrics if m["update"] >= warmup)
    last = metrics[-1]
    dt = last["time"] - first["time"]
    return (last["env_steps"] - first["env_steps"]) / dt, (last["update"] - first["update"]) * per_update / dt


def one_run(case: str, variant: str, repeat: int, updates: int, warmup: int, root: Path) -> dict[str, Any]:
    config, per_update, variants = CASES[case]
    load = os.getloadavg()[0]
    overrides = [f"total_env_steps={per_update * (updates + warmup)}", *variants[variant]]
    code, wall, run_dir = launch(config, f"bench_{case}", f"{variant}{repeat}", root, overrides)
    metrics = read_jsonl(run_dir / "metrics.jsonl")
    if code or len(metrics) <= warmup:
        raise SystemExit(f"{case}/{variant} failed (exit {code}); see {run_dir}")
    sps, trained = steady_rate(metrics, warmup, per_update)
    out: dict[str, Any] = {"sps": sps, "trained_sps": trained, "wall_s": round(wall, 1), "load": round(load, 1)}
    if "layout.mode=distributed" in overrides or "distributed" in config:
        actors = [read_jsonl(p)[-1] for p in sorted((run_dir / "workers").glob("actor-*.jsonl"))]
        trainer = read_jsonl(run_dir / "workers" / "trainer-0.jsonl")[-1]
        out.update({
            "latency_p50_ms": [a.get("latency/inference_ms/p50") for a in actors],
            "latency_p99_ms": [a.get("latency/inference_ms/p99") for a in actors],
            "lag_histogram": trainer.get("lag/received", {}),
            "dropped_stale_columns": trainer.get("dropped_stale_columns", 0)
            + sum(a.get("dropped_stale_columns", 0) for a in actors),
        })
    return out


def measure(case: str, repeats: int, updates: int, warmup: int, root: Path) -> dict[str, Any]:
    """Every variant ``repeats`` times, interleaved, so a change in machine load hits all of them alike."""
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in CASES[case][2]}
    for repeat in range(repeats):
        for variant in runs:
            runs[variant].append(one_run(case, variant, repeat, updates, warmup, root))
            print(json.dumps({"case": case, "variant": variant, **runs[variant][-1]}), flush=True)
    return {"case": case, "runs": runs}


def median(values: list[float]) -> float:
    return statistics.median(values)


def table(rows: list[dict[str, Any]]) -> str:
    def ms(values: list[Any]) -> str:
        return "/".join(f"{v:.1f}" if isinstance(v, (int, float)) else "-" for v in values)

    lines = ["| case | layout | trained env steps/s, median (each run) | s/update | vs first | inference p50 / p99 ms (per actor, "
             "last run) | policy lag at the trainer (lag: segments, last run) | dropped stale columns |",
             "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        per_update = CASES[r["case"]][1]
        first = median([x["trained_sps"] for x in next(iter(r["runs"].values()))])
        for variant, runs in r["runs"].items():
            sps = median([x["trained_sps"] for x in runs])
            each = ", ".join(f"{x['trained_sps']:.0f}" for x in runs)
            last = runs[-1]
            extra = (f"{ms(last['latency_p50_ms'])} / {ms(last['latency_p99_ms'])} | {last['lag_histogram']} | "
                     f"{last['dropped_stale_columns']}") if "lag_histogram" in last else "- | - | -"
            lines.append(f"| {r['case']} | {variant} | {sps:.0f} ({each}) | {per_update / sps:.3f} | {sps / first:.2f}x "
                         f"| {extra} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default="pong,halfcheetah", help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--updates", type=int, default=6, help="updates measured after the warm-up")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each layout, interleaved")
    parser.add_argument("--warmup", type=int, default=2, help="updates skipped (compilation, start-up)")
    parser.add_argument("--record", action="store_true", help="append the results to bench/RESULTS.md")
    args = parser.parse_args()
    print(f"machine: {describe()}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="srljax-bench-") as tmp:
        for case in args.cases.split(","):
            rows.append(measure(case, args.repeats, args.updates, args.warmup, Path(tmp)))
    text = table(rows)
    print(text)
    if args.record:
        stamp = time.strftime("%Y-%m-%d")
        with (ROOT / "bench" / "RESULTS.md").open("a") as f:
            f.write(f"\n### bench/distributed.py, {stamp}\n\n{describe()}; `--updates {args.updates} --warmup "
                    f"{args.warmup} --repeats {args.repeats}`\n\n{text}\n")


if __name__ == "__main__":
    main()
