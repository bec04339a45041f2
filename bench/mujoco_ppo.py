"""HalfCheetah-v4 PPO benchmark: ``configs/mujoco_ppo.py`` at 1M env steps over several seeds.

    python bench/mujoco_ppo.py                    # seeds 1 2 3, prints per-seed return and wall time
    python bench/mujoco_ppo.py --seeds 1 --steps 200000 env.id=Hopper-v4

Prints the machine, each seed's final mean episodic return (last 20 episodes), its wall time
(including JIT compile), the learning curve every 100k steps, and the median over seeds.
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
    finals = []
    for seed in args.seeds:
        trial = f"bench-seed{seed}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        cmd = [sys.executable, "-m", "launch.local", args.config, "-e", "bench_mujoco_ppo", "-f", trial]
        cmd += [f"seed={seed}", f"total_env_steps={args.steps}", "log.wandb=disabled", "log.progress=lines"]
        cmd += [*args.overrides]
        start = time.time()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.time() - start
        rows = [json.loads(x) for x in (Path("runs/bench_mujoco_ppo") / trial / "metrics.jsonl").read_text().splitlines()]
        curve, mark = [], 0
        for row in rows:
            if row["env_steps"] >= mark and "episode_return" in row:
                curve.append(f"{row['env_steps'] // 1000}k:{row['episode_return']:.0f}")
                mark += 100_000
        final = rows[-1].get("episode_return", float("nan"))
        finals.append(final)
        print(f"seed {seed}: final return {final:.1f}  wall {wall:.0f} s  curve {' '.join(curve)}", flush=True)
    print(f"median final return over seeds {args.seeds}: {statistics.median(finals):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
