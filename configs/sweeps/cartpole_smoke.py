"""A sweep small enough to watch: CartPole PPO, 2 seeds x 50k env steps (about a minute on 2 cores).

    python -m launch.sweep configs/sweeps/cartpole_smoke.py            # runs/cartpole_smoke/results.md, curves.png
    python -m launch.sweep configs/sweeps/cartpole_smoke.py            # again: both trials finished, report only

The reference is CleanRL's ``ppo.py`` on CartPole-v1 (490.04 ± 6.12, mean ± std over seeds, at its
default 500k steps; https://docs.cleanrl.dev/rl-algorithms/ppo/#ppopy): ten times this sweep's budget,
so the report shows it as "below". It is here to show the reference column, not as a target.
"""

from launch.sweep import Reference, Sweep


def sweep() -> Sweep:
    return Sweep(
        name="cartpole_smoke",
        configs=["configs/cartpole_ppo.py"],
        seeds=[1, 2],
        overrides=["total_env_steps=50000", "log.wandb=disabled"],
        reference=Reference(
            title="CleanRL ppo.py (500k steps)",
            source="CleanRL ppo.py, CartPole-v1, 500k env steps (https://docs.cleanrl.dev/rl-algorithms/ppo/#ppopy)",
            returns={"CartPole-v1": 490.04},
            env_steps=500_000,
        ),
    )
