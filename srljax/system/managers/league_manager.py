"""LeagueManager: the ``league`` role, a distributed self-play league's manager (``selfplay.league``).

    python -m launch.local configs/connect_four_league.py        # RUN_DIR/league/{members,matches}.json, ratings.*
    python -m launch.slurm configs/connect_four_league.py        # the same graph as one Slurm job

One worker, in the graph when ``selfplay.league`` names members and ``layout.mode=distributed``. Trainer ``i`` trains
member ``i`` (the trainer with a member's parts, never waiting: a league has no ready points) with ``layout.num_actors /
members`` actors, whose envs' opponents are drawn by the member's role (``srljax/system/acting/league_actor.py``). The
manager is the league (``srljax.selfplay.league.League``):

* it follows every member's params; every ``selfplay.snapshot_every`` versions of a member (and its first) it writes
  a snapshot file and the league takes it in (the member's oldest leaves past ``pool_size``);
* it takes the actors' game results (the ``results`` stream, ``league_results.py``) into the match matrix and Elo;
* it writes ``RUN_DIR/league/table.json`` (each member's opponents and their probabilities, which the actors read)
  within ``TABLE_EVERY_S`` of a change, a ``ratings.jsonl`` line at every snapshot, and the bot evaluations of the
  main agents (``selfplay.bots``, every ``bot_every_updates`` and at their last version; in a thread, so its loop
  keeps turning) to ``eval.jsonl``.

When every member has trained its updates and every main agent's last evaluation is written it writes
``league/members.json``, ``league/matches.json`` and ``league/ratings.png`` and adds its ``done`` key, which trainer
0 waits for before it ends the trial. A trial stopped early (timeout, Ctrl-C) still gets the summary files at
``close``, without the evaluations it did not finish.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import jax
import numpy as np
import zmq

from srljax.comm import NameResolver
from srljax.comm.security import KeyRing
from srljax.config import Experiment
from srljax.layout import LEAGUE, RESULTS
from srljax.system.shell.common import BackgroundCall, bind_address, stream_key
from srljax.system.shell.worker import Worker

TABLE_EVERY_S = 0.5
RESULTS_PER_POLL = 256


class LeagueManager(Worker):
    role = LEAGUE
    serves = (RESULTS,)
    placement = "cpu"

    def __init__(self, cfg: Experiment, index: int, names: NameResolver, *, ctx: zmq.Context | None = None,
                 parent_pid: int | None = None, keys: KeyRing | None = None):
        super().__init__(cfg, index, names, ctx=ctx, parent_pid=parent_pid, keys=keys)
        # what ``setup`` makes (None until then: ``close`` and ``metrics`` run after a partial setup too)
        self.done_key = ""
        self.members = 0
        self.last = 0
        self.followers: list[Any] = []  # a ParamsFollower per member
        self.receiver: Any = None  # the ResultsReceiver (srljax/comm/results.py)
        self.league: Any = None  # the League (srljax/selfplay/league.py)
        self.records: Any = None  # its LeagueRecords
        self.known: set[str] = set()
        self.next_snapshot: list[int] = []
        self.versions: list[int] = []
        self.dirty, self.table_at = False, 0.0
        self.game: Any = None
        self.planes: Any = None
        self.greedy: Any = None  # the jitted deterministic act
        self.bots_due: list[tuple[int, int, Any, bool]] = []
        self.bot_points: list[int] = []
        self.finals: set[int] = set()
        self._job: BackgroundCall | None = None
        self.summary_written = False

    def setup(self) -> None:
        import algos
        import envs
        from srljax.comm.results import ResultsReceiver
        from srljax.selfplay.league import League
        from srljax.selfplay.league_records import LeagueRecords
        from srljax.system.shell.membership import member_follower
        from srljax.system.training.params import ParamsCodec
        from srljax.system.training.publishers import DONE

        cfg, s = self.cfg, self.cfg.selfplay
        self.done_key = stream_key(cfg, LEAGUE, 0, DONE)
        self.names.delete(self.done_key)
        self.members, self.last = len(s.league), cfg.num_updates
        algo = algos.make(cfg, self.spec)
        codec = ParamsCodec(algo)
        self.followers = [member_follower(self, codec, i) for i in range(self.members)]
        self.receiver = ResultsReceiver(bind_address(cfg), self.trial, self.members, ctx=self.ctx)
        self.register(RESULTS, self.receiver.address)
        self.league = League.from_config(s)
        self.records = LeagueRecords(cfg.run_dir, self.league, trial=f"{cfg.name}/{cfg.trial}")
        self.records.clear()  # a restarted manager starts the league over: snapshots from the members' params now
        self.known = set()  # every snapshot name the league ever had
        self.next_snapshot = [0] * self.members
        self.versions = [0] * self.members
        self.dirty, self.table_at = False, 0.0
        env = envs.make(dataclasses.replace(cfg.env, num_envs=1, batch_size=None), seed=cfg.seed)
        self.game, self.planes = env.game, env.planes
        env.close()
        self.greedy = jax.jit(algo.act_deterministic or algo.act)
        self.bots_due = []  # (member, version, params, final)
        self.bot_points = [0] * self.members  # the last bot_every_updates point evaluated, per member
        self.finals = set()  # main agents whose last version is evaluated
        self._job = BackgroundCall(f"{self.name}-bots")
        self.summary_written = False
        self.log(f"league of {self.members}: {', '.join(f'{i} {r}' for i, r in enumerate(s.league))}; a snapshot "
                 f"every {s.snapshot_every} updates, {s.pool_size} kept per member; results at {self.receiver.address}")

    # -- the loop ----------------------------------------------------------------------------
    def poll(self) -> None:
        got = 0
        while got < RESULTS_PER_POLL and (results := self.receiver.recv(timeout_ms=0)) is not None:
            got += 1
            for name, score in zip(results.opponents, results.scores):
                if name != "latest" and name not in self.known:
                    self.stats.add("results_unknown_opponent")
                    continue
                self.league.record(results.member, name, score)
                self.stats.add("games")
            self.dirty = True
        for i, follower in enumerate(self.followers):
            if follower.poll(timeout_ms=0):
                self._saw(i, follower.version, follower.params)
        if self.dirty and time.monotonic() - self.table_at >= TABLE_EVERY_S:
            self._write_table()
        self._collect()
        if not self._job.busy and self.bots_due:
            self._job.start(self._play_bots, self.bots_due.pop(0), tag="bots")
        if not self.summary_written and self._complete():
            self._finish()
        if not got:
            time.sleep(0.01)

    def _saw(self, member: int, version: int, params: Any) -> None:
        s = self.cfg.selfplay
        self.versions[member] = version
        if version >= self.next_snapshot[member]:
            host = jax.device_get(params)
            name, dropped = self.league.snapshot(member, version)
            self.known.add(name)
            self.records.save_snapshot(name, host, dropped)
            self.next_snapshot[member] = (version // s.snapshot_every + 1) * s.snapshot_every
            self._write_table()
            self.records.ratings(member=member, version=version, versions=list(self.versions),
                                 env_steps=self._env_steps())
        if self.league.roles[member] != "main" or not s.bots or not s.bot_games:
            return
        final = version >= self.last
        point = version // s.bot_every_updates if s.bot_every_updates else 0
        if final or point > self.bot_points[member]:
            self.bot_points[member] = point
            self.bots_due = [d for d in self.bots_due if d[0] != member or d[3]]  # a newer one replaces it
            self.bots_due.append((member, version, jax.device_get(params), final))

    def _env_steps(self) -> list[int]:
        """Each member's env steps trained, from the params versions seen (a batch per update)."""
        return [v * self.cfg.env_steps_per_update for v in self.versions]

    def _write_table(self) -> None:
        if not all(self.next_snapshot):  # the first table waits for every member's first snapshot: until then a
            return  # rule would fall back to the member playing itself
        self.records.write_table()
        self.dirty, self.table_at = False, time.monotonic()

    def _play_bots(self, due: tuple[int, int, Any, bool]) -> tuple[int, int, bool, list[dict[str, Any]]]:
        from srljax.selfplay.bots import play_bots

        member, version, params, final = due
        s, key = self.cfg.selfplay, jax.random.PRNGKey(0)

        def policy(obs: np.ndarray) -> np.ndarray:
            return np.asarray(self.greedy(params, obs.astype(np.float32), (), None, key)[0])

        return member, version, final, play_bots(self.game, policy, tuple(s.bots), s.bot_games,
                                                 seed=self.cfg.eval.seed, planes=self.planes)

    def _collect(self) -> None:
        from srljax.selfplay.league import player

        done = self._job.take()
        if done is None:
            return
        _, (member, version, final, rows) = done
        self.records.bot_rows(rows, member=member, role=self.league.roles[member], version=version,
                              env_steps=version * self.cfg.env_steps_per_update,
                              elo=round(self.league.elo.rating(player(member)), 2), **({"final": True} if final else {}))
        self.stats.add("bot_evaluations")
        if final:
            self.finals.add(member)

    def _complete(self) -> bool:
        s = self.cfg.selfplay
        if any(v < self.last for v in self.versions):
            return False
        mains = self.league.mains if s.bots and s.bot_games else []
        return all(m in self.finals for m in mains)

    def _finish(self) -> None:
        self._write_table()
        self.records.summary(list(self.versions), self._env_steps())
        self.summary_written = True
        self.names.add(self.done_key, "1")
        self.log("league done: members.json, matches.json and ratings.png written")

    # -- heartbeats ------------------------------------------------------------------------------
    def progress(self) -> int:
        return int(self.stats.counters.get("games", 0))

    def waiting(self) -> str:
        if self._job is not None and self._job.busy:
            return ""
        return "for game results and the members' params"

    def metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        league = self.league
        if league is not None:
            from srljax.selfplay.league import player

            out.update({f"elo/{i}": league.elo.rating(player(i)) for i in range(len(league.roles))})
            out["snapshots"] = len(league.snapshots)
        if self.receiver is not None:
            out.update({f"results/{k}": v for k, v in self.receiver.counters().items()})
        return out

    # -- the end -------------------------------------------------------------------------------
    def close(self) -> None:
        try:
            if self._job is None:  # setup did not get that far
                return
            self._job.join()
            self._collect()
            if self.state != "error" and not self.summary_written:
                left = sorted({d[0] for d in self.bots_due})
                if left:
                    self.log(f"stopped before the bot evaluations of members {left}; writing the summary without them")
                self.records.summary(list(self.versions), self._env_steps())
                self.summary_written = True
        finally:
            for thing in (*self.followers, self.receiver):
                if thing is not None:
                    thing.close()
