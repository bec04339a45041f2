"""Atari PPO, the standard 10M-step hyperparameters (CleanRL ppo_atari_envpool), Pong by default.

    python -m launch.local configs/atari_ppo.py env.id=Breakout-v5
    python -m launch.local configs/atari_ppo.py trainer.overlap_collection=false   # strictly on-policy

One difference from CleanRL: the next batch is collected while the update runs, with the params
one update older (``trainer.overlap_collection``, Cleanba's deterministic one-update lag, which
matched CleanRL's PPO on Atari-57). The CNN update is ~90% of an iteration on a CPU and leaves
part of it idle; overlapping makes Pong ~8% faster on 2 cores (bench/RESULTS.md).
"""

from srljax.config import CheckpointConfig, EnvConfig, Experiment, PPOConfig, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=18, worst=15, wall_s=30000, quick=False,
    source="PPO on Pong at its budget: CleanRL's ppo_atari reaches ~20 at 10M; not trained to a score on this "
    "2-core machine (~350 env steps/s)",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=10_000_000,
        env=EnvConfig(id="Pong-v5", num_envs=8,
                      options={"episodic_life": True, "reward_clip": True, "repeat_action_probability": 0.0}),
        algo=PPOConfig(num_steps=128, gamma=0.99, gae_lambda=0.95, clip_coef=0.1, ent_coef=0.01, vf_coef=0.5),
        trainer=TrainerConfig(
            lr=2.5e-4, anneal_lr=True, num_minibatches=4, update_epochs=4, max_grad_norm=0.5, overlap_collection=True
        ),
        checkpoint=CheckpointConfig(every_updates=1000),
    )
