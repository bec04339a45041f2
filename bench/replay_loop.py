"""The single-process replay loop's wall time, split into its phases, against another tree (issue 27).

    python bench/replay_loop.py                                   # configs/cartpole_dqn.py, 500k env steps
    python bench/replay_loop.py --baseline /work/base27           # and the same config in another checkout
    python bench/replay_loop.py --config configs/atari_dqn.py --steps 60000 --set algo.learning_starts=20000
    python bench/replay_loop.py --config configs/cartpole_apex_distributed.py --steps 100000 --baseline /work/base27

Each run is ``python -m launch.local CONFIG`` in a fresh process (its own tree's code and config) with
``log.log_every=500``; from its ``metrics.jsonl`` the bench sums the loop's phases over all lines
(``time_env``: envpool send and recv, ``time_act``, ``time_store``: replay inserts and episode stats,
``time_sample``: replay sampling and priority updates, ``time_update``) and puts the rest of the loop's
``time`` under ``other`` (compiles, logging, checkpoints, Python between the phases). Prints one row per run:
wall seconds, the loop's seconds, each phase's share, the steady env steps/s (first to last metrics line),
final and best ``episode_return``, the best greedy evaluation (``eval.jsonl``, if the config evaluates), and
the wall-time speed-up and steps/s ratio over the baseline run of the same seed. A distributed config (e.g.
``configs/cartpole_apex_distributed.py``) has no phases in its lines: its row is wall time and steps/s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import describe  # noqa: E402

PHASES = ("time_env", "time_act", "time_store", "time_sample", "time_update")


def run(tree: Path, config: str, steps: int, seed: int, run_root: Path, trial: str, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "launch.local", config, "-e", "replay_loop", "-f", trial, f"seed={seed}",
           f"total_env_steps={steps}", f"log.run_root={run_root}", "log.log_every=500", "log.progress=lines",
           "checkpoint.final=false", *extra]
    start = time.perf_counter()
    out = subprocess.run(cmd, cwd=tree, capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(tree)))
    wall = time.perf_counter() - start
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)} in {tree} exited {out.returncode}: {out.stderr[-2000:]}")
    lines = [json.loads(x) for x in (run_root / "replay_loop" / trial / "metrics.jsonl").read_text().splitlines()]
    phases = {p: sum(line.get(p, 0.0) for line in lines) for p in PHASES}
    loop = lines[-1]["time"]
    returns = [line["episode_return"] for line in lines if "episode_return" in line]
    first, last = lines[0], lines[-1]  # steady rate: from the first line (compiled, learning started) to the last
    sps = (last["env_steps"] - first["env_steps"]) / max(last["time"] - first["time"], 1e-9)
    evals = run_root / "replay_loop" / trial / "eval.jsonl"
    greedy = [json.loads(x) for x in evals.read_text().splitlines()] if evals.exists() else []
    best_eval = max((sum(e["returns"]) / len(e["returns"]) for e in greedy if e.get("returns")), default=float("nan"))
    return {"wall": wall, "loop": loop, **phases, "other": max(loop - sum(phases.values()), 0.0), "sps": sps,
            "final": returns[-1] if returns else float("nan"), "best": max(returns, default=float("nan")),
            "eval": best_eval}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/cartpole_dqn.py")
    parser.add_argument("--steps", type=int, default=500_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--baseline", type=Path, help="another checkout (e.g. a git worktree of the tree before)")
    parser.add_argument("--set", action="append", default=[], help="key=value for every run (repeatable)")
    args = parser.parse_args(argv)
    print(describe(), flush=True)
    print(f"{args.config}, {args.steps:,} env steps{' ' + ' '.join(args.set) if args.set else ''}", flush=True)
    cols = ("env", "act", "store", "sample", "update", "other")
    print(f"{'tree':<10} {'seed':>4} {'wall s':>7} {'loop s':>7} " + " ".join(f"{c:>6}" for c in cols)
          + f" {'steps/s':>8} {'final':>6} {'best':>6} {'eval':>6} {'speed-up':>8} {'steps/s x':>9}", flush=True)
    trees = [("this", ROOT)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    with tempfile.TemporaryDirectory(prefix="srljax-replay-loop-") as tmp:
        for n, seed in enumerate(args.seeds):  # a seed given twice runs twice (e.g. cold, then warm compile cache)
            rows = {}
            for name, tree in reversed(trees):  # the baseline first: its time is the speed-up's denominator
                r = rows[name] = run(tree, args.config, args.steps, seed, Path(tmp) / name, f"{name}{seed}-{n}", args.set)
                shares = [r[f"time_{c}"] if c != "other" else r["other"] for c in cols]
                base = rows.get("baseline")
                speed = base["wall"] / r["wall"] if base else float("nan")
                rate = r["sps"] / base["sps"] if base else float("nan")
                print(f"{name:<10} {seed:>4} {r['wall']:7.1f} {r['loop']:7.1f} "
                      + " ".join(f"{s / r['loop']:6.0%}" for s in shares)
                      + f" {r['sps']:8.0f} {r['final']:6.1f} {r['best']:6.1f} {r['eval']:6.1f} {speed:8.2f} {rate:9.2f}",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
