"""Atari DQN with CleanRL's ``dqn_atari.py`` settings (Breakout by default).

    python -m launch.local configs/atari_dqn.py env.id=Pong-v5
    python -m launch.local configs/atari_dqn.py total_env_steps=20000 algo.learning_starts=1000   # a smoke run

Source: CleanRL ``cleanrl/dqn_atari.py``, the defaults of its ``Args`` dataclass: 10M steps, 1 env,
replay of 1M transitions, Adam lr 1e-4 (torch's eps 1e-8), gamma 0.99, batch 32 every 4 env steps
(replay ratio 8) after 80k steps, target copied (tau 1) every 1,000 env steps (250 updates),
epsilon 1 -> 0.01 over the first 10%, squared-error loss, no double Q, no gradient clipping;
envpool's standard Atari preprocessing in place of its gym wrappers (episodic life, fire reset,
reward clipping, 30 no-ops, 4 stacked 84x84 frames). One difference: the replay stores single
frames and restacks them (``algo.replay.dedup_frames``), 7.1 GB for the 1M transitions; CleanRL's
SB3 buffer (``optimize_memory_usage=True``) keeps each stacked observation once, 28.3 GB.
"""

from srljax.config import (
    CheckpointConfig,
    DQNConfig,
    EnvConfig,
    Experiment,
    LogConfig,
    Promise,
    ReplayConfig,
    TrainerConfig,
)

PROMISE = Promise(
    "return", median=18, worst=15, wall_s=40000, quick=False,
    source="CleanRL's dqn_atari reaches ~20 on Pong at 10M; not trained to a score on this 2-core machine",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=10_000_000,
        env=EnvConfig(id="Breakout-v5", num_envs=1,
                      options={"episodic_life": True, "reward_clip": True, "repeat_action_probability": 0.0}),
        algo=DQNConfig(
            gamma=0.99, n_step=1, batch_size=32, replay_ratio=8.0, learning_starts=80_000,
            double_q=False, dueling=False, loss="mse", target_update_every=250, tau=1.0,
            eps_start=1.0, eps_end=0.01, exploration_fraction=0.1, network="cnn",
            replay=ReplayConfig(capacity=1_000_000, alpha=0.0, dedup_frames=True),
        ),
        trainer=TrainerConfig(lr=1e-4, anneal_lr=False, adam_eps=1e-8, max_grad_norm=0.0, num_minibatches=1,
                              update_epochs=1),
        log=LogConfig(log_every=1000),
        checkpoint=CheckpointConfig(every_updates=100_000),
    )
