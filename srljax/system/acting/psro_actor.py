"""An actor's side of PSRO in the worker graph: the opponents inside its OpenSpiel env, drawn from the meta-strategy.

    side = PSROSide(actor)     # in ActorWorker.setup, once the env exists: sets env.opponent
    side.poll(follower)        # every actor poll: the best response's newest params, the manager's table
    side.ready()               # False until the table of the best response it acts for is here: it does not step

Each game's opponent is drawn when it starts (``LeagueOpponent``, as in the single-process loop) by the weights of
``RUN_DIR/psro/table.json`` (the population manager's, ``MetaGame.write_table``) and loaded from the policy file it
names (``psro/policies/p<i>.msgpack``); a greedy policy acts by its mode (``srljax.population.psro.opponent_act``).
The best response it acts for comes from its params version (``GraphSchedule.response``): on a new one it re-reads
the table, waits (does not step) until the table is that best response's, and counts its lag-throttle grants from
that version on (the trainer dropped what it pushed before).
"""

from __future__ import annotations

import functools
import json
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

from srljax.population.psro import PSRO_DIR, TABLE, GraphSchedule, opponent_act
from srljax.selfplay.league_opponent import LeagueOpponent
from srljax.selfplay.league_records import load_params
from srljax.selfplay.pool import LATEST

TABLE_EVERY_S = 0.5


class PSROSide:
    WAITS = "psro: waits for the population manager's opponents of this best response (RUN_DIR/psro/table.json)"

    def __init__(self, actor: Any):
        self.actor = actor
        self.dir = Path(actor.cfg.run_dir) / PSRO_DIR
        self.schedule = GraphSchedule.of(actor.cfg)
        self.template = jax.device_get(actor.follower.codec.zeros())  # the structure of a policy file's params
        self.iteration = -1  # the table's best response
        self.response = -1  # the best response of the params it acts with
        self.current: dict[str, float] = {LATEST: 1.0}  # until the first table: the games begun at reset
        self.files: dict[str, str] = {}
        self.greedy: dict[str, float] = {}
        self.cache: dict[str, Any] = {}
        self.checked = 0.0
        self.opponent = LeagueOpponent(actor.algo, actor.spec, actor.cfg.seed + 7919 * actor.index,
                                       weights=lambda: self.current, params_of=self.params_of, report=self.report,
                                       act=functools.partial(opponent_act, actor.algo))
        actor.env.opponent = self.opponent
        self._read_table()

    def _read_table(self) -> None:
        self.checked = time.monotonic()
        try:
            table = json.loads((self.dir / TABLE).read_text())
            iteration, weights = int(table["iteration"]), {str(k): float(v) for k, v in table["weights"].items()}
            files, greedy = dict(table["files"]), dict(table["greedy"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        if iteration <= self.iteration or not weights:
            return
        self.iteration, self.current, self.files, self.greedy = iteration, weights, files, greedy
        self.actor.stats.add("psro/table_reads")

    def params_of(self, name: str) -> Any | None:
        """A population policy as an opponent acts (``{"net": params, "greedy": 0 or 1}``), read from its file once
        (policies never change)."""
        if name not in self.cache:
            if name not in self.files:
                return None
            params = load_params(self.dir / self.files[name], self.template)
            self.actor.stats.add("psro/policy_loads" if params is not None else "psro/policy_load_failed")
            if params is None:
                return None
            self.cache[name] = {"net": params, "greedy": np.float32(self.greedy.get(name, 0.0))}
        return self.cache[name]

    def report(self, name: str, score: float) -> None:
        self.actor.stats.add("psro/games")

    def poll(self, follower: Any) -> None:
        if follower.params is not None:
            self.opponent.set_current({"net": follower.params, "greedy": np.float32(0)}, follower.version)
            response = self.schedule.response(follower.version)
            if response != self.response:  # a new best response: the trainer dropped what was acted before it
                self.response = response
                self.actor.first_version = -1  # the lag throttle's grants count from its first version
        if self.iteration < max(self.response, 0) and time.monotonic() - self.checked >= TABLE_EVERY_S / 10:
            self._read_table()

    def ready(self) -> bool:
        """Whether the opponents of the best response it acts for are known (before, it does not step)."""
        return self.iteration >= max(self.response, 0)

    def close(self) -> None:
        pass
