"""CartPole-v1 as a JAX env (gymnax) with DQN: acting, the on-device replay and updates in one compiled program.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/gymnax_cartpole_dqn.py

The settings of ``configs/cartpole_dqn.py`` (CleanRL's, on 8 envs, 16 updates per 160 env steps); the replay lives
on the device (``srljax/learning/anakin_replay.py``).
"""

from srljax.config import DQNConfig, EnvConfig, Experiment, LogConfig, ReplayConfig, TrainerConfig


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=500_000,
        env=EnvConfig(id="gymnax/CartPole-v1", num_envs=8),
        algo=DQNConfig(
            gamma=0.99, n_step=1, batch_size=128, replay_ratio=12.8, learning_starts=10_000,
            double_q=False, dueling=False, loss="mse", target_update_every=50, tau=1.0,
            eps_start=1.0, eps_end=0.05, exploration_fraction=0.5, hidden_sizes=(120, 84), activation="relu",
            replay=ReplayConfig(capacity=10_000, alpha=0.0), updates_per_call=16,
        ),
        trainer=TrainerConfig(lr=2.5e-4, anneal_lr=False, adam_eps=1e-8, max_grad_norm=0.0, num_minibatches=1,
                              update_epochs=1),
        log=LogConfig(log_every=500),
    )
