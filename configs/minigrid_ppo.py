"""MiniGrid through envpool with PPO: ``MiniGrid-DoorKey-5x5-v0`` by default (``env.id`` picks another task).

    python -m launch.local configs/minigrid_ppo.py
    python -m launch.local configs/minigrid_ppo.py env.id=MiniGrid-Empty-8x8-v0

envpool's MiniGrid gives a Dict observation: the agent's 7x7x3 egocentric view (object, colour, state codes),
its direction (Discrete(4)) and the mission's characters; it arrives flattened (247 floats, the direction
one-hot, ``envs/spaces.py``) and is normalised by running statistics, under two 64-unit tanh MLPs. The reward is
``1 - 0.9 x steps / max_steps`` on success, 0 otherwise. Settings are the MiniGrid PPO of
``rl-starter-files`` (lr 1e-3, 4 epochs, clip 0.2, entropy 0.01, GAE 0.95) on 16 envs x 128 steps.
"""

from srljax.config import EnvConfig, Experiment, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=0.9, worst=0.8, wall_s=30,
    source="the gate at 9cfbcd3+changes on this 2-core box: DoorKey-5x5 0.963 / 0.967 / 0.962 (random 0.04), 28 "
    "s",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=500_000,
        env=EnvConfig(id="MiniGrid-DoorKey-5x5-v0", num_envs=16),
        algo=PPOConfig(num_steps=128, gamma=0.99, gae_lambda=0.95, clip_coef=0.2, ent_coef=0.01, vf_coef=0.5,
                       normalize_obs=True),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=True, num_minibatches=8, update_epochs=4, max_grad_norm=0.5),
    )
