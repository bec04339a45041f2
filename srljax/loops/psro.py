"""PSRO (Policy-Space Response Oracles, Lanctot et al. 2017) in one process: ``psro.enabled`` with ``layout.mode=single``.

    python -m launch.local configs/kuhn_psro.py                   # RUN_DIR/psro/psro.jsonl, exploitability.png
    python -m launch.local configs/leduc_psro.py psro.solver=prd  # another meta-solver
    result = train(cfg)                                           # srljax.loops.train hands PSRO here

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
above ``MAX_NODES`` histories). Not built: resuming (refused before launch) and PSRO as a worker graph.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import time
from collections import deque
from pathlib import Path
from typing import Any

import flax.serialization
import jax
import jax.numpy as jnp
import numpy as np

import envs
from envs.openspiel import observe
from srljax.config import Experiment
from srljax.learning.learner import Learner
from srljax.loops.on_policy import Collector
from srljax.loops.result import TrainResult
from srljax.population.game_tree import GameTree
from srljax.population.meta_solvers import exploitability_in_meta_game, meta_strategy
from srljax.prepare import Run, prepared
from srljax.selfplay.league_opponent import LeagueOpponent
from srljax.selfplay.opponents import plot_ratings
from srljax.storage.checkpoint import Checkpointer
from srljax.telemetry.metrics import MetricsLogger, UpdateRecords

PSRO_DIR = "psro"
MAX_NODES = 1_000_000  # histories walked for the exact payoffs and exploitability


def policy_name(i: int) -> str:
    return f"p{i}"


def opponent_act(algo: Any, pp: Any, obs: Any, state: Any, first: Any, key: Any) -> tuple[Any, dict, Any]:
    """``algo.act``'s signature for a population member as an opponent: ``pp = {"net": params, "greedy": 0 or 1}``
    acts by sampling or, greedy, by the mode (``act_deterministic``)."""
    sampled = algo.act(pp["net"], obs, state, first, key)[0]
    mode = algo.act_deterministic(pp["net"], obs, state, first, key)[0]
    return jnp.where(pp["greedy"] > 0, mode, sampled), {}, state


def game_tree(env: Any) -> GameTree:
    """The env's game as a ``GameTree`` whose information states are observed as the env shows them."""
    game = env.game
    return GameTree(game, lambda state, player: observe(game, state, player, env.planes, env.info_state),
                    max_nodes=MAX_NODES)


