"""XLand-MiniGrid's MiniGrid-Empty-8x8 as a JAX env with PPO: env, rollout and update in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/xminigrid_empty_ppo.py

The agent sees its 7x7 view one-hot (``envs/jax_envs/xminigrid_family.py``) and is paid ``1 - 0.9 * steps / 256`` for
reaching the goal (about 0.96 for the shortest path). 16 envs x 128 steps, 4 epochs x 4 minibatches, relu MLP 64x64.
The envpool equivalent: ``python -m launch.local configs/minigrid_ppo.py env.id=MiniGrid-Empty-8x8-v0``.
"""

from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=0.9, worst=0.85, wall_s=50, seeds=(1,), quick=False,
    source="bench/RESULTS.md (the Anakin path, jumanji / craftax / xminigrid): 0.958 at 300k (seed 1; the shortest "
    "path, 12 steps), 45 s on a loaded 2-core box; needs xminigrid (pip install -e '.[jaxenvs]')",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=300_000,
        env=EnvConfig(id="xminigrid/MiniGrid-Empty-8x8", num_envs=16),
        algo=PPOConfig(num_steps=128, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95, hidden_sizes=(64, 64),
                       activation="relu"),
        trainer=TrainerConfig(lr=1e-3, num_minibatches=4, update_epochs=4, max_grad_norm=0.5),
        log=LogConfig(log_every=10),
    )
