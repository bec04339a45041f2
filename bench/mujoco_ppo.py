"""HalfCheetah-v4 PPO benchmark: ``configs/mujoco_ppo.py`` at 1M env steps over several seeds.

    python bench/mujoco_ppo.py                    # seeds 1 2 3, prints per-seed return and wall time
    python bench/mujoco_ppo.py --seeds 1 --steps 200000 env.id=Hopper-v4
    python bench/mujoco_ppo.py --config configs/mujoco_ppo_distributed.py   # the asynchronous worker graph

Prints the machine, each seed's final mean episodic return (last 20 episodes), its wall time
(including start-up and JIT compile), the learning curve every 100k steps, and the median over
seeds. For a distributed config (``layout.mode=distributed``) it also prints each seed's policy
lag: of the columns trained on (``lag/mean`` averaged over all updates, the largest ``lag/max``),
the trainer's whole-run histogram of segments by lag at arrival (``lag/received``), and the
columns dropped as staler than ``trainer.max_policy_lag``. Every run is ``python -m launch.local``
in a subprocess, as a user runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from machine import describe  # bench/machine.py, next to this script


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def lag_summary(run_dir: Path, rows: list[dict]) -> str:
    """The policy lag of a distributed run, from metrics.jsonl and the trainer's and actors' worker lines."""
    trainer = read_jsonl(run_dir / "workers" / "trainer-0.jsonl")
    actors = [read_jsonl(p) for p in sorted((run_dir / "workers").glob("actor-*.jsonl"))]
    received = trainer[-1].get("lag/received", {}) if trainer else {}
    dropped = rows[-1].get("dropped_stale_columns", 0) + sum(a[-1].get("dropped_stale_columns", 0) for a in actors if a)
    mean = statistics.fmean(r.get("lag/mean", 0.0) for r in rows)
    return (f"lag of trained columns mean {mean:.2f} max {max(r.get('lag/max', 0) for r in rows)}; "
            f"segments by lag at arrival {received}; dropped stale columns {dropped}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--config", default="configs/mujoco_ppo.py")
    parser.add_argument("overrides", nargs="*", help="config overrides key=value, anywhere on the line")
    argv = sys.argv[1:]
    # pulled out first so that they may follow --seeds, whose nargs="+" would otherwise eat them
    overrides = [a for a in argv if "=" in a and not a.startswith("-")]
    args = parser.parse_args([a for a in argv if a not in overrides])
    args.overrides = overrides
    print("machine:", describe(), flush=True)
    print(f"config: {args.config} {' '.join(args.overrides)}", flush=True)
    finals = []
    for seed in args.seeds:
        trial = f"bench-{Path(args.config).stem}-seed{seed}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        cmd = [sys.executable, "-m", "launch.local", args.config, "-e", "bench_mujoco_ppo", "-f", trial]
        cmd += [f"seed={seed}", f"total_env_steps={args.steps}", "log.wandb=disabled", "log.progress=lines"]
        cmd += [*args.overrides]
        load = os.getloadavg()[0]
        start = time.time()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.time() - start
        run_dir = Path("runs/bench_mujoco_ppo") / trial
        rows = read_jsonl(run_dir / "metrics.jsonl")
        curve, mark = [], 0
        for row in rows:
            if row["env_steps"] >= mark and "episode_return" in row:
                curve.append(f"{row['env_steps'] // 1000}k:{row['episode_return']:.0f}")
                mark += 100_000
        final = rows[-1].get("episode_return", float("nan"))
        finals.append(final)
        print(f"seed {seed}: final return {final:.1f}  wall {wall:.0f} s  (load average {load:.1f} at start, "
              f"{os.getloadavg()[0]:.1f} at end)  curve {' '.join(curve)}", flush=True)
        if "lag/mean" in rows[-1]:
            print(f"seed {seed}: {lag_summary(run_dir, rows)}", flush=True)
    print(f"median final return over seeds {args.seeds}: {statistics.median(finals):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
