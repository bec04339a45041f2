"""Multi-agent results: MAPPO / IPPO on envpool's LevelBasedForaging and RobotWarehouse, against random play.

    python bench/multi_agent.py lbf             # configs/lbf_mappo.py then configs/lbf_ippo.py, same budget
    python bench/multi_agent.py rware           # configs/rware_mappo.py
    python bench/multi_agent.py lbf total_env_steps=500000   # overrides go to every config

For each config: ``srljax.loops.train`` to the end (its curve: mean return of the last 20 episodes at about
every tenth of the run, the wall time including JIT compile), then 64 episodes of the trained policy
(sampling, as it trains) and 64 of uniformly random legal actions, each reporting mean return, episode
length, deliveries (steps with a positive team reward: RWARE deliveries, LBF foods eaten) and the share of
episodes that ended by termination (RWARE: a collision; LBF: all food eaten) rather than the time limit.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace

import jax
import numpy as np
from machine import describe  # bench/machine.py, next to this script

import algos
import envs
from srljax.config import apply_overrides, load_file
from srljax.loops.train import train

CASES = {"lbf": ["configs/lbf_mappo.py", "configs/lbf_ippo.py"], "rware": ["configs/rware_mappo.py"]}
QUIET = ["log.wandb=disabled", "log.progress=lines", "checkpoint.final=false", "checkpoint.every_updates=0"]


def play(cfg, policy, episodes: int = 64, seed: int = 7) -> dict[str, float]:
    """Run ``policy(obs, key) -> action`` until ``episodes`` episodes ended; their mean statistics."""
    env = envs.make(replace(cfg.env, batch_size=0), seed=seed)
    positive = np.zeros(env.spec.num_envs)
    out: dict[str, list[float]] = {"return": [], "length": [], "deliveries": [], "terminated": []}
    ts, key = env.reset(), jax.random.PRNGKey(seed)
    while len(out["return"]) < episodes:
        key, sub = jax.random.split(key)
        ts = env.step(policy(ts.obs, sub))
        positive += ts.reward > 0
        for i in np.flatnonzero(ts.terminated | ts.truncated):
            out["return"].append(float(ts.episode_return[i]))
            out["length"].append(float(ts.episode_length[i]))
            out["deliveries"].append(float(positive[i]))
            out["terminated"].append(float(ts.terminated[i]))
            positive[i] = 0
    env.close()
    return {k: float(np.mean(v[:episodes])) for k, v in out.items()}


def random_policy(spec):
    mask = spec.agent_row()["mask"]
    rng = np.random.default_rng(0)

    def policy(obs: np.ndarray, key) -> np.ndarray:
        legal = obs[..., mask] > 0.5  # [B, N, A]
        scores = np.where(legal, rng.random(legal.shape), -1.0)
        return scores.argmax(-1).astype(np.int32)

    return policy


def trained_policy(cfg, spec, state):
    algo = algos.make(cfg, spec)
    params, act = algo.policy_params(state), jax.jit(algo.act)
    return lambda obs, key: np.asarray(act(params, obs, (), None, key)[0])


def run(path: str, overrides: list[str]) -> None:
    cfg = apply_overrides(load_file(path), QUIET + overrides)
    cfg = replace(cfg, name="bench_multi_agent", trial=f"{path.split('/')[-1][:-3]}-{time.strftime('%Y%m%d-%H%M%S')}")
    t0 = time.perf_counter()
    result = train(cfg)
    wall = time.perf_counter() - t0
    curve = result.metrics[:: max(1, len(result.metrics) // 10)] + result.metrics[-1:]
    first = next((m["env_steps"] for m in result.metrics if m.get("episode_return", -1e9) >= 0.8), None)
    print(f"\n{path}: {cfg.env.id}, {result.env_steps:,} env steps, wall {wall:.1f} s including JIT compile, "
          f"steady {np.median([m['sps'] for m in result.metrics[1:]]):,.0f} env steps/s (median of records)")
    print("  curve (env steps: mean return of the last 20 episodes): "
          + ", ".join(f"{m['env_steps']:,}: {m.get('episode_return', float('nan')):.3f}" for m in curve))
    if first is not None:
        print(f"  first record with mean return >= 0.8: {first:,} env steps")
    spec = envs.make(replace(cfg.env, num_envs=1, batch_size=0), seed=0).spec
    for name, policy in [("random legal", random_policy(spec)), ("trained", trained_policy(cfg, spec, result.state))]:
        stats = play(cfg, policy)
        print(f"  {name:>12}: return {stats['return']:.3f}  length {stats['length']:.1f}  deliveries "
              f"{stats['deliveries']:.2f}  ended by termination {stats['terminated']:.0%}  (64 episodes)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=list(CASES))
    parser.add_argument("overrides", nargs="*", help="dotted.key=value for every config")
    args = parser.parse_args()
    print(describe())
    for path in CASES[args.case]:
        run(path, args.overrides)
    print(describe())
    sys.stdout.flush()


if __name__ == "__main__":
    main()