def train_psro(cfg: Experiment | Run, resume: bool = False) -> TrainResult:
    """Run PSRO for ``cfg.psro.iterations`` iterations in this process (see the module docstring)."""
    run = prepared(cfg, resume)  # refuses a resume (srljax.storage.run_dir.resume_problems)
    cfg, run_dir = run.cfg, run.run_dir
    p = cfg.psro
    br_cfg = dataclasses.replace(cfg, total_env_steps=cfg.total_env_steps // p.iterations)
    first_env = envs.make(cfg.env, seed=cfg.seed)
    try:
        tree = game_tree(first_env)
        spec = first_env.spec
    finally:
        first_env.close()
    learner = Learner(br_cfg, spec, checkpoints=False)
    algo = learner.algo
    if algo.action_probs is None:
        raise ValueError(f"psro.enabled=true: algo={getattr(cfg.algo, 'name', type(cfg.algo).__name__)} gives no "
                         "action probabilities (Algorithm.action_probs) to tabulate its policy from; use algo=ppo or "
                         "impala with algo.lstm_size=0")
    probs = jax.jit(algo.action_probs)
    psro_dir = run_dir / PSRO_DIR
    (psro_dir / "policies").mkdir(parents=True, exist_ok=True)
    population: list[Any] = []
    tables: list[np.ndarray] = []
    players: list[Any] = []  # each policy as an opponent acts: its params and whether it plays greedily

    def join(params: Any, greedy: bool = False) -> None:
        host = jax.device_get(params)
        path = psro_dir / "policies" / f"{policy_name(len(population))}.msgpack"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(flax.serialization.to_bytes(host))
        os.replace(tmp, path)
        population.append(host)
        table = tree.table(np.asarray(probs(host, tree.obs)))
        tables.append(np.eye(tree.num_actions)[np.argmax(table, axis=1)] if greedy else table)
        players.append({"net": host, "greedy": np.float32(greedy)})

    logger = MetricsLogger(cfg, total=cfg.total_env_steps)
    lines = (psro_dir / "psro.jsonl").open("a")
    result = TrainResult(config=cfg)
    records = UpdateRecords()
    deadline = time.time() + cfg.timeout_seconds
    start = time.time()
    env_steps = updates = 0
    br_score = float("nan")
    curve: list[tuple[float, float]] = []
    try:
        join(learner.policy_params())  # policy 0: the untrained network
        compiled = None  # one compiled update for every best response: same shapes and hyperparameters
        for iteration in range(p.iterations + 1):
            payoff = tree.payoff(np.stack(tables))
            sigma = meta_strategy(payoff, p.solver, p.solver_iterations)
            exploitability = tree.exploitability(tree.mixture(np.stack(tables), sigma))
            line = {"iteration": iteration, "policies": len(tables), "env_steps": env_steps, "updates": updates,
                    "exploitability": exploitability, "solver": p.solver,
                    "meta_strategy": [round(float(s), 5) for s in sigma],
                    "meta_exploitability": exploitability_in_meta_game(payoff, sigma), "br_score": br_score,
                    "payoff": [[round(float(x), 6) for x in row] for row in payoff], "wall_s": time.time() - start}
            lines.write(json.dumps({k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                                    for k, v in line.items()}) + "\n")
            lines.flush()
            curve.append((env_steps, exploitability))
            print(f"[{cfg.name}/{cfg.trial}] psro iteration {iteration}: {len(tables)} policies, exploitability "
                  f"{exploitability:.4f} at {env_steps:,} env steps; meta-strategy "
                  f"{[round(float(s), 3) for s in sigma]}", flush=True)
            if iteration == p.iterations or result.stopped_by == "timeout":
                break
            learner = learner if iteration == 0 else Learner(
                dataclasses.replace(br_cfg, seed=cfg.seed + iteration), spec, checkpoints=False, algo=algo)
            if compiled is not None:
                learner._update, learner._batch_shardings = compiled
            learner_cfg = dataclasses.replace(br_cfg, seed=cfg.seed + iteration)
            env = envs.make(cfg.env, seed=learner_cfg.seed)
            scores: deque[float] = deque(maxlen=1000)
            weights = {policy_name(i): float(s) for i, s in enumerate(sigma) if s > 0}
            opponent = LeagueOpponent(algo, env.spec, learner_cfg.seed, weights=lambda w=weights: w,
                                      params_of=lambda name: players[int(name[1:])],
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
            join(params, greedy=p.greedy)
        result.env_steps = env_steps
        result.state = learner.state
        if cfg.checkpoint.final:  # the last best response's train state
            ckpt = Checkpointer(run_dir / "checkpoints", keep=cfg.checkpoint.keep)
            ckpt.save(learner.version, learner.state, meta={"version": learner.version, "policy_index": len(tables) - 1})
            ckpt.close()
    finally:
        lines.close()
        logger.close()
        if len(curve) > 1:
            plot_ratings(psro_dir / "exploitability.png", {p.solver: curve}, "env steps",
                         "exploitability (NashConv / 2)", f"{cfg.name}/{cfg.trial}: PSRO on {tree.game}")
    return result


def read_lines(run_dir: Path) -> list[dict[str, Any]]:
    """``psro/psro.jsonl``'s lines (the PSRO iterations so far)."""
    path = Path(run_dir) / PSRO_DIR / "psro.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []
