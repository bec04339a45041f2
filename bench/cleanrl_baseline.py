"""CleanRL's own SAC / TD3 scripts run on this machine beside srljax's configs: returns at the same env steps.

    python bench/cleanrl_baseline.py --cleanrl ~/cleanrl --cleanrl-python ~/cleanrl-venv/bin/python \\
        --runs sac:HalfCheetah-v4 td3:Hopper-v4 --steps 300000 --seeds 1 [--ours runs/mujoco_sac/hc300k-s1 ...]

CleanRL publishes its MuJoCo curves as pictures, so the baseline at a budget is measured here instead: each
``ALGO:ENV`` runs ``cleanrl/<algo>_continuous_action.py`` (its defaults, ``--total-timesteps`` set, no CUDA,
one torch thread) from a CleanRL checkout, with the Python that has its dependencies (torch, gymnasium[mujoco],
tyro, tensorboard: not srljax's). The runs go two at a time. Its episodes are read from the script's
``global_step=N, episodic_return=[R]`` lines and reported as srljax reports its own: the mean of the last 20
episodes at each 50k mark. ``--ours`` adds srljax run folders (their ``metrics.jsonl``, field ``episode_return``) as
rows of the same table, matched to a CleanRL run by the env id in their ``config.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import describe  # noqa: E402

EPISODE = re.compile(r"global_step=(\d+), episodic_return=\[?([-0-9.eE+]+)\]?")
WINDOW = 20


def window_means(episodes: list[tuple[int, float]], marks: list[int]) -> list[float | None]:
    """The mean return of the last ``WINDOW`` episodes ended by each mark (None before the first episode)."""
    out = []
    for mark in marks:
        seen = [r for step, r in episodes if step <= mark][-WINDOW:]
        out.append(statistics.fmean(seen) if seen else None)
    return out


def ours_means(run: Path, marks: list[int]) -> tuple[str, list[float | None]]:
    """(env id, the ``episode_return`` of the last metrics line at or before each mark) of an srljax run folder."""
    env_id = json.loads((run / "config.json").read_text())["env"]["id"]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "episode_return" in r and "env_steps" in r]
    out = []
    for mark in marks:
        before = [r["episode_return"] for r in rows if r["env_steps"] <= mark]
        out.append(float(before[-1]) if before else None)
    return env_id, out


def launch(cleanrl: Path, python: str, algo: str, env_id: str, steps: int, seed: int, log: Path) -> subprocess.Popen:
    script = cleanrl / "cleanrl" / f"{algo}_continuous_action.py"
    if not script.exists():
        raise SystemExit(f"{script} not found: --cleanrl is a CleanRL checkout (github.com/vwxyzjn/cleanrl)")
    env = {**os.environ, "PYTHONPATH": str(cleanrl), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [python, str(script), "--env-id", env_id, "--total-timesteps", str(steps), "--seed", str(seed), "--no-cuda"]
    return subprocess.Popen(cmd, cwd=log.parent, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cleanrl", type=Path, required=True, help="a CleanRL checkout")
    parser.add_argument("--cleanrl-python", required=True, help="a Python with CleanRL's dependencies")
    parser.add_argument("--runs", nargs="+", default=["sac:HalfCheetah-v4", "td3:Hopper-v4"])
    parser.add_argument("--steps", type=int, default=300_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--ours", type=Path, nargs="*", default=[], help="srljax run folders to set beside them")
    parser.add_argument("--out", type=Path, default=Path("/tmp/cleanrl-baseline"), help="where the logs go")
    parser.add_argument("--parallel", type=int, default=2)
    args = parser.parse_args()
    print(describe())
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(spec.split(":", 1)[0], spec.split(":", 1)[1], seed) for spec in args.runs for seed in args.seeds]
    pending, running, results = list(jobs), {}, {}
    while pending or running:
        while pending and len(running) < args.parallel:
            algo, env_id, seed = job = pending.pop(0)
            log = args.out / f"{algo}-{env_id}-s{seed}.log"
            running[job] = (launch(args.cleanrl, args.cleanrl_python, algo, env_id, args.steps, seed, log), log,
                            time.time())
        time.sleep(5)
        for job, (proc, log, start) in list(running.items()):
            if proc.poll() is not None:
                del running[job]
                episodes = [(int(m[1]), float(m[2])) for m in EPISODE.finditer(log.read_text())]
                results[job] = (proc.returncode, time.time() - start, episodes)
                print(f"CleanRL {job[0]} {job[1]} seed {job[2]}: rc {proc.returncode}, {time.time() - start:.0f} s, "
                      f"{len(episodes)} episodes ({log})", flush=True)
    marks = list(range(50_000, args.steps + 1, 50_000))
    print(f"\nmean return of the last {WINDOW} episodes at each budget\n")
    print("| run | " + " | ".join(f"{m // 1000}k" for m in marks) + " | wall |")
    print("| --- " * (len(marks) + 2) + "|")
    finals: dict[str, list[float]] = {}
    for (algo, env_id, seed), (rc, wall, episodes) in results.items():
        means = window_means(episodes, marks)
        print(f"| CleanRL {algo} {env_id} seed {seed} | " + " | ".join(fmt(x) for x in means) + f" | {wall:.0f} s |")
        if rc == 0 and means[-1] is not None:
            finals.setdefault(f"CleanRL {algo} {env_id}", []).append(means[-1])
    for run in args.ours:
        env_id, means = ours_means(run, marks)
        print(f"| srljax {run} ({env_id}) | " + " | ".join(fmt(x) for x in means) + " | |")
        if means[-1] is not None:
            finals.setdefault(f"srljax {env_id}", []).append(means[-1])
    print()
    for name, values in finals.items():
        print(f"median at {args.steps // 1000}k, {name}: {statistics.median(values):,.0f} over {len(values)} run(s)")
    sys.exit(0 if all(rc == 0 for rc, _, _ in results.values()) else 1)


if __name__ == "__main__":
    main()
