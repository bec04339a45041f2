"""Connect four by self-play: PPO against a pool of its own snapshots (PFSP), rated by Elo, judged against
OpenSpiel's random and MCTS bots.

    python -m launch.local configs/connect_four_selfplay.py
    python -m launch.local configs/connect_four_selfplay.py selfplay.sampling=latest     # plain self-play, no pool
    python -m launch.local configs/connect_four_selfplay.py env.options.game=tic_tac_toe total_env_steps=500000

The game is OpenSpiel's (``envs/openspiel.py``): the learner takes the first or the second seat at random each
game, sees the board planes, its seat and the legal moves (masked, so it never plays an illegal one) and gets +1
for a win, -1 for a loss, 0 for a draw at the end. A snapshot of the policy joins the pool every 20 updates
(40,960 env steps); each game's opponent is a snapshot drawn by PFSP (the ones it loses to most, weight
``(1 - p) ** 2``) or, for 20% of the games, the current policy itself. ``RUN_DIR/ratings.jsonl`` and
``ratings.png`` hold the Elo ratings; at the end the greedy policy plays 200 games against each of OpenSpiel's
random bot and its MCTS bot with 100 simulations per move (seats alternated, fixed seeds): ``eval.jsonl``.
Budget: the run is sized for about an hour of a 2-core CPU; bench/RESULTS.md ("Self-play") has its figures.
A small CNN on the board planes instead of the MLP (~50x slower per env step on a CPU; for an accelerator):

    python -m launch.local configs/connect_four_selfplay.py algo.network=algos.board_torso:BoardCNN
"""

from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, SelfPlayConfig, TrainerConfig


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=6_000_000,
        env=EnvConfig(factory="envs.openspiel:make_openspiel", options={"game": "connect_four"}, num_envs=32),
        algo=PPOConfig(num_steps=64, gamma=0.99, gae_lambda=0.95, clip_coef=0.2, ent_coef=0.01, vf_coef=0.5,
                       network="mlp", hidden_sizes=(256, 256), activation="relu"),
        trainer=TrainerConfig(lr=3e-4, anneal_lr=True, num_minibatches=4, update_epochs=4, max_grad_norm=0.5),
        selfplay=SelfPlayConfig(enabled=True, pool_size=16, snapshot_every=20, sampling="pfsp", pfsp_power=2.0,
                                latest_share=0.2, bots=("random", "mcts100"), bot_games=200),
        log=LogConfig(log_every=10),
    )
