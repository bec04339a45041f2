"""Training throughput (PPO, IMPALA) next to its parts measured alone, on the same cores, in one run.

    python bench/throughput.py                       # halfcheetah pong cartpole
    python bench/throughput.py pong pong_impala      # PPO and IMPALA on Pong, both Nature CNN
    python bench/throughput.py halfcheetah --updates 40
    python bench/throughput.py pong env.batch_size=4 # overrides go to every case's config

For each case, from the case's shipped config file:

* **raw env**: envpool stepping alone with uniformly random actions (sync ``step`` on all
  envs), env steps/s.
* **act alone**: the jitted ``act`` on a batch of real observations, observations/s, at the
  batch the training loop acts on and (for an async config) on all envs at once.
* **update alone**: one jitted ``update`` on a batch of random data, samples/s.
* **training**: ``srljax.loops.train`` for ``--updates`` updates, everything included (env stepping,
  acting, rollout storage, update, metrics); steady-state env steps/s over all updates after
  the first (which compiles), and the split of each iteration into env / act / update / store
  seconds as the training loop measured them.
* **sum of parts**: the env steps/s the three parts would give run one after another with no
  overhead and no overlap, ``1 / (1/raw + 1/act + 1/update)`` with the faster act.

It prints ``training / raw`` and ``training / sum of parts``. ``cartpole`` runs
``configs/cartpole_ppo.py`` to the end and prints the wall time of ``srljax.loops.train`` (JIT compile
included; interpreter start and imports excluded) and the final mean return.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

import jax
import numpy as np
from machine import describe  # bench/machine.py, next to this script

import envs
from algos.testing import random_trajectory
from srljax.config import Experiment, apply_overrides, load_file
from srljax.learning.acting import jit_act
from srljax.learning.learner import Learner
from srljax.loops.result import PHASES
from srljax.loops.train import train

CASES = {
    "halfcheetah": "configs/mujoco_ppo.py",
    "pong": "configs/atari_ppo.py",
    "pong_impala": "configs/atari_impala.py",  # 128 envs x 20 steps, one pass of 4 optimiser steps
    "cartpole": "configs/cartpole_ppo.py",
}
QUIET = ["log.wandb=disabled", "log.progress=lines", "checkpoint.final=false", "checkpoint.every_updates=0"]


def random_actions(spec, n: int, rng: np.random.Generator) -> np.ndarray:
    if spec.action_kind == "discrete":
        return rng.integers(0, spec.num_actions, n).astype(np.int32)
    return rng.uniform(-1.0, 1.0, (n, *spec.action_shape)).astype(np.float32)


def raw_env(cfg: Experiment, seconds: float) -> tuple[float, Any, np.ndarray]:
    """(sync envpool steps/s of all ``num_envs`` envs with random actions, the env's spec, reset obs)."""
    env = envs.make(replace(cfg.env, batch_size=0), seed=cfg.seed)
    rng = np.random.default_rng(0)
    try:
        obs = env.reset().obs
        n = env.spec.num_envs
        for _ in range(20):
            env.step(random_actions(env.spec, n, rng))
        steps, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            env.step(random_actions(env.spec, n, rng))
            steps += n
        return steps / (time.perf_counter() - start), env.spec, obs
    finally:
        env.close()


def act_obs_per_s(learner: Learner, obs: np.ndarray, seconds: float) -> float:
    """The jitted ``act`` on real observations ``obs`` [batch, ...], called as the training loop calls it."""
    act = jit_act(learner.algo)
    params = learner.policy_params()
    state = learner.algo.initial_actor_state(len(obs))
    first = np.zeros(len(obs), bool) if jax.tree.leaves(state) else None
    key = jax.random.PRNGKey(0)
    for _ in range(3):
        jax.device_get(act(params, obs, state, first, key)[:2])
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        action, extras, _, key = act(params, obs, state, first, key)
        jax.device_get((action, extras))
        calls += 1
    return calls * len(obs) / (time.perf_counter() - start)


def update_samples_per_s(cfg: Experiment, learner: Learner, spec, repeats: int) -> float:
    traj = random_trajectory(spec, cfg.algo.num_steps, cfg.batch_envs)
    learner.step(traj)  # compile
    jax.block_until_ready(learner.policy_params())
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        learner.step(traj)
        jax.block_until_ready(learner.policy_params())
        times.append(time.perf_counter() - start)
    return cfg.env_steps_per_update / statistics.median(times)


@dataclass
class Training:
    sps: float
    phases: dict[str, float]  # seconds per iteration
    iteration_s: float
    wall_s: float
    final_return: float


def run_training(cfg: Experiment) -> Training:
    start = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):  # the per-update progress lines
        result = train(cfg)
    wall = time.perf_counter() - start
    first, steady = result.metrics[0], result.metrics[1:]  # the first update compiles
    assert steady, "time at least 2 updates"
    steps = steady[-1]["env_steps"] - first["env_steps"]
    # each record's sps covers the window since the record before it
    seconds = sum((r["env_steps"] - p["env_steps"]) / r["sps"] for p, r in zip(result.metrics, steady))
    iters = len(steady)
    phases = {k: sum(r[k] for r in steady) / iters for k in PHASES}
    final = result.metrics[-1].get("episode_return", float("nan"))
    return Training(steps / seconds, phases, seconds / iters, wall, final)


