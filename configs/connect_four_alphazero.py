"""Connect four by AlphaZero: every move of 128 games chosen by mctx's Gumbel MuZero search over pgx's connect four
(the env's own step is the search's model), all on the device; judged against OpenSpiel's random and MCTS bots.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/connect_four_alphazero.py
    python -m launch.local configs/connect_four_alphazero.py algo.search=puct algo.num_simulations=64

The network (an MLP on the board planes and the legal moves, a policy head over the 7 columns and a tanh value
head) learns the search's improved policy and each move's outcome for the player who made it. At each evaluation
the agent searches ``algo.eval_simulations`` per move (greedy) against OpenSpiel's random bot and its MCTS bot with
100 simulations and random rollouts, 200 games each, seats alternated (``srljax/selfplay/search_bots.py``): rows in
``RUN_DIR/eval.jsonl``. bench/RESULTS.md ("Planning agents") has the figures. A finished run against a trained
PPO self-play checkpoint (``configs/connect_four_selfplay.py``'s run folder; ``srljax/selfplay/checkpoint_bot.py``),
without retraining (``selfplay.bots=[...,ckpt:RUN_DIR]`` does it during a run):

    python -m launch.play runs/connect_four_alphazero/<trial> --checkpoint latest \
        --bots random mcts100 ckpt:runs/connect_four_selfplay/<trial> ckpt-sampled:runs/connect_four_selfplay/<trial>

The greedy ``ckpt:`` bot against this greedy search plays the same two games (one per seat) 100 times each
(``distinct_games`` 2); ``ckpt-sampled:`` draws its moves from the policy. Seeds 1-3 won 100 / 100 / 100% against
the greedy checkpoint and 98.0 / 100 / 99.5% against the sampled one, but that checkpoint was weak: stopped at 1.27M
of its 26M env steps on a crowded box, it won 3.5% against MCTS-100 (bench/RESULTS.md, issue 40, session 24).
"""

from srljax.config import (
    AlphaZeroConfig,
    CheckpointConfig,
    EnvConfig,
    EvalConfig,
    Experiment,
    LogConfig,
    Promise,
    SelfPlayConfig,
    TrainerConfig,
)

PROMISE = Promise(
    "win_rate:mcts100", median=0.95, worst=0.93, seeds=(1, 2, 3), wall_s=3600, quick=False,
    source="bench/RESULTS.md (Planning agents): 99.0 / 96.0 / 97.0% against MCTS-100 at the end (seeds 1-3), "
    "~49 min each with the three on the 2-core box at once",
)


def experiment() -> Experiment:
    return Experiment(
        total_env_steps=8_000_000,
        timeout_seconds=3 * 3600,
        env=EnvConfig(id="pgx/connect_four", num_envs=128),
        algo=AlphaZeroConfig(num_steps=32, num_simulations=16, eval_simulations=128, opening_moves=4,
                             replay_iterations=4, hidden_sizes=(256, 256, 256)),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=False, num_minibatches=16, update_epochs=1, max_grad_norm=1.0),
        selfplay=SelfPlayConfig(bots=("random", "mcts100"), bot_games=200),
        eval=EvalConfig(every_updates=500, final=True),
        checkpoint=CheckpointConfig(every_updates=250),
        log=LogConfig(log_every=20),
    )
