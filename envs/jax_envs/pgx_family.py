"""pgx board games (connect four, tic-tac-toe, othello, Go, chess, backgammon, 2048, ...) as a ``Family``:
``env.id=pgx/<pgx env id>`` (``pgx/connect_four``, ``pgx/go_9x9``).

The observation is pgx's board planes from the point of view of the player to move, flattened, then the legal
moves (``obs_keys = ("observation", "action_mask")``, ``EnvSpec.legal_actions``), so a policy never picks an
illegal move. The reward of a step is the mover's (pgx's ``rewards[mover]``: +1 for the winning move of a two-player
game, -1 for a move that loses at once); ``EnvSpec.players`` is the number of players taking turns, so a search
(``srljax/learning/anakin_search.py``) knows that a two-player game's next value is the opponent's. pgx picks who
moves first at random each game. ``env.max_episode_steps`` truncates a game (0: pgx's own limit, if it has one).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from envs.jax_envs import Family
from srljax.config import EnvConfig
from srljax.types import ACTION_MASK_KEY, EnvSpec

OPENSPIEL_GAMES = {"connect_four": "connect_four", "tic_tac_toe": "tic_tac_toe"}
"""pgx games whose rules and action numbers are OpenSpiel's (checked move by move in ``tests/test_alphazero.py``),
so the OpenSpiel bots can play them (``srljax/selfplay/search_bots.py``)."""


def _name(cfg: EnvConfig) -> str:
    return cfg.id.split("/", 1)[1]


def problems(cfg: EnvConfig) -> list[str]:
    import pgx

    name = _name(cfg)
    if name not in pgx.available_envs():
        return [f"env.id={cfg.id!r}: pgx has no env {name!r}; its envs: {', '.join(pgx.available_envs())}"]
    if cfg.options:
        return [f"env.options has {', '.join(sorted(cfg.options))}, which {cfg.id} does not take (pgx envs take none)"]
    return []


def players(cfg: EnvConfig) -> int:
    import pgx

    return int(pgx.make(_name(cfg)).num_players)


def family(cfg: EnvConfig) -> Family:
    import pgx

    problem = problems(cfg)
    if problem:
        raise ValueError(problem[0])
    env = pgx.make(_name(cfg))
    board = int(np.prod(env.observation_shape))
    spec = EnvSpec(id=cfg.id, obs_shape=(board + env.num_actions,), obs_dtype="float32", action_kind="discrete",
                   num_actions=int(env.num_actions), max_episode_steps=int(cfg.max_episode_steps),
                   obs_keys=("observation", ACTION_MASK_KEY), obs_key_sizes=(board, int(env.num_actions)),
                   action_mask=True, players=int(env.num_players))
    limit = int(cfg.max_episode_steps)

    def observe(state: Any) -> jax.Array:
        return jnp.concatenate([state.observation.reshape(-1).astype(jnp.float32),
                                state.legal_action_mask.astype(jnp.float32)])

    def reset(key: jax.Array) -> tuple[jax.Array, Any]:
        state = env.init(key)
        return observe(state), state

    def step(key: jax.Array, state: Any, action: jax.Array) -> Any:
        mover = state.current_player
        state = env.step(state, action, key)
        reward = state.rewards[mover] if env.num_players > 1 else state.rewards[0]
        truncated = state.truncated | ((state._step_count >= limit) if limit else False)  # noqa: SLF001 - pgx's count
        return observe(state), state, reward.astype(jnp.float32), state.terminated, truncated & ~state.terminated

    return Family(spec, reset, step, symmetries=_symmetries(_name(cfg), env))


def _symmetries(name: str, env: Any) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """Connect four's left-right mirror: board columns and moves reversed (``Family.symmetries``)."""
    if name != "connect_four":
        return ()
    rows, cols, planes = env.observation_shape
    board = np.arange(rows * cols * planes).reshape(rows, cols, planes)[:, ::-1, :].reshape(-1)
    moves = np.arange(env.num_actions)[::-1]
    return ((np.concatenate([board, board.size + moves]), moves.copy()),)
