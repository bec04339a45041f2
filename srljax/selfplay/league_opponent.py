"""A league member's opponent inside an OpenSpiel env (``env.opponent``), the same in the single-process league and
in a distributed league's actors.

    opponent = LeagueOpponent(algo, env.spec, seed, weights=lambda: league.weights(1),
                              params_of=pool.get, report=lambda name, s: league.record(1, name, s))
    env.opponent = opponent
    opponent.set_current(params, version)     # the member's own params (``LATEST``), after every update

Each game draws its opponent from ``weights()`` when it starts and keeps it to the end, even if the league drops
that snapshot meanwhile (its params stay here until the game ends); ``report(name, score)`` gets the member's score
when it ends. Opponents act by the algorithm's own ``act`` (sampling; ``act=``: another function of its signature,
e.g. ``algo.act_deterministic`` for PSRO's greedy policies): the params of every opponent now playing are
stacked on a leading axis (padded to a power of two, so a new opponent rarely means a new compile) and one jitted call
per round gathers each row's own opponent's params and acts (``vmap`` over rows).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import numpy as np

from envs.openspiel import RandomOpponent
from srljax.selfplay.opponents import padded_rows, stack_params
from srljax.selfplay.pool import LATEST


def act_rows(act: Any, stacked: Any, obs: Any, which: Any, key: Any) -> Any:
    """Actions ``[B]``: row b acted by the params ``stacked[which[b]]`` (gathered per row, one ``act`` per row)."""
    rows = jax.tree.map(lambda x: x[which], stacked)
    keys = jax.random.split(key, obs.shape[0])
    return jax.vmap(lambda p, o, k: act(p, o[None], (), None, k)[0][0])(rows, obs, keys)


class LeagueOpponent:
    def __init__(self, algo: Any, spec: Any, seed: int, weights: Callable[[], dict[str, float]],
                 params_of: Callable[[str], Any], report: Callable[[str, float], None], act: Any = None):
        self.weights, self.params_of, self.report = weights, params_of, report
        self.rng = np.random.default_rng([seed, 4111])
        self.key = jax.random.PRNGKey(seed + 4111)
        self.num_envs = spec.num_envs
        self._act = jax.jit(functools.partial(act_rows, act or algo.act))
        self.assigned = [LATEST] * spec.num_envs
        self.held: dict[str, Any] = {}  # the params of the opponents now playing (LATEST: the member's own)
        self._rows: dict[str, int] = {}
        self._stacked: Any = None
        self.current_version = -1
        self.random = RandomOpponent(spec.legal_actions, seed + 4112)  # until the member's own params arrive

    def set_current(self, params: Any, version: int) -> None:
        if version != self.current_version:
            self.current_version = version
            self.held[LATEST] = jax.device_get(params)
            self._stacked = None

    def begin(self, index: int) -> None:
        weights = self.weights()
        names = list(weights)
        name = names[int(self.rng.choice(len(names), p=np.array(list(weights.values())) / sum(weights.values())))]
        if name != LATEST and LATEST not in self.held:
            name = LATEST  # no params of its own yet: nothing to stack a snapshot beside
        if name != LATEST and name not in self.held:
            params = self.params_of(name)
            if params is None:  # not readable (yet): this game is against the member itself
                name = LATEST
            else:
                self.held[name] = params
                self._stacked = None
        self.assigned[index] = name
        playing = set(self.assigned) | {LATEST}
        for gone in [n for n in self.held if n not in playing and n != LATEST]:
            del self.held[gone]  # kept in the stack until it is rebuilt

    def act(self, obs: np.ndarray, ids: np.ndarray) -> np.ndarray:
        if LATEST not in self.held:  # an actor resets its games before its first params: random legal moves
            return self.random.act(obs, ids)
        if self._stacked is None:
            self._restack()
        padded, which = padded_rows(obs, ids, self.assigned, self._rows, self.num_envs)
        self.key, key = jax.random.split(self.key)
        return np.asarray(self._act(self._stacked, padded, which, key))[: len(ids)]

    def _restack(self) -> None:
        names = list(self.held)
        size = 1 << max(0, len(names) - 1).bit_length()  # the next power of two: few distinct shapes to compile
        self._rows = {name: i for i, name in enumerate(names)}
        params = [self.held[n] for n in names] + [self.held[names[0]]] * (size - len(names))
        self._stacked = stack_params(params)

    def end(self, index: int, score: float) -> None:
        self.report(self.assigned[index], score)

    def playing(self) -> dict[str, int]:
        """How many games each opponent is in now."""
        out: dict[str, int] = {}
        for name in self.assigned:
            out[name] = out.get(name, 0) + 1
        return out
