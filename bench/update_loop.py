"""Time PPO ``update`` with the minibatch loop as ``lax.scan`` vs Python-unrolled in one jit.

    python bench/update_loop.py [cartpole mujoco atari] [--repeats 3] [--loops scan unroll] [--epochs E]

Prints compile seconds and the median seconds per update after compile, per case and loop
form. Random data of the right shapes; results recorded in ``algos/ppo.py``'s docstring.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import jax

from algos.ppo import make_ppo
from algos.testing import random_trajectory
from srljax.config import EnvConfig, Experiment, PPOConfig, TrainerConfig
from srljax.types import EnvSpec

CASES: dict[str, tuple[EnvSpec, Experiment]] = {
    "cartpole": (
        EnvSpec(id="CartPole-v1", obs_shape=(4,), obs_dtype="float32", action_kind="discrete", num_actions=2),
        Experiment(env=EnvConfig(num_envs=4), algo=PPOConfig(num_steps=128)),
    ),
    "mujoco": (
        EnvSpec(
            id="HalfCheetah-v4", obs_shape=(17,), obs_dtype="float32", action_kind="continuous", action_shape=(6,)
        ),
        Experiment(
            env=EnvConfig(num_envs=1),
            algo=PPOConfig(num_steps=2048, normalize_obs=True, normalize_reward=True),
            trainer=TrainerConfig(num_minibatches=32, update_epochs=10),
        ),
    ),
    "atari": (
        EnvSpec(id="Pong-v5", obs_shape=(4, 84, 84), obs_dtype="uint8", action_kind="discrete", num_actions=6),
        # one epoch instead of CleanRL's four keeps the scan case to seconds, not a minute
        Experiment(env=EnvConfig(num_envs=8), algo=PPOConfig(num_steps=128), trainer=TrainerConfig(update_epochs=1)),
    ),
}


def bench(name: str, loop: str, repeats: int, epochs: int = 0) -> tuple[float, float]:
    spec, cfg = CASES[name]
    if epochs:
        cfg = dataclasses.replace(cfg, trainer=dataclasses.replace(cfg.trainer, update_epochs=epochs))
    spec = dataclasses.replace(spec, num_envs=cfg.env.num_envs, batch_size=cfg.env.num_envs)
    algo = make_ppo(cfg, spec, loop=loop)  # type: ignore[arg-type]
    state = algo.init(jax.random.PRNGKey(0))
    traj = jax.device_put(random_trajectory(spec, cfg.algo.num_steps, cfg.env.num_envs))
    start = time.perf_counter()
    update = jax.jit(algo.update).lower(state, traj).compile()
    compile_s = time.perf_counter() - start
    jax.block_until_ready(update(state, traj))  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        state, metrics = update(state, traj)
        jax.block_until_ready(metrics)
        times.append(time.perf_counter() - start)
    return compile_s, statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("cases", nargs="*", default=list(CASES))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--loops", nargs="+", default=["scan", "unroll"])
    parser.add_argument("--epochs", type=int, default=0, help="override trainer.update_epochs (0: the case's)")
    args = parser.parse_args()
    print(f"jax {jax.__version__} on {jax.devices()}")
    for name in args.cases:
        for loop in args.loops:
            compile_s, step_s = bench(name, loop, args.repeats, args.epochs)
            print(f"{name:9s} {loop:7s} compile {compile_s:7.2f} s   update {step_s:8.4f} s", flush=True)


if __name__ == "__main__":
    main()
