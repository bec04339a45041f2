"""PSRO's meta-game, shared by the single-process loop (``srljax/loops/psro.py``) and the worker graph's population
manager (``srljax/system/managers/psro_manager.py``): the population of frozen policies, their exact payoff matrix,
the meta-strategy, the exploitability, and the files PSRO writes.

    meta = MetaGame(cfg, algo, tree, run_dir)       # opens RUN_DIR/psro/psro.jsonl for appending
    meta.join(params, greedy=False)                  # policy 0: psro/policies/p0.msgpack, its table
    line = meta.line(iteration=0, env_steps=0, updates=0, br_score=nan, wall_s=0.0)   # payoff, sigma, exploitability
    meta.weights()                                   # {"p0": 1.0}: the opponents a best response trains against
    meta.close()                                     # psro/exploitability.png

``br_config(cfg)`` is one best response's experiment (``total_env_steps / psro.iterations``: its updates and its
learning-rate schedule); ``GraphSchedule`` numbers the graph's trainer's params versions by best response.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np

from srljax.config.psro import GraphSchedule, br_config  # noqa: F401 - the meta-game's schedule, named here too
from srljax.population.game_tree import GameTree
from srljax.population.meta_solvers import exploitability_in_meta_game, meta_strategy

PSRO_DIR = "psro"
TABLE = "table.json"  # the worker graph: the meta-strategy the actors draw opponents from (``psro_actor.py``)
MAX_NODES = 1_000_000  # histories walked for the exact payoffs and exploitability
NO_RESTART = ("PSRO's {who} was lost and restarted: carrying the meta-game on after a restart is not built (the "
              "population is in psro/policies/ and psro/psro.jsonl); start a new trial")


def policy_name(i: int) -> str:
    return f"p{i}"


def policy_file(i: int) -> str:
    """Policy ``i``'s params file, relative to ``RUN_DIR/psro``."""
    return f"policies/{policy_name(i)}.msgpack"


def opponent_act(algo: Any, pp: Any, obs: Any, state: Any, first: Any, key: Any) -> tuple[Any, dict, Any]:
    """``algo.act``'s signature for a population member as an opponent: ``pp = {"net": params, "greedy": 0 or 1}``
    acts by sampling or, greedy, by the mode (``act_deterministic``)."""
    import jax.numpy as jnp

    sampled = algo.act(pp["net"], obs, state, first, key)[0]
    mode = algo.act_deterministic(pp["net"], obs, state, first, key)[0]
    return jnp.where(pp["greedy"] > 0, mode, sampled), {}, state


def game_tree(env: Any) -> GameTree:
    """The env's game as a ``GameTree`` whose information states are observed as the env shows them."""
    from envs.openspiel import observe

    game = env.game
    return GameTree(game, lambda state, player: observe(game, state, player, env.planes, env.info_state),
                    max_nodes=MAX_NODES)


def read_lines(run_dir: Path) -> list[dict[str, Any]]:
    """``psro/psro.jsonl``'s lines (the PSRO iterations so far)."""
    path = Path(run_dir) / PSRO_DIR / "psro.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


