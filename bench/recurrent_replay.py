"""Recurrent replay on masked-velocity CartPole: R2D2 with burn-in 20 and 0 against a feed-forward DQN (issue 25).

    python bench/recurrent_replay.py                     # seeds 1 2 3, 200k env steps each
    python bench/recurrent_replay.py --seeds 1 --steps 100000

Each row is one ``python -m launch.local`` run on CartPole-v1 with ``env.obs_mask=(0, 2)`` (position and angle
only): ``configs/cartpole_r2d2.py`` as shipped (burn-in 20 of 40 rows), the same with ``algo.burn_in=0``
(trained from the stored carry directly, all 40 rows trained), and ``configs/cartpole_dqn.py`` (CleanRL's DQN
settings, feed-forward) on the same masked env. Printed per run: the best and the last greedy evaluation
(16 episodes, ``eval.jsonl``), the last training window's mean return, and the wall time; then the median
of each variant over the seeds.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import describe  # noqa: E402

VARIANTS = {
    "r2d2 burn-in 20": ("configs/cartpole_r2d2.py", []),
    "r2d2 burn-in 0": ("configs/cartpole_r2d2.py", ["algo.burn_in=0"]),
    "dqn feed-forward": ("configs/cartpole_dqn.py", ["env.obs_mask=[0,2]", "eval.every_updates=2000",
                                                     "eval.episodes=16"]),
}


def run(config: str, overrides: list[str], seed: int, steps: int, run_root: Path, trial: str) -> dict[str, float]:
    cmd = [sys.executable, "-m", "launch.local", config, "-e", "recurrent_replay", "-f", trial, f"seed={seed}",
           f"total_env_steps={steps}", f"log.run_root={run_root}", "log.wandb=disabled", "log.progress=lines",
           *overrides]
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}: {out.stderr[-2000:]}")
    folder = run_root / "recurrent_replay" / trial
    evals = [json.loads(line)["mean"] for line in (folder / "eval.jsonl").read_text().splitlines() if line.strip()]
    last = json.loads((folder / "metrics.jsonl").read_text().splitlines()[-1])
    return {"best_eval": max(evals), "last_eval": evals[-1], "train": last.get("episode_return", float("nan")),
            "wall_s": wall}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--steps", type=int, default=200_000)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    args = parser.parse_args(argv)
    print(describe())
    print(f"masked-velocity CartPole-v1 (obs_mask 0,2), {args.steps:,} env steps per run")
    print(f"{'variant':<18} {'seed':>4} {'best eval':>10} {'last eval':>10} {'train':>8} {'wall s':>7}")
    results: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.variants:
            config, overrides = VARIANTS[name]
            for seed in args.seeds:
                trial = f"{name.replace(' ', '_')}_s{seed}"
                r = run(config, overrides, seed, args.steps, Path(tmp), trial)
                results.setdefault(name, []).append(r)
                print(f"{name:<18} {seed:>4} {r['best_eval']:>10.1f} {r['last_eval']:>10.1f} {r['train']:>8.1f} "
                      f"{r['wall_s']:>7.0f}", flush=True)
    print("medians over seeds")
    for name, rows in results.items():
        med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        print(f"{name:<18} best eval {med['best_eval']:.1f}, last eval {med['last_eval']:.1f}, "
              f"train {med['train']:.1f}, wall {med['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
