"""RobotWarehouse-v0 (envpool's jumanji port: 4 robots, shelves to deliver, 500 steps; a collision ends the
episode with reward -1) with MAPPO.

    python -m launch.local configs/rware_mappo.py
    python bench/multi_agent.py rware          # trains this config, then counts deliveries and collisions

Random legal play collides within ~12 steps (return -1.0); the return counts deliveries (+1 each) minus
a final collision, so ``episode_length`` and the deliveries show what was learned (bench/RESULTS.md).
"""

from algos.mappo_config import MAPPOConfig
from srljax.config import EnvConfig, Experiment, Promise, TrainerConfig

PROMISE = Promise(
    "return", median=-0.5, worst=-0.5, seeds=(1,), wall_s=810, quick=False,
    source="bench/RESULTS.md (Multi-agent): seed 1 ends at 0.0 (no collisions, no deliveries; random play -1.0),"
    " 807 s",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=1_500_000,
        env=EnvConfig(id="RobotWarehouse-v0", num_envs=32),
        algo=MAPPOConfig(critic="central", num_steps=128, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95,
                         hidden_sizes=(64, 64), activation="relu"),
        trainer=TrainerConfig(lr=5e-4, num_minibatches=4, update_epochs=4, anneal_lr=False),
    )
