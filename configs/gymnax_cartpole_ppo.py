"""CartPole-v1 as a JAX env (gymnax) with PPO at PureJaxRL's settings: rollout and update in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/gymnax_cartpole_ppo.py
    python -m launch.local configs/gymnax_cartpole_ppo.py seeds=[1,2,3]     # three seeds in one program
"""

from srljax.config import EnvConfig, Experiment, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=450, worst=400, wall_s=25,
    source="bench/RESULTS.md (the Anakin path): 500 / 500 / 500 (seeds 1-3, packed), 500 at all of seeds 1-8; "
    "one seed's process 17-21 s on this 2-core box",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=500_000,
        env=EnvConfig(id="gymnax/CartPole-v1", num_envs=4),
        algo=PPOConfig(num_steps=128, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95),
        trainer=TrainerConfig(lr=2.5e-4, num_minibatches=4, update_epochs=4, max_grad_norm=0.5),
    )