class MetaGame:
    """The population and its meta-game (see the module docstring). ``players[i]``: policy ``i`` as an opponent
    acts (``{"net": params, "greedy": 0 or 1}``, ``opponent_act``)."""

    def __init__(self, cfg: Any, algo: Any, tree: GameTree, run_dir: Path):
        import jax

        if algo.action_probs is None:
            raise ValueError(f"psro.enabled=true: algo={getattr(cfg.algo, 'name', type(cfg.algo).__name__)} gives no "
                             "action probabilities (Algorithm.action_probs) to tabulate its policy from; use algo=ppo "
                             "or impala with algo.lstm_size=0")
        self.cfg, self.p, self.tree = cfg, cfg.psro, tree
        self.probs = jax.jit(algo.action_probs)
        self.dir = Path(run_dir) / PSRO_DIR
        (self.dir / "policies").mkdir(parents=True, exist_ok=True)
        self.population: list[Any] = []
        self.tables: list[np.ndarray] = []
        self.players: list[dict[str, Any]] = []
        self.sigma = np.ones(0)
        self.curve: list[tuple[float, float]] = []
        self.lines = (self.dir / "psro.jsonl").open("a")

    def table_of(self, params: Any) -> np.ndarray:
        """A policy's action probabilities at every information state (a ``GameTree`` table)."""
        return self.tree.table(np.asarray(self.probs(params, self.tree.obs)))

    def join(self, params: Any, greedy: bool = False) -> int:
        """Freeze ``params`` into the population (its file, its table; greedy: the mode at every information state);
        its index."""
        import flax.serialization
        import jax

        host = jax.device_get(params)
        i = len(self.population)
        path = self.dir / policy_file(i)
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(flax.serialization.to_bytes(host))
        os.replace(tmp, path)
        self.population.append(host)
        table = self.table_of(host)
        self.tables.append(np.eye(self.tree.num_actions)[np.argmax(table, axis=1)] if greedy else table)
        self.players.append({"net": host, "greedy": np.float32(greedy)})
        return i

    def score_against_meta(self, params: Any) -> float:
        """``params``' exact mean score (both seats, sampling) against the current meta-strategy drawn per game."""
        mixed = self.tree.mixture(np.stack(self.tables[: len(self.sigma)]), self.sigma)
        return float(self.tree.payoff(np.stack([mixed, self.table_of(params)]))[1, 0])

    def line(self, iteration: int, env_steps: int, updates: int, br_score: float, wall_s: float,
             **extra: Any) -> dict[str, Any]:
        """The payoff matrix, meta-strategy and exploitability of the population now: one ``psro.jsonl`` line
        (written and returned); ``self.sigma`` is the new meta-strategy."""
        payoff = self.tree.payoff(np.stack(self.tables))
        sigma = meta_strategy(payoff, self.p.solver, self.p.solver_iterations)
        exploitability = self.tree.exploitability(self.tree.mixture(np.stack(self.tables), sigma))
        self.sigma = sigma
        line = {"iteration": iteration, "policies": len(self.tables), "env_steps": env_steps, "updates": updates,
                "exploitability": exploitability, "solver": self.p.solver,
                "meta_strategy": [round(float(s), 5) for s in sigma],
                "meta_exploitability": exploitability_in_meta_game(payoff, sigma), "br_score": br_score,
                "payoff": [[round(float(x), 6) for x in row] for row in payoff], "wall_s": wall_s, **extra}
        self.lines.write(json.dumps({k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                                     for k, v in line.items()}) + "\n")
        self.lines.flush()
        self.curve.append((env_steps, exploitability))
        return line

    def weights(self) -> dict[str, float]:
        """The meta-strategy's policies with their probabilities (those above 0): the opponents' draw."""
        return {policy_name(i): float(s) for i, s in enumerate(self.sigma) if s > 0}

    def write_table(self, iteration: int) -> None:
        """``psro/table.json`` for the graph's actors: best response ``iteration``'s opponents (the meta-strategy's
        weights, each policy's file and whether it plays greedily)."""
        table = {"iteration": iteration, "weights": self.weights(), "time": time.time(),
                 "files": {policy_name(i): policy_file(i) for i in range(len(self.population))},
                 "greedy": {policy_name(i): float(pl["greedy"]) for i, pl in enumerate(self.players)}}
        path = self.dir / TABLE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(table))
        os.replace(tmp, path)

    def close(self, title: str) -> None:
        from srljax.selfplay.opponents import plot_ratings

        self.lines.close()
        if len(self.curve) > 1:
            plot_ratings(self.dir / "exploitability.png", {self.p.solver: self.curve}, "env steps",
                         "exploitability (NashConv / 2)", f"{title}: PSRO on {self.tree.game}")
