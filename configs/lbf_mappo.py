"""LevelBasedForaging-v0 (envpool's jumanji port: 8x8 grid, 2 agents, 2 food, 100 steps) with MAPPO.

    python -m launch.local configs/lbf_mappo.py

Both agents share one actor (told their index) and one centralised critic on the concatenation of the two
agents' views (the env gives no global state); value targets are normalised (``algos/mappo.py``). Random
play returns ~0.05 per episode, all food eaten is 1.0. ``total_env_steps`` counts env steps (one step of
both agents). envpool 1.2.5 starts every episode from the same layout (the views show two level-2 foods
and two level-1 agents: eating needs both agents), so 2M steps are plenty (the issue allows 20M); results in bench/RESULTS.md ("Multi-agent").
"""

from algos.mappo_config import MAPPOConfig
from srljax.config import EnvConfig, Experiment, TrainerConfig


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=2_000_000,
        env=EnvConfig(id="LevelBasedForaging-v0", num_envs=32),
        algo=MAPPOConfig(critic="central", num_steps=128, clip_coef=0.2, ent_coef=0.01, gamma=0.99, gae_lambda=0.95,
                         hidden_sizes=(64, 64), activation="relu"),
        trainer=TrainerConfig(lr=5e-4, num_minibatches=4, update_epochs=4, anneal_lr=False),
    )
