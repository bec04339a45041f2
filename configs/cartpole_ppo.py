"""CartPole-v1 with PPO: learns to the 500 cap in about a minute on a laptop CPU.

    python -m launch.local configs/cartpole_ppo.py
"""

from srljax.config import EnvConfig, Experiment, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=400, worst=200, wall_s=35,
    source="the gate at 9cfbcd3+changes on this 2-core box: 500.0 / 402.0 / 500.0, 32-36 s",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=500_000,
        env=EnvConfig(id="CartPole-v1", num_envs=8),
        algo=PPOConfig(num_steps=128, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95),
        trainer=TrainerConfig(lr=2.5e-4, num_minibatches=8, update_epochs=4),
    )
