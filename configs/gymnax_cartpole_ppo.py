"""CartPole-v1 as a JAX env (gymnax) with PPO at PureJaxRL's settings: rollout and update in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/gymnax_cartpole_ppo.py
    python -m launch.local configs/gymnax_cartpole_ppo.py seeds=[1,2,3]     # three seeds in one program
"""

from srljax.config import EnvConfig, Experiment, PPOConfig, TrainerConfig


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=500_000,
        env=EnvConfig(id="gymnax/CartPole-v1", num_envs=4),
        algo=PPOConfig(num_steps=128, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95),
        trainer=TrainerConfig(lr=2.5e-4, num_minibatches=4, update_epochs=4, max_grad_norm=0.5),
    )
