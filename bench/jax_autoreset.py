"""How a JAX env's auto-reset costs inside the compiled program: every env reset at every step (a select) against
resets only for the done envs, K at a time (``envs.jax_envs.JaxEnv.reset_slots``; K = num_envs is "reset all, only
on a step where some env is done", a ``lax.cond``).

    python bench/jax_autoreset.py craftax/Craftax-Classic-Symbolic-v1 --envs 64 --steps 64 --slots 0 1 2 64

Random actions (uniform) for ``--steps`` steps of ``--envs`` envs in one ``lax.scan``, timed after compiling (the
best of ``--repeats``); prints env steps/s per mode, the compile time, and how many envs were done per step. Every
mode must give the same envs (the final observations are compared to the first mode's).
"""

from __future__ import annotations

import argparse
import dataclasses
import time

import jax
import numpy as np

from envs import jax_envs
from srljax.config import EnvConfig


def timed(env: jax_envs.JaxEnv, steps: int, repeats: int) -> tuple[float, float, float, np.ndarray]:
    n = env.spec.num_envs

    def body(state: jax_envs.EnvState, key: jax.Array) -> tuple:
        action = jax.random.randint(key, (n,), 0, env.spec.num_actions)
        state, ts = env.step(state, action)
        return state, state.done.sum()

    @jax.jit
    def run(state: jax_envs.EnvState, key: jax.Array) -> tuple:
        state, done = jax.lax.scan(body, state, jax.random.split(key, steps))
        return state, done

    state, _ = jax.jit(env.reset)(jax.random.PRNGKey(0))
    t0 = time.perf_counter()
    compiled = run.lower(state, jax.random.PRNGKey(1)).compile()
    compile_s = time.perf_counter() - t0
    best = float("inf")
    for r in range(repeats):
        t0 = time.perf_counter()
        out, done = jax.block_until_ready(compiled(state, jax.random.PRNGKey(1)))
        best = min(best, time.perf_counter() - t0)
    return steps * n / best, compile_s, float(np.mean(done)), np.asarray(jax.tree.leaves(out.inner)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("env_id")
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--slots", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-episode-steps", type=int, default=0, help="a time limit (more envs done per step)")
    args = parser.parse_args()
    env = jax_envs.make(EnvConfig(id=args.env_id, num_envs=args.envs, max_episode_steps=args.max_episode_steps))
    limit = f", time limit {args.max_episode_steps}" if args.max_episode_steps else ""
    print(f"{args.env_id}, {args.envs} envs x {args.steps} steps{limit}, random actions; make() picks reset_slots="
          f"{env.reset_slots}")
    print("| reset_slots | env steps/s | compile s | envs done per step | same envs as the first mode |")
    print("| --- | --- | --- | --- | --- |")
    first = None
    for k in args.slots:
        sps, compile_s, done, leaf = timed(dataclasses.replace(env, reset_slots=k), args.steps, args.repeats)
        first = leaf if first is None else first
        print(f"| {k} | {sps:,.0f} | {compile_s:.1f} | {done:.2f} | {np.array_equal(leaf, first)} |", flush=True)


if __name__ == "__main__":
    main()
