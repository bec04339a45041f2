"""OpenSpiel's two-player zero-sum games as a batched single-agent env: the learner plays one seat, an opponent the other.

    EnvConfig(factory="envs.openspiel:make_openspiel", options={"game": "connect_four"}, num_envs=32)
    env = envs.make(cfg, seed=1)                 # a VecEnv; env.opponent plays the other seat (default: random)
    env.opponent = my_opponent                   # begin(i) / act(obs [n, D], ids [n]) -> actions [n] / end(i, score)

Each game of the batch seats the learner first or second at random (the env's own generator, so seats alternate
over games); the opponent's moves (and chance outcomes, sampled by their probabilities) are made inside ``send``
until it is the learner's turn again or the game is over, one batched ``opponent.act`` call per round, so a
network opponent is one call per env step. What the learner sees is a Dict observation flattened
(``envs/spaces.py``): ``observation`` (the game's observation tensor from its seat, or its information-state
tensor where the game has no observation tensor or ``env.options.info_state`` asks for it: the whole history the
player saw, as PSRO's exact exploitability on poker needs), ``seat`` (one-hot, 2) and ``action_mask`` (the legal actions,
``EnvSpec.legal_actions``), so PPO, IMPALA, DQN and R2D2 never choose an illegal action; one is refused with a
``ValueError`` naming it. The reward is 0 until the game ends, then the learner's return (connect four: +1 win,
-1 loss, 0 draw), with ``terminated`` set. The opponent's ``end(i, score)`` gets the learner's score (1 win, 0.5
draw, 0 loss) of every finished game, for the ratings (``srljax/selfplay``).

Refused (``ValueError`` before any game starts, ``envs.problems`` before launch): a game that is not for two
players, not zero-sum (or constant-sum), or not sequential (simultaneous-move games).
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from envs.options import with_defaults
from envs.python_loop import PythonLoopVecEnv
from srljax.config import EnvConfig
from srljax.types import EnvSpec

OPTIONS = {"game": "connect_four", "egocentric": False, "info_state": False}


class Opponent(Protocol):
    def begin(self, index: int) -> None: ...

    def act(self, obs: np.ndarray, ids: np.ndarray) -> np.ndarray: ...

    def end(self, index: int, score: float) -> None: ...


class RandomOpponent:
    """Uniformly random legal moves (OpenSpiel's random bot), from the legal-action flags of each row."""

    def __init__(self, legal: tuple[int, int], seed: int = 0):
        self.legal, self.rng = legal, np.random.default_rng(seed)

    def begin(self, index: int) -> None:
        pass

    def act(self, obs: np.ndarray, ids: np.ndarray) -> np.ndarray:
        flags = obs[:, self.legal[0]: self.legal[1]] > 0.5
        return np.array([self.rng.choice(np.flatnonzero(f)) for f in flags], np.int32)

    def end(self, index: int, score: float) -> None:
        pass


def load_game(name: str, for_what: str = "self-play") -> Any:
    """The OpenSpiel game ``name``; ValueError naming the problem if it is unknown or not two-player zero-sum."""
    import pyspiel

    try:
        game = pyspiel.load_game(name)
    except Exception as error:  # pyspiel raises its own error type
        raise ValueError(f"env.options.game={name!r}: OpenSpiel has no such game ({error}); e.g. connect_four, "
                         "tic_tac_toe, liars_dice (pyspiel.registered_names())") from None
    t = game.get_type()
    if game.num_players() != 2 or t.utility not in (pyspiel.GameType.Utility.ZERO_SUM,
                                                    pyspiel.GameType.Utility.CONSTANT_SUM):
        raise ValueError(f"env.options.game={name!r} is a {game.num_players()}-player {t.utility.name.lower()} game; "
                         f"{for_what} needs a two-player zero-sum game (e.g. connect_four, tic_tac_toe, liars_dice)")
    if t.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
        raise ValueError(f"env.options.game={name!r} has simultaneous moves; only turn-based games are built")
    return game


def uses_info_state(game: Any, info_state: bool = False) -> bool:
    """Whether the env shows ``game``'s information-state tensor: asked for (``env.options.info_state``), or the
    game has no observation tensor."""
    return info_state or not game.get_type().provides_observation_tensor


def observation_size(game: Any, info_state: bool = False) -> int:
    shape = (game.information_state_tensor_shape() if uses_info_state(game, info_state)
             else game.observation_tensor_shape())
    return int(np.prod(shape))


def seat_planes(game: Any) -> tuple[int, int] | None:
    """For a board game whose observation tensor is the same from both seats with one plane per player's pieces
    (connect four, tic-tac-toe: ``[3, rows, cols]``): (player 0's plane, player 1's), found by playing one move
    each from the start; None for any other game."""
    # planes: empty, one player's, the other's (no other per-player planes)
    if not game.get_type().provides_observation_tensor or game.observation_tensor_shape()[:1] != [3]:
        return None
    shape, state, planes = game.observation_tensor_shape(), game.new_initial_state(), []
    for player in (0, 1):
        if state.is_terminal() or state.current_player() != player:
            return None
        before = np.asarray(state.observation_tensor(0), np.float32).reshape(shape)
        state.apply_action(state.legal_actions()[0])
        after = np.asarray(state.observation_tensor(0), np.float32).reshape(shape)
        grew = np.flatnonzero((after - before).reshape(shape[0], -1).sum(axis=1) > 0)
        if len(grew) != 1 or state.observation_tensor(0) != state.observation_tensor(1):
            return None
        planes.append(int(grew[0]))
    return (planes[0], planes[1]) if planes[0] != planes[1] else None


def observe(game: Any, state: Any, player: int, planes: tuple[int, int] | None = None,
            info_state: bool = False) -> np.ndarray:
    """``state`` as ``player`` sees it, flattened as the env's observation: the game's observation tensor (or its
    information-state tensor: ``info_state``, or a game without an observation tensor), the seat one-hot, the
    legal-action flags (none once the game is over). With
    ``planes`` (``seat_planes``, the ``egocentric`` option) seat 1 sees the two players' planes swapped: the first
    always holds the viewer's own pieces."""
    size, num_actions = observation_size(game, info_state), game.num_distinct_actions()
    out = np.zeros(size + 2 + num_actions, np.float32)
    out[:size] = (state.information_state_tensor(player) if uses_info_state(game, info_state)
                  else state.observation_tensor(player))
    if planes is not None and player == 1:
        board = out[:size].reshape(game.observation_tensor_shape())
        board[[planes[0], planes[1]]] = board[[planes[1], planes[0]]]
    out[size + player] = 1.0
    if not state.is_terminal():
        out[size + 2 + np.asarray(state.legal_actions(player), np.int64)] = 1.0
    return out


def play_chance(state: Any, rng: np.random.Generator) -> None:
    """Resolve chance nodes (dice, deals) by their outcomes' probabilities until a player is to move."""
    while state.is_chance_node():
        outcomes, probs = zip(*state.chance_outcomes())
        state.apply_action(outcomes[int(rng.choice(len(outcomes), p=np.asarray(probs)))])


class OpenSpielVecEnv(PythonLoopVecEnv):
    """``num_envs`` games of ``game`` (see the module docstring)."""

    def __init__(self, game: str, num_envs: int, seed: int = 0, batch_size: int | None = None,
                 egocentric: bool = False, info_state: bool = False):
        self.game = load_game(game)
        self.info_state = info_state
        self.planes = seat_planes(self.game) if egocentric else None  # checked by openspiel_problems
        if egocentric and self.planes is None:
            raise ValueError(egocentric_problem(game))
        if egocentric and info_state:
            raise ValueError(INFO_STATE_EGOCENTRIC)
        self.num_actions = self.game.num_distinct_actions()
        size = observation_size(self.game, info_state)
        super().__init__(EnvSpec(
            id=f"openspiel/{game}", obs_shape=(size + 2 + self.num_actions,), obs_dtype="float32",
            action_kind="discrete", num_actions=self.num_actions, num_envs=num_envs,
            batch_size=batch_size or num_envs, max_episode_steps=self.game.max_game_length(),
            obs_keys=("observation", "seat", "action_mask"), obs_key_sizes=(size, 2, self.num_actions),
            action_mask=True))
        self.rng = np.random.default_rng(seed)
        self.opponent: Opponent = RandomOpponent(self.spec.legal_actions, seed + 1)
        self.states: list[Any] = [None] * num_envs
        self.seat = np.zeros(num_envs, np.int64)

    def observe(self, index: int, player: int) -> np.ndarray:
        """Game ``index`` as ``player`` sees it (``observe``)."""
        return observe(self.game, self.states[index], player, self.planes, self.info_state)

    def _advance(self, ids: np.ndarray, action: np.ndarray | None) -> Any:
        for row, index in enumerate(ids.tolist()):  # the learner's moves, new games where one ended
            if self._needs_reset[index]:
                self.states[index] = self.game.new_initial_state()
                self.seat[index] = self.rng.integers(2)
                self.opponent.begin(index)
            else:
                state, a = self.states[index], int(action[row])
                if a not in state.legal_actions():
                    raise ValueError(f"{self.spec.id}: action {a} is illegal in game {index} (legal: "
                                     f"{state.legal_actions()}): the learner must act on the action_mask flags")
                state.apply_action(a)
            play_chance(self.states[index], self.rng)
        while True:  # the opponent's moves, one batched call per round, until it is the learner's turn everywhere
            waiting = [i for i in ids.tolist() if not self.states[i].is_terminal()
                       and self.states[i].current_player() != self.seat[i]]
            if not waiting:
                break
            obs = np.stack([self.observe(i, 1 - self.seat[i]) for i in waiting])
            for i, a in zip(waiting, np.asarray(self.opponent.act(obs, np.asarray(waiting, np.int32))).tolist()):
                state = self.states[i]
                if a not in state.legal_actions():
                    raise ValueError(f"{self.spec.id}: the opponent chose illegal action {a} in game {i}")
                state.apply_action(int(a))
                play_chance(state, self.rng)
        return super()._advance(ids, action)

    def _reset_env(self, index: int) -> np.ndarray:
        return self.observe(index, int(self.seat[index]))

    def _step_env(self, index: int, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        state, seat = self.states[index], int(self.seat[index])
        if not state.is_terminal():
            return self.observe(index, seat), 0.0, False, False
        reward = float(state.returns()[seat])
        self.opponent.end(index, score(reward))
        return self.observe(index, seat), reward, True, False


def score(learner_return: float) -> float:
    """A zero-sum game's return as a match score: 1 win, 0.5 draw, 0 loss."""
    return 1.0 if learner_return > 0 else 0.5 if learner_return == 0 else 0.0


def make_openspiel(cfg: EnvConfig, seed: int) -> OpenSpielVecEnv:
    """Factory for ``EnvConfig(factory="envs.openspiel:make_openspiel", options={"game": "connect_four"})``."""
    opts = with_defaults(cfg.options, OPTIONS)
    return OpenSpielVecEnv(str(opts["game"]), cfg.num_envs, seed=seed, batch_size=cfg.envs_per_recv,
                           egocentric=bool(opts["egocentric"]), info_state=bool(opts["info_state"]))


INFO_STATE_EGOCENTRIC = ("env.options.info_state=true with egocentric=true: the planes egocentric swaps are the "
                         "observation tensor's; use one of the two")


def egocentric_problem(game: str) -> str:
    return (f"env.options.egocentric=true: {game}'s observation is not one plane per player's pieces, alike from "
            "both seats (as connect_four's and tic_tac_toe's), so there is nothing to swap; drop the option")


def openspiel_problems(options: dict[str, Any]) -> list[str]:
    opts = with_defaults(options, OPTIONS)
    try:
        game = load_game(str(opts["game"]), "this env")
    except ValueError as error:
        return [str(error)]
    out = [egocentric_problem(str(opts["game"]))] if opts["egocentric"] and seat_planes(game) is None else []
    if opts["info_state"] and not game.get_type().provides_information_state_tensor:
        out.append(f"env.options.info_state=true: {opts['game']} has no information-state tensor; drop the option")
    if opts["info_state"] and opts["egocentric"]:
        out.append(INFO_STATE_EGOCENTRIC)
    return out


make_openspiel.options = OPTIONS  # names and types checked before launch (envs.problems)
make_openspiel.option_problems = openspiel_problems
