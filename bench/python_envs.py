"""Python envs in parallel (issue 24): copies stepped in this process (``GymnasiumVecEnv``) vs in worker
processes (``SubprocGymnasiumVecEnv``, ``envs/subproc.py``), in env steps/s.

    python bench/python_envs.py                    # ~1 min on 2 cores: three envs, 2.5 s per variant
    python bench/python_envs.py --seconds 5 --num-envs 32

Three gymnasium envs, ``--num-envs`` copies each (Box obs [8] float32, 4 discrete actions for the two made
here): ``sleepy``, whose ``step`` sleeps ``--step-ms`` (a Python env that waits: a simulator, I/O);
``busy``, whose ``step`` computes for ``--step-ms`` (a Python env that computes); and CartPole-v1 (a step of
a few microseconds). Variants: the in-process loop (sync steps of all copies); subprocesses, one per env
(the default) and one per CPU, sync; and the async ring (``batch_size = num_envs / 2``, ``recv`` then
``send``), one process per env. Each row: env steps/s (rows returned, reset rows included) and the ratio
to the in-process loop of the same env. The acceptance line: subprocesses >= 5x the in-process adapter on
the sleepy env (sync and ring).
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import describe  # noqa: E402
from envs.gym_adapter import GymnasiumVecEnv, SubprocGymnasiumVecEnv  # noqa: E402


class SleepyEnv(gymnasium.Env):
    """Each step sleeps ``step_ms``; episodes of 100 steps."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (8,), np.float32)
    action_space = gymnasium.spaces.Discrete(4)

    def __init__(self, step_ms: float, busy: bool = False):
        self.step_s, self.busy, self.t = step_ms / 1e3, busy, 0

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.uniform(-1, 1, 8).astype(np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        if self.busy:
            end = time.perf_counter() + self.step_s
            while time.perf_counter() < end:  # computes instead of sleeping: holds a core
                pass
        else:
            time.sleep(self.step_s)
        self.t += 1
        obs = self.np_random.uniform(-1, 1, 8).astype(np.float32)
        return obs, float(action == 0), self.t >= 100, False, {}


def steps_per_s(env: Any, seconds: float, ring: bool) -> float:
    """Env steps/s over ``seconds`` after a short warm-up, random actions."""
    rng = np.random.default_rng(0)
    n = env.spec.num_actions
    if ring:
        env.async_reset()

        def one() -> int:
            ts = env.recv()
            env.send(rng.integers(0, n, len(ts.env_id)).astype(np.int32), ts.env_id)
            return len(ts.env_id)
    else:
        env.reset()

        def one() -> int:
            return len(env.step(rng.integers(0, n, env.spec.num_envs).astype(np.int32)).env_id)
    for _ in range(5):
        one()
    rows, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        rows += one()
    return rows / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--step-ms", type=float, default=2.0)
    parser.add_argument("--seconds", type=float, default=2.5, help="per variant")
    args = parser.parse_args()
    n, cpus = args.num_envs, os.cpu_count() or 1
    print(f"machine: {describe()}", flush=True)
    print(f"{n} copies, step {args.step_ms} ms (sleepy, busy), {args.seconds} s per variant", flush=True)
    envs = {
        "sleepy": functools.partial(SleepyEnv, args.step_ms),
        "busy": functools.partial(SleepyEnv, args.step_ms, busy=True),
        "CartPole-v1": functools.partial(gymnasium.make, "CartPole-v1"),
    }
    subproc = functools.partial(SubprocGymnasiumVecEnv, num_envs=n, seed=0)
    variants = {
        "in-process": lambda make: GymnasiumVecEnv(make, num_envs=n, seed=0),
        f"subproc x{n} sync": lambda make: subproc(make),
        f"subproc x{cpus} sync": lambda make: subproc(make, processes=cpus),
        f"subproc x{n} ring {n // 2}": lambda make: subproc(make, batch_size=n // 2),
    }
    print(f"{'env':<12} {'variant':<22} {'steps/s':>9} {'vs in-process':>14} {'start s':>8}", flush=True)
    found: dict[tuple[str, str], float] = {}
    for env_name, make in envs.items():
        for variant, build in variants.items():
            start = time.perf_counter()
            env = build(make)
            started = time.perf_counter() - start
            try:
                rate = steps_per_s(env, args.seconds, ring="ring" in variant)
            finally:
                env.close()
            found[env_name, variant] = rate
            ratio = rate / found[env_name, "in-process"]
            print(f"{env_name:<12} {variant:<22} {rate:9,.0f} {ratio:13.2f}x {started:8.2f}", flush=True)
    base = found["sleepy", "in-process"]
    sync, ring = found["sleepy", f"subproc x{n} sync"] / base, found["sleepy", f"subproc x{n} ring {n // 2}"] / base
    verdict = "met" if min(sync, ring) >= 5 else "NOT met"
    print(f"acceptance: sleepy env, subprocesses {sync:.1f}x (sync) and {ring:.1f}x (ring) the in-process adapter; "
          f"goal >= 5x: {verdict}", flush=True)


if __name__ == "__main__":
    main()
