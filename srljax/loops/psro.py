"""PSRO (Policy-Space Response Oracles, Lanctot et al. 2017) in one process: ``psro.enabled`` with ``layout.mode=single``.

    python -m launch.local configs/kuhn_psro.py                   # RUN_DIR/psro/psro.jsonl, exploitability.png
    python -m launch.local configs/leduc_psro.py psro.solver=prd  # another meta-solver
    result = train(cfg)                                           # srljax.loops.train hands PSRO here

The meta-game (the population, payoffs, meta-strategy, exploitability, the files) is ``srljax.population.psro``'s
``MetaGame``, which the worker graph's population manager runs too (``layout.mode=distributed``:
``srljax/system/managers/psro_manager.py``, one trainer training the best responses in turn, actors drawing the
opponents; ``docs/architecture.md``, "PSRO as a worker graph").

The population starts with one policy, the algorithm's untrained network (near uniform over the legal moves).
Each iteration: the exact payoff matrix of the population (``GameTree.payoff``: every pair, both seats, over the
whole game tree), the meta-strategy over it (``psro.solver``, ``srljax/population/meta_solvers.py``), the
exploitability of that mixture played as one policy (OpenSpiel's ``exploitability`` on the tabular policy built
from the networks' action probabilities at every information state, ``GameTree.mixture``); then a new policy is
trained from scratch (seed ``seed + iteration``) by the algorithm through the ordinary loop's ``Collector`` and
``Learner`` for ``total_env_steps / psro.iterations`` env steps against opponents drawn per game from the
meta-strategy (``LeagueOpponent``: each game's opponent policy is drawn when it starts, seats at random), and
joins the population: with ``psro.greedy`` as its greedy policy (the mode at every information state, in the
tables and when it acts as an opponent; an exact best response is pure, and a trained one's leftover randomness
at the decisions it finds nearly indifferent is noise the meta-game does not need). Written: ``psro/psro.jsonl`` (a line per iteration: ``iteration``, ``policies``,
``env_steps``, ``exploitability``, ``meta_strategy``, ``payoff``, the meta-game's own exploitability
``meta_exploitability`` and the last best response's mean score against the meta-strategy ``br_score``),
``psro/exploitability.png``, ``psro/policies/p<i>.msgpack`` (each policy's params), ``metrics.jsonl`` (one line
per logged update of a best response, with ``iteration``) and, with ``checkpoint.final``, the last best response's
train state in ``RUN_DIR/checkpoints``. The game must be small enough to walk whole (Kuhn, Leduc poker; refused
above ``MAX_NODES`` histories). Not built: resuming (refused before launch, in both layouts).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections import deque

import jax
import numpy as np

import envs
from srljax.config import Experiment
from srljax.learning.learner import Learner
from srljax.loops.on_policy import Collector
from srljax.loops.result import TrainResult
from srljax.population.psro import (  # noqa: F401 - read_lines, opponent_act, PSRO_DIR: this loop's names too
    PSRO_DIR,
    MetaGame,
    br_config,
    game_tree,
    opponent_act,
    policy_name,
    read_lines,
)
from srljax.prepare import Run, prepared
from srljax.selfplay.league_opponent import LeagueOpponent
from srljax.storage.checkpoint import Checkpointer
from srljax.telemetry.metrics import MetricsLogger, UpdateRecords


def train_psro(cfg: Experiment | Run, resume: bool = False) -> TrainResult:
    """Run PSRO for ``cfg.psro.iterations`` iterations in this process (see the module docstring)."""
    run = prepared(cfg, resume)  # refuses a resume (srljax.storage.run_dir.resume_problems)
    cfg, run_dir = run.cfg, run.run_dir
    p = cfg.psro
    br_cfg = br_config(cfg)
    first_env = envs.make(cfg.env, seed=cfg.seed)
    try:
        tree = game_tree(first_env)
        spec = first_env.spec
    finally:
        first_env.close()
    learner = Learner(br_cfg, spec, checkpoints=False)
    algo = learner.algo
    meta = MetaGame(cfg, algo, tree, run_dir)
    logger = MetricsLogger(cfg, total=cfg.total_env_steps)
    result = TrainResult(config=cfg)
    records = UpdateRecords()
    deadline = time.time() + cfg.timeout_seconds
    start = time.time()
    env_steps = updates = 0
    br_score = float("nan")
    try:
        meta.join(learner.policy_params())  # policy 0: the untrained network
        compiled = None  # one compiled update for every best response: same shapes and hyperparameters
        for iteration in range(p.iterations + 1):
            line = meta.line(iteration, env_steps, updates, br_score, time.time() - start)
            print(f"[{cfg.name}/{cfg.trial}] psro iteration {iteration}: {line['policies']} policies, exploitability "
                  f"{line['exploitability']:.4f} at {env_steps:,} env steps; meta-strategy "
                  f"{[round(float(s), 3) for s in meta.sigma]}", flush=True)
            if iteration == p.iterations or result.stopped_by == "timeout":
                break
            learner = learner if iteration == 0 else Learner(
                dataclasses.replace(br_cfg, seed=cfg.seed + iteration), spec, checkpoints=False, algo=algo)
            if compiled is not None:
                learner._update, learner._batch_shardings = compiled
            learner_cfg = dataclasses.replace(br_cfg, seed=cfg.seed + iteration)
            env = envs.make(cfg.env, seed=learner_cfg.seed)
            scores: deque[float] = deque(maxlen=1000)
            opponent = LeagueOpponent(algo, env.spec, learner_cfg.seed, weights=lambda w=meta.weights(): w,
                                      params_of=lambda name: meta.players[int(name[1:])],
                                      report=lambda name, score, scores=scores: scores.append(score),
                                      act=functools.partial(opponent_act, algo))
            env.opponent = opponent
            params = learner.policy_params()
            opponent.set_current({"net": params, "greedy": np.float32(0)}, 0)  # never drawn (no weight)
            collector = Collector(learner_cfg, env, algo)
            try:
                while learner.version < br_cfg.num_updates:
                    batch = collector.collect(params, learner.version, deadline)
                    if batch is None:
                        result.stopped_by = "timeout"
                        break
                    metrics = jax.device_get(learner.step(batch.traj))
                    compiled = compiled or (learner._update, learner._batch_shardings)
                    params = jax.block_until_ready(learner.policy_params())
                    updates += 1
                    if learner.version % cfg.log.log_every == 0 or learner.version == br_cfg.num_updates:
                        record = records.record(updates, env_steps + batch.env_steps, batch.episodes, metrics,
                                                iteration=iteration + 1, br_update=learner.version,
                                                br_score=float(np.mean(scores)) if scores else float("nan"))
                        logger.write(record)
                        result.metrics.append(record)
            finally:
                env.close()
            env_steps += collector.env_steps
            br_score = float(np.mean(scores)) if scores else float("nan")
            meta.join(params, greedy=p.greedy)
        result.env_steps = env_steps
        result.state = learner.state
        if cfg.checkpoint.final:  # the last best response's train state
            ckpt = Checkpointer(run_dir / "checkpoints", keep=cfg.checkpoint.keep)
            ckpt.save(learner.version, learner.state,
                      meta={"version": learner.version, "policy_index": len(meta.tables) - 1})
            ckpt.close()
    finally:
        logger.close()
        meta.close(f"{cfg.name}/{cfg.trial}")
    return result
