"""CartPole-v1 with PPO: learns to the 500 cap in about a minute on a laptop CPU.

    python -m launch.local configs/cartpole_ppo.py
"""

from srljax.config import EnvConfig, Experiment, PPOConfig, TrainerConfig


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=500_000,
        env=EnvConfig(id="CartPole-v1", num_envs=8),
        algo=PPOConfig(num_steps=128, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95),
        trainer=TrainerConfig(lr=2.5e-4, num_minibatches=8, update_epochs=4),
    )
