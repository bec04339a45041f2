"""The learner against a game's fixed bots: OpenSpiel's uniform random bot, its MCTS bot, a trained policy.

    rows = play_bots(game, policy, bots=("random", "mcts100"), games=200, seed=7)
    # [{"opponent": "random", "games": 200, "win_rate": 0.99, "draw_rate": 0.0, "loss_rate": 0.01,
    #   "distinct_games": 200}, ...]

``policy(obs [1, D]) -> action [1]`` acts on the env's flattened observation (``envs.openspiel.observe``). Game g
seats the learner first when g is even and second when odd; the bots and chance are seeded from ``seed`` and g,
so an evaluation of the same params is the same games. ``mcts<N>`` is OpenSpiel's ``MCTSBot`` (UCT c = 2, N
simulations per move, one random rollout per leaf, its solver on, as OpenSpiel's examples); ``ckpt:RUN_DIR`` a
trained self-play policy's greedy moves (``srljax/selfplay/checkpoint_bot.py``). ``distinct_games``: how many of the
games differ in their moves (a deterministic agent against a greedy ``ckpt:`` bot: 2, one per seat).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from envs.openspiel import observe, play_chance, score


def make_bot(game: Any, name: str, seed: int) -> Callable[[Any], int]:
    """``bot(state) -> action`` for ``random``, ``mcts<N>`` or ``ckpt:RUN_DIR`` / ``ckpt-sampled:RUN_DIR``."""
    from srljax.selfplay.checkpoint_bot import is_checkpoint_bot, make_checkpoint_bot

    if is_checkpoint_bot(name):
        return make_checkpoint_bot(game, name, seed)
    if name == "random":
        rng = np.random.default_rng(seed)
        return lambda state: int(rng.choice(state.legal_actions()))
    from open_spiel.python.algorithms import mcts

    bot = mcts.MCTSBot(game, 2.0, int(name.removeprefix("mcts")),
                       mcts.RandomRolloutEvaluator(1, np.random.RandomState(seed)),
                       random_state=np.random.RandomState((seed + 1) % 2**32))
    return bot.step


def play_bots(game: Any, policy: Callable[[np.ndarray], np.ndarray], bots: tuple[str, ...], games: int,
              seed: int, planes: tuple[int, int] | None = None) -> list[dict[str, Any]]:
    """``planes``: the env's egocentric plane swap (``envs.openspiel.seat_planes``), so the policy sees what it
    learnt on."""
    rows = []
    for b, name in enumerate(bots):
        scores, histories = [], set()
        for g in range(games):
            seat, rng = g % 2, np.random.default_rng([seed, b, g])
            bot = make_bot(game, name, (seed * 1_000_003 + 7919 * b + g) % 2**31)
            state = game.new_initial_state()
            play_chance(state, rng)
            while not state.is_terminal():
                if state.current_player() == seat:
                    action = int(np.asarray(policy(observe(game, state, seat, planes)[None]))[0])
                else:
                    action = bot(state)
                state.apply_action(action)
                play_chance(state, rng)
            histories.add((seat, tuple(state.history())))
            scores.append(score(float(state.returns()[seat])))
        s = np.asarray(scores)
        rows.append({"opponent": name, "games": games, "win_rate": float(np.mean(s == 1.0)),
                     "draw_rate": float(np.mean(s == 0.5)), "loss_rate": float(np.mean(s == 0.0)),
                     "distinct_games": len(histories)})
    return rows
