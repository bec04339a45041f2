"""The same statistic for an srljax run and a ``bench/jaxmarl_ippo.py`` run: the mean return of the episodes that
ENDED in each window of env steps (every episode in it, not the last ``log.window`` of them), windows cut at the same
update boundaries for both (the two runs must have the same env steps per update).

    python -m launch.local configs/hanabi_mappo.py log.window=1000000 ...   # a window that holds every episode
    python bench/jaxmarl_ippo.py hanabi --steps 2500000 --set NUM_ENVS=64 --json /tmp/jm.json
    python bench/ended_windows.py --ours RUN/metrics.jsonl [RUN2/metrics.jsonl] --jaxmarl /tmp/jm.json --every 250000

srljax's ``metrics.jsonl`` carries per update ``episodes`` (episodes ended so far) and ``episode_return`` (the mean of
the last ``log.window`` of them); with a window larger than the run's episode count that mean is over every episode so
far, so ``episode_return * episodes`` is the running sum, and its differences between updates the sums of the episodes
ended in between. A run whose window was smaller is refused (the sums cannot be recovered). JaxMARL's json has the
per-update counts and sums (``episodes``, ``return_sum``, one row per seed).
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def ours_per_update(path: str) -> tuple[int, np.ndarray, np.ndarray]:
    """``metrics.jsonl`` -> (env steps per update, episodes ended per update [U], their return sums [U])."""
    rows = [json.loads(line) for line in open(path) if line.strip()]
    rows = [r for r in rows if "update" in r and "episodes" in r]
    cfg = json.load(open(path.replace("metrics.jsonl", "config.json")))
    window = int(cfg.get("log", {}).get("window", 20))
    n_up = rows[-1]["update"]
    count, total = np.zeros(n_up + 1), np.zeros(n_up + 1)  # running, indexed by update
    for r in rows:
        if r["episodes"] > window:
            raise SystemExit(f"{path}: {r['episodes']} episodes by update {r['update']} but log.window={window}: "
                             "rerun with a window larger than the run's episode count")
        count[r["update"]], total[r["update"]] = r["episodes"], r["episode_return"] * r["episodes"]
    seen = {r["update"] for r in rows}
    if seen != set(range(1, n_up + 1)):
        raise SystemExit(f"{path}: not every update logged (log.log_every must be 1)")
    steps = rows[-1]["env_steps"] // n_up
    return steps, np.diff(count), np.diff(total)


def window_means(eps: np.ndarray, tot: np.ndarray, edges: list[int]) -> list[tuple[float, int]]:
    return [(tot[lo:hi].sum() / max(eps[lo:hi].sum(), 1), int(eps[lo:hi].sum()))
            for lo, hi in zip(edges[:-1], edges[1:], strict=True)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ours", nargs="+", default=[], help="srljax metrics.jsonl files (one per seed)")
    p.add_argument("--jaxmarl", nargs="*", default=[], help="bench/jaxmarl_ippo.py --json files")
    p.add_argument("--every", type=int, default=250_000, help="window width in env steps")
    p.add_argument("--last", type=int, default=15, help="the final figure: episodes ended in the last N updates")
    args = p.parse_args(argv)
    cols: list[tuple[str, int, np.ndarray, np.ndarray]] = []
    for path in args.ours:
        cols.append((path, *ours_per_update(path)))
    for path in args.jaxmarl:
        d = json.load(open(path))
        for i, s in enumerate(d["seeds"]):
            cols.append((f"{path} seed {s}", d["steps_per_update"], np.asarray(d["episodes"][i], float),
                         np.asarray(d["return_sum"][i], float)))
    if len({c[1] for c in cols}) != 1:
        raise SystemExit("the runs have different env steps per update: " + ", ".join(f"{c[0]}: {c[1]}" for c in cols))
    steps = cols[0][1]
    n_up = min(len(c[2]) for c in cols)
    edges = sorted({min(n_up, round(k * args.every / steps)) for k in range(0, n_up * steps // args.every + 2)})
    print("| env steps (update) | " + " | ".join(c[0] for c in cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    means = [window_means(c[2], c[3], edges) for c in cols]
    for j, hi in enumerate(edges[1:]):
        print(f"| {hi * steps:,} ({hi}) | " + " | ".join(f"{m[j][0]:.2f} ({m[j][1]})" for m in means) + " |")
    last = [window_means(c[2][:n_up], c[3][:n_up], [n_up - args.last, n_up])[0] for c in cols]
    print(f"| last {args.last} updates (to {n_up * steps:,}) | " + " | ".join(f"**{m[0]:.2f}** ({m[1]})" for m in last)
          + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
