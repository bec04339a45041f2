"""jumanji's Snake (12x12) as a JAX env with PPO: env, rollout and update in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/jumanji_snake_ppo.py

The observation is jumanji's grid (5 planes), step count and legal moves, flattened (``envs/jax_envs/
jumanji_family.py``; the ``action_mask`` leaf keeps the snake from turning back on itself) and normalised by running
statistics; +1 per fruit, the episode ends on a wall or the snake's body (a termination) or after 4,000 steps (a
truncation). 32 envs x 64 steps, 4 epochs x 4 minibatches, tanh MLP 64x64. A small budget: a figure that the run
works and improves on random play, not a tuned Snake agent.
"""

from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=10, worst=8, wall_s=65, seeds=(1,), quick=False,
    source="bench/RESULTS.md (the Anakin path, jumanji / craftax / xminigrid): 11.9 fruits at 500k (seed 1), 62 s "
    "on a loaded 2-core box; needs jumanji (pip install -e '.[jaxenvs]')",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=500_000,
        env=EnvConfig(id="jumanji/Snake-v1", num_envs=32),
        algo=PPOConfig(num_steps=64, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95, hidden_sizes=(64, 64),
                       normalize_obs=True),
        trainer=TrainerConfig(lr=3e-4, num_minibatches=4, update_epochs=4, max_grad_norm=0.5),
        log=LogConfig(log_every=10),
    )
