"""Connect four by a small AlphaStar-style league, as a worker graph: a main agent, a main exploiter and a league
exploiter, each a PPO learner with its own trainer and actor, and a league manager.

    python -m launch.local configs/connect_four_league.py                      # local processes
    python -m launch.slurm configs/connect_four_league.py                      # the same graph as one Slurm job
    python -m launch.local configs/connect_four_league.py layout.mode=single layout.num_actors=1   # in one process

Each member draws its games' opponents by its role (``srljax/selfplay/league.py``): the main agent plays itself in
35% of its games and every member's snapshots by PFSP in the rest; the main exploiter plays the main agent's newest
snapshot (its older ones while it cannot beat that); the league exploiter plays every snapshot by PFSP. A snapshot
of each member joins the league every 10 of its updates (8 kept per member). Written to ``RUN_DIR/league/``:
``members.json`` (each member's role, Elo, updates and snapshots), ``matches.json`` (the match matrix: member i's
mean score against member j, and the games), ``ratings.jsonl`` and ``ratings.png`` (every member's Elo), and
``table.json`` (each member's opponents and their probabilities, what the actors draw from); every 250 updates and
at the end the main agent plays 200 games against each of OpenSpiel's random and MCTS-100 bots (``eval.jsonl``).
1M env steps per member; bench/RESULTS.md ("Self-play league") has its time and figures. A short league, for the
graph more than for strength: ``configs/connect_four_selfplay.py`` is the one trained to beat MCTS.
"""

from srljax.config import (
    EnvConfig,
    Experiment,
    LayoutConfig,
    LogConfig,
    PPOConfig,
    Promise,
    SelfPlayConfig,
    TrainerConfig,
)

PROMISE = Promise(
    "win_rate:random", median=0.9, worst=0.9, seeds=(1,), wall_s=390, quick=False,
    source="bench/RESULTS.md (league): seed 1, main agent 97.0% vs random at the end (7.5% vs MCTS-100), 387 s",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=1_000_000,  # per member
        env=EnvConfig(factory="envs.openspiel:make_openspiel", options={"game": "connect_four", "egocentric": True},
                      num_envs=16),
        algo=PPOConfig(num_steps=64, gamma=0.99, gae_lambda=0.95, clip_coef=0.2, ent_coef=0.1, vf_coef=0.5,
                       network="mlp", hidden_sizes=(256, 256), activation="relu"),
        trainer=TrainerConfig(lr=3e-4, anneal_lr=True, num_minibatches=4, update_epochs=4, max_grad_norm=0.5),
        layout=LayoutConfig(mode="distributed", num_actors=3),
        selfplay=SelfPlayConfig(enabled=True, league=("main", "main_exploiter", "league_exploiter"), pool_size=8,
                                snapshot_every=10, latest_share=0.35, bots=("random", "mcts100"), bot_games=200,
                                bot_every_updates=250),
        log=LogConfig(log_every=10),
    )
