"""R2D2 on Atari (Pong by default), distributed as Ape-X: actors with their own epsilons keep each env's LSTM
carry, a replay buffer worker stores rows with the carry they were acted with, the trainer learns on sequences.

    python -m launch.local configs/atari_r2d2_distributed.py                                  # 2 actors, 1 shard
    python -m launch.local configs/atari_r2d2_distributed.py total_env_steps=20000            # smoke run
    python -m launch.slurm configs/atari_r2d2_distributed.py layout.num_actors=64 layout.num_buffer_workers=4

Source: Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed Reinforcement Learning", Table 2:
Nature CNN torso, LSTM 512, dueling head, sequences of 80 with burn-in 40, n-step 5, gamma 0.997, value
rescaling eps 1e-3, sequence priorities eta 0.9 with priority exponent 0.9 and importance sampling
exponent 0.6, Adam lr 1e-4 (eps 1e-3), target network every 2,500 updates, batch 64, actor i of N with
epsilon ``0.4 ** (1 + 7 i / (N - 1))``. Differences: envpool's standard Atari preprocessing (frame stack 4,
stored as single frames and restacked), a replay of 500k rows (5.5 GB with the stored carries) instead of 4M
observations, 2 actors x 8 envs instead of 256 actors, learning after 10,000 env steps (so the smoke run
above trains), and a replay ratio of 0.02 sequences per env step (each row trained about 0.8 times, 40 rows
per sequence). Checkpoints hold the replay (``checkpoint.replay``), so ``--resume`` refills it.
"""

import dataclasses

from configs import atari_apex_distributed
from srljax.config import CheckpointConfig, Experiment, LogConfig, Promise, R2D2Config, ReplayConfig, TrainerConfig

PROMISE = Promise(
    "return", median=18, worst=15, wall_s=140000, quick=False,
    source="R2D2 reaches ~21 on Pong (Kapturowski et al. 2019); not trained to a score on this 2-core machine",
)


def experiment() -> Experiment:
    base = atari_apex_distributed.experiment()  # its env (Pong, envpool's Atari options) and layout
    return dataclasses.replace(
        base,
        name="atari_r2d2_distributed",
        algo=R2D2Config(
            num_steps=40, gamma=0.997, n_step=5, batch_size=64, replay_ratio=0.02, learning_starts=10_000,
            sequence_length=80, burn_in=40, lstm_size=512, network="cnn", dueling=True, double_q=True, loss="mse",
            target_update_every=2500, tau=1.0, priority_eta=0.9, value_rescaling=True, rescale_eps=1e-3,
            replay=ReplayConfig(capacity=500_000, alpha=0.9, beta0=0.6, dedup_frames=True),
            ratio_tolerance=0.1, throttle="both",
        ),
        trainer=TrainerConfig(lr=1e-4, anneal_lr=False, adam_eps=1e-3, max_grad_norm=40.0, num_minibatches=1,
                              update_epochs=1),
        layout=dataclasses.replace(base.layout, num_actors=2, num_buffer_workers=1),
        log=LogConfig(log_every=1),
        checkpoint=CheckpointConfig(every_updates=10_000, replay=True),
    )
