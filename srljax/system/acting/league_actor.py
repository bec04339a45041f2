"""An actor's side of a distributed league: its member's opponents inside the OpenSpiel env, and its games' results.

    side = LeagueSide(actor, member)   # in ActorWorker.setup, once the env exists: sets env.opponent
    side.poll(follower)                 # every actor poll: the member's newest params, the league's table, results out
    side.close()                        # sends what is left

The opponents are drawn by the member's row of ``RUN_DIR/league/table.json`` (the league manager's, re-read when
it changes, at most every ``TABLE_EVERY_S``) and loaded from the snapshot files it names
(``srljax.selfplay.league_records``); the member itself (``latest``) acts with the params the actor acts with.
Results go to the league manager every ``SEND_EVERY_S`` on the ``results`` stream (``league_results.py``); while
its socket is full they wait here (at most ``MAX_WAITING`` games, the oldest dropped beyond that and counted).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import jax

from srljax.comm.results import MAX_GAMES, Results, ResultsSender
from srljax.layout import LEAGUE, RESULTS
from srljax.selfplay.league_opponent import LeagueOpponent
from srljax.selfplay.league_records import LEAGUE_DIR, TABLE, load_params, read_table
from srljax.selfplay.pool import LATEST

TABLE_EVERY_S = 0.5
SEND_EVERY_S = 0.5
MAX_WAITING = 100_000


class LeagueSide:
    WAITS = "league: waits for the league manager's first table (RUN_DIR/league/table.json)"

    def __init__(self, actor: Any, member: int):
        self.actor, self.member = actor, member
        self.dir = Path(actor.cfg.run_dir) / LEAGUE_DIR
        self.template = jax.device_get(actor.follower.codec.zeros())  # the structure of a snapshot file's params
        self.table_mtime = -1.0
        self.table_checked = 0.0
        self.current_weights: dict[str, float] = {LATEST: 1.0}
        self.files: dict[str, str] = {}
        self.cache: dict[str, Any] = {}  # snapshot name -> params, for the snapshots the table names
        self.waiting: list[tuple[str, float]] = []
        self.last_send = 0.0
        self.sender = ResultsSender(None, actor.trial, ctx=actor.ctx)
        if not actor.connect_peers(self.sender, LEAGUE, RESULTS, [0]):
            raise RuntimeError("the configure message named no results address for the league manager")
        self.opponent = LeagueOpponent(actor.algo, actor.spec, actor.cfg.seed + 7919 * actor.index,
                                       weights=self.weights, params_of=self.params_of, report=self.report)
        actor.env.opponent = self.opponent

    def weights(self) -> dict[str, float]:
        now = time.monotonic()
        if now - self.table_checked >= TABLE_EVERY_S:
            self.table_checked = now
            self._read_table()
        return self.current_weights

    def _read_table(self) -> None:
        path = self.dir / TABLE
        try:
            mtime = path.stat().st_mtime
        except OSError:
            return
        if mtime == self.table_mtime:
            return
        table = read_table(path)
        rows = [r for r in (table or {}).get("members", []) if isinstance(r, dict) and r.get("member") == self.member]
        if not rows or not isinstance(rows[0].get("weights"), dict) or not rows[0]["weights"]:
            self.actor.stats.add("league/table_unreadable")
            return
        self.table_mtime = mtime
        self.current_weights = {str(k): float(v) for k, v in rows[0]["weights"].items()}
        self.files = {str(k): str(v) for k, v in table.get("files", {}).items()}
        self.cache = {n: p for n, p in self.cache.items() if n in self.files}
        self.actor.stats.add("league/table_reads")

    def params_of(self, name: str) -> Any | None:
        """A snapshot's params: read from its file once, kept while the league's table names it."""
        if name in self.cache:
            return self.cache[name]
        if name not in self.files:
            return None
        params = load_params(self.dir / self.files[name], self.template)
        self.actor.stats.add("league/snapshot_loads" if params is not None else "league/snapshot_load_failed")
        if params is not None:
            self.cache[name] = params
        return params

    def report(self, name: str, score: float) -> None:
        self.waiting.append((name, score))
        if len(self.waiting) > MAX_WAITING:
            self.actor.stats.add("league/results_dropped", len(self.waiting) - MAX_WAITING)
            del self.waiting[: len(self.waiting) - MAX_WAITING]

    def ready(self) -> bool:
        """Whether the league's first table is here (before it, the actor does not step: every game would be
        against the member itself, whatever its role; only the games its envs began at reset are)."""
        if self.table_mtime < 0:
            self._read_table()
        return self.table_mtime >= 0

    def poll(self, follower: Any) -> None:
        if follower.params is not None:
            self.opponent.set_current(follower.params, follower.version)
        if self.waiting and time.monotonic() - self.last_send >= SEND_EVERY_S:
            self.flush()

    def flush(self, timeout_ms: int = 0) -> None:
        self.last_send = time.monotonic()
        while self.waiting:
            chunk = self.waiting[:MAX_GAMES]
            names, scores = zip(*chunk)
            if not self.sender.send(Results(self.member, names, scores), timeout_ms=timeout_ms):
                self.actor.stats.add("league/results_send_retries")
                return
            self.actor.stats.add("league/games", len(chunk))
            del self.waiting[: len(chunk)]

    def close(self) -> None:
        try:
            self.flush(timeout_ms=1000)
        finally:
            self.sender.close()
