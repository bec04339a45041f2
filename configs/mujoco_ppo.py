"""MuJoCo PPO (HalfCheetah-v4 by default): 1M env steps, 64 envpool envs x 32 steps per update,
64x64 tanh MLPs, observation and reward normalisation.

    python -m launch.local configs/mujoco_ppo.py env.id=Hopper-v4 seed=2
"""

from srljax.config import EnvConfig, Experiment, PPOConfig, TrainerConfig


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=1_000_000,
        env=EnvConfig(id="HalfCheetah-v4", num_envs=64),
        algo=PPOConfig(
            num_steps=32,
            gamma=0.99,
            gae_lambda=0.95,
            clip_coef=0.2,
            clip_vloss=False,  # the best of a one-seed sweep (bench/RESULTS.md); not yet proven over seeds
            ent_coef=0.0,
            vf_coef=0.5,
            hidden_sizes=(64, 64),
            activation="tanh",
            normalize_obs=True,
            normalize_reward=True,
        ),
        trainer=TrainerConfig(lr=3e-4, anneal_lr=True, num_minibatches=32, update_epochs=10, max_grad_norm=1.0),
    )
