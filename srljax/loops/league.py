"""A self-play league in one process (``selfplay.league`` with ``layout.mode=single``): its members train in turn.

    python -m launch.local configs/connect_four_league.py layout.mode=single
    result = train(cfg)                                          # srljax.loops.train hands a league here

Member ``i`` (role ``selfplay.league[i]``) has its own train state (seed ``seed + i``), envs and a
``LeagueOpponent`` that draws each game's opponent by its role's rule (``srljax.selfplay.league``) from every
member's snapshots (kept in memory and written to ``RUN_DIR/league/pool/``); each finished game goes into the
league's match matrix and Elo. One update of member 0, one of member 1, ... (the ordinary loop's ``Collector`` and
``Learner``); every ``selfplay.snapshot_every`` updates of a member its params join the league and
``league/ratings.jsonl`` gets a line; every ``selfplay.bot_every_updates`` (and at the end) the main agents play
``selfplay.bots`` (``eval.jsonl``). Written as the distributed league manager writes them
(``srljax/system/managers/league_manager.py``, the same ``LeagueRecords``): ``league/table.json``, ``members.json``,
``matches.json``, ``ratings.png``; ``metrics.jsonl`` has one line per member update with ``member``, ``role`` and
``elo``; with ``checkpoint.final`` each member's last train state is in ``RUN_DIR/members/<i>/checkpoints``.
Not built: resuming a league (refused before launch).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

import envs
from srljax.config import Experiment
from srljax.config.pbt import member_dir
from srljax.learning.learner import Learner
from srljax.loops.on_policy import Collector
from srljax.loops.result import TrainResult
from srljax.prepare import Run, prepared
from srljax.selfplay.bots import play_bots
from srljax.selfplay.league import League, player
from srljax.selfplay.league_opponent import LeagueOpponent
from srljax.selfplay.league_records import LeagueRecords
from srljax.storage.checkpoint import Checkpointer
from srljax.telemetry.metrics import MetricsLogger, UpdateRecords


@dataclass
class LeagueMember:
    index: int
    role: str
    learner: Learner
    collector: Collector
    env: Any
    opponent: LeagueOpponent
    params: Any = None


def train_league(cfg: Experiment | Run, resume: bool = False) -> TrainResult:
    """Train the league ``cfg.selfplay.league`` in this process (see the module docstring)."""
    run = prepared(cfg, resume)  # refuses a resume (srljax.storage.run_dir.resume_problems)
    cfg, run_dir = run.cfg, run.run_dir
    s = cfg.selfplay
    league = League.from_config(s)
    records = LeagueRecords(run_dir, league, trial=f"{cfg.name}/{cfg.trial}")
    pool: dict[str, Any] = {}  # snapshot name -> host params
    members: list[LeagueMember] = []
    for i, role in enumerate(s.league):
        member_cfg = dataclasses.replace(cfg, seed=cfg.seed + i)
        env = envs.make(cfg.env, seed=member_cfg.seed)
        learner = Learner(member_cfg, env.spec, checkpoints=False)
        opponent = LeagueOpponent(learner.algo, env.spec, member_cfg.seed, weights=functools.partial(league.weights, i),
                                  params_of=pool.get, report=functools.partial(league.record, i))
        env.opponent = opponent
        members.append(LeagueMember(i, role, learner, Collector(member_cfg, env, learner.algo), env, opponent))
    greedy = jax.jit(members[0].learner.algo.act_deterministic or members[0].learner.algo.act)
    logger = MetricsLogger(cfg, total=cfg.total_env_steps * len(members))
    result = TrainResult(config=cfg)
    update_records = [UpdateRecords() for _ in members]
    deadline = time.time() + cfg.timeout_seconds

    def snapshot(m: LeagueMember) -> None:
        host = jax.device_get(m.params)
        name, dropped = league.snapshot(m.index, m.learner.version)
        pool[name] = host
        for gone in dropped:
            pool.pop(gone, None)
        records.save_snapshot(name, host, dropped)
        records.write_table()
        versions = [x.learner.version for x in members]
        records.ratings(member=m.index, version=m.learner.version, versions=versions,
                        env_steps=[x.collector.env_steps for x in members])

    def bots(m: LeagueMember, final: bool = False) -> None:
        if m.role != "main" or not s.bots or not s.bot_games:
            return
        key, params = jax.random.PRNGKey(0), m.params

        def policy(obs: np.ndarray) -> np.ndarray:
            return np.asarray(greedy(params, obs.astype(np.float32), (), None, key)[0])

        rows = play_bots(m.env.game, policy, tuple(s.bots), s.bot_games, seed=cfg.eval.seed, planes=m.env.planes)
        records.bot_rows(rows, member=m.index, role=m.role, version=m.learner.version,
                         env_steps=m.collector.env_steps, elo=round(league.elo.rating(player(m.index)), 2),
                         **({"final": True} if final else {}))

    finished = False
    try:
        for m in members:
            m.params = m.learner.policy_params()
            m.opponent.set_current(m.params, 0)
            snapshot(m)
        while members[-1].learner.version < cfg.num_updates:
            for m in members:
                batch = m.collector.collect(m.params, m.learner.version, deadline)
                if batch is None:
                    result.stopped_by = "timeout"
                    break
                if m.learner._update is None and members[0].learner._update is not None:
                    m.learner._update = members[0].learner._update  # same shapes: one compiled update for all
                    m.learner._batch_shardings = members[0].learner._batch_shardings
                metrics = jax.device_get(m.learner.step(batch.traj))
                m.params = jax.block_until_ready(m.learner.policy_params())
                version = m.learner.version
                m.opponent.set_current(m.params, version)
                if version % s.snapshot_every == 0:
                    snapshot(m)
                if version % cfg.log.log_every == 0 or version == cfg.num_updates:
                    record = update_records[m.index].record(version, batch.env_steps, batch.episodes, metrics,
                                                            member=m.index, role=m.role,
                                                            elo=round(league.elo.rating(player(m.index)), 2))
                    logger.write(record)
                    result.metrics.append(record)
                if s.bot_every_updates and version % s.bot_every_updates == 0 and version < cfg.num_updates:
                    bots(m)
            if result.stopped_by == "timeout":
                break
        finished = True
    finally:
        for m in members:
            m.env.close()
        if finished:
            for m in members:
                bots(m, final=True)
        records.write_table()
        records.summary([m.learner.version for m in members], [m.collector.env_steps for m in members])
        logger.close()
    result.env_steps = sum(m.collector.env_steps for m in members)
    result.state = members[league.mains[0]].learner.state
    if cfg.checkpoint.final:
        for m in members:
            ckpt = Checkpointer(member_dir(cfg, m.index) / "checkpoints", keep=cfg.checkpoint.keep)
            ckpt.save(m.learner.version, m.learner.state, meta={"version": m.learner.version, "member": m.index,
                                                                "role": m.role})
            ckpt.close()
    return result