def throughput_case(name: str, updates: int, overrides: list[str], seconds: float) -> None:
    base = apply_overrides(load_file(CASES[name]), QUIET + overrides)
    cfg = apply_overrides(base, [f"total_env_steps={(updates + 1) * base.env_steps_per_update}"])
    cfg = replace(cfg, name="bench_throughput", trial=f"{name}-{time.strftime('%Y%m%d-%H%M%S')}")
    raw, spec, obs = raw_env(cfg, seconds)
    learner = Learner(cfg, spec, checkpoints=False)
    # at the batch the loop acts on (envs per recv) and on all envs at once; the sum of parts
    # takes the faster, so an async config is not credited with a slower act of its own making
    act_recv = act_obs_per_s(learner, obs[: cfg.env.envs_per_recv], seconds)
    act_all = act_obs_per_s(learner, obs, seconds) if cfg.env.is_async else act_recv
    act = max(act_recv, act_all)
    upd = update_samples_per_s(cfg, learner, spec, repeats=3)
    learner.close(final_checkpoint=False)
    tr = run_training(cfg)
    parts = 1.0 / (1.0 / raw + 1.0 / act + 1.0 / upd)
    per_iter = cfg.env_steps_per_update
    print(f"\n{name} ({CASES[name]} {' '.join(overrides)}): {cfg.env.id}, {cfg.env.num_envs} envs "
          f"(batch {cfg.env.envs_per_recv}) x {cfg.algo.num_steps} steps = {per_iter} samples per update")
    print(f"  raw env (random actions, sync)  {raw:10,.0f} env steps/s   {per_iter / raw:7.3f} s per update's worth")
    print(f"  act alone ({cfg.env.envs_per_recv} obs per call)        {act_recv:10,.0f} obs/s         {per_iter / act_recv:7.3f} s")
    if cfg.env.is_async:
        print(f"  act alone ({cfg.env.num_envs} obs per call)        {act_all:10,.0f} obs/s         {per_iter / act_all:7.3f} s")
    print(f"  update alone                    {upd:10,.0f} samples/s     {per_iter / upd:7.3f} s")
    print(f"  sum of parts                    {parts:10,.0f} env steps/s   {per_iter / parts:7.3f} s")
    print(f"  training ({updates} updates after the first) {tr.sps:,.0f} env steps/s   {tr.iteration_s:.3f} s per update; "
          "split: " + "  ".join(f"{k[5:]} {v:.3f}" for k, v in tr.phases.items())
          + ("  (collection overlaps the update)" if cfg.trainer.overlap_collection
             else f"  other {tr.iteration_s - sum(tr.phases.values()):.3f}"))
    print(f"  training / raw env     {tr.sps / raw:.2f}")
    print(f"  training / sum of parts {tr.sps / parts:.2f}")


def cartpole_case(overrides: list[str]) -> None:
    cfg = apply_overrides(load_file(CASES["cartpole"]), QUIET + overrides)
    cfg = replace(cfg, name="bench_throughput", trial=f"cartpole-{time.strftime('%Y%m%d-%H%M%S')}")
    tr = run_training(cfg)
    print(f"\ncartpole ({CASES['cartpole']}): {cfg.total_env_steps:,} env steps, wall {tr.wall_s:.1f} s "
          f"including JIT compile, final mean return {tr.final_return:.1f}, steady {tr.sps:,.0f} env steps/s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=list(CASES), help=f"any of {list(CASES)}")
    parser.add_argument("--updates", type=int, default=0, help="training updates to time (default: per case)")
    parser.add_argument("--seconds", type=float, default=5.0, help="how long to time raw env and act")
    args, overrides = parser.parse_known_args()
    cases = [c for c in args.cases if "=" not in c]
    overrides += [c for c in args.cases if "=" in c]
    unknown = sorted(set(cases) - set(CASES))
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {list(CASES)}")
    print("machine:", describe(), flush=True)
    default_updates = {"halfcheetah": 40, "pong": 4, "pong_impala": 4}
    for name in cases:
        if name == "cartpole":
            cartpole_case(overrides)
        else:
            throughput_case(name, args.updates or default_updates[name], overrides, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
