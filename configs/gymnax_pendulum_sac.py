"""Pendulum-v1 as a JAX env (gymnax) with SAC: acting, the on-device replay and updates in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/gymnax_pendulum_sac.py
    python -m launch.local configs/gymnax_pendulum_sac.py algo=td3     # TD3 on the same settings

CleanRL's SAC settings (``configs/mujoco_sac.py``: one update of 256 samples per env step, tau 0.005) with 64x64
networks and 1,000 random steps first; 4 envs, 8 updates per 8 env steps. Random play scores about -1,200, a
solved pendulum about -150.
"""

from srljax.config import EnvConfig, Experiment, LogConfig, ReplayConfig, SACConfig, TrainerConfig


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=20_000,
        env=EnvConfig(id="gymnax/Pendulum-v1", num_envs=4),
        algo=SACConfig(
            gamma=0.99, batch_size=256, replay_ratio=256.0, learning_starts=1_000, tau=0.005, policy_frequency=2,
            target_update_every=1, autotune=True, policy_lr=3e-4, hidden_sizes=(64, 64), activation="relu",
            replay=ReplayConfig(capacity=20_000, alpha=0.0), updates_per_call=8,
        ),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=False, adam_eps=1e-8, max_grad_norm=0.0, num_minibatches=1,
                              update_epochs=1),
        log=LogConfig(log_every=500),
    )
