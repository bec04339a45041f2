"""Ape-X DQN on Atari (Pong by default): actors with their own epsilons, sharded prioritized replay, one trainer.

    python -m launch.local configs/atari_apex_distributed.py                                # 4 actors, 2 replay shards
    python -m launch.local configs/atari_apex_distributed.py total_env_steps=20000 algo.learning_starts=2000   # smoke run
    python -m launch.slurm configs/atari_apex_distributed.py layout.num_actors=64 -f run1

Source: Horgan et al. 2018, "Distributed Prioritized Experience Replay" (Ape-X), Appendix: dueling
double DQN, 3-step returns, gamma 0.99, proportional prioritization alpha 0.6, beta 0.4, batches
of 512, target network copied every 2,500 updates, gradients clipped to norm 40, learning after
50,000 transitions, actor i of N acting with epsilon ``0.4 ** (1 + 7 i / (N - 1))``, initial
priorities computed by the actors, envpool's standard Atari preprocessing (no sticky actions).
Differences: Adam (lr 0.00025 / 4, eps 1.5e-4 as Rainbow) instead of centered RMSProp; a replay of 1M
transitions (stored as single frames and restacked: 7.1 GB over the two shards) instead of 2M;
4 actors x 8 envs instead of 360 actors (scale with ``layout.num_actors`` and keep the replay
ratio: ``algo.replay_ratio`` samples per env step, here 1, which ``algo.throttle=both`` holds
within 10%). Checkpoints hold the replay (``checkpoint.replay``), so ``--resume`` refills it.
"""

from srljax.config import (
    CheckpointConfig,
    DQNConfig,
    EnvConfig,
    Experiment,
    LayoutConfig,
    LogConfig,
    Promise,
    ReplayConfig,
    TrainerConfig,
)

PROMISE = Promise(
    "return", median=18, worst=15, wall_s=140000, quick=False,
    source="Ape-X reaches ~21 on Pong (Horgan et al. 2018); not trained to a score on this 2-core machine",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=50_000_000,
        env=EnvConfig(id="Pong-v5", num_envs=8,
                      options={"episodic_life": True, "reward_clip": True, "repeat_action_probability": 0.0}),
        algo=DQNConfig(
            num_steps=32, gamma=0.99, n_step=3, batch_size=512, replay_ratio=1.0, learning_starts=50_000,
            double_q=True, dueling=True, loss="huber", target_update_every=2500, tau=1.0, network="cnn",
            replay=ReplayConfig(capacity=1_000_000, alpha=0.6, beta0=0.4, dedup_frames=True),
            ratio_tolerance=0.1, throttle="both",
        ),
        trainer=TrainerConfig(lr=0.00025 / 4, anneal_lr=False, adam_eps=1.5e-4, max_grad_norm=40.0, num_minibatches=1,
                              update_epochs=1),
        layout=LayoutConfig(mode="distributed", num_actors=4, num_buffer_workers=2, inference="inline"),
        log=LogConfig(log_every=100),
        checkpoint=CheckpointConfig(every_updates=10_000, replay=True),
    )
