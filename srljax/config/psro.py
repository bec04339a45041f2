"""PSRO settings (``Experiment.psro``), read by ``srljax/loops/psro.py`` and, as a worker graph, by
``srljax/system/managers/psro_manager.py``.

    python -m launch.local configs/kuhn_psro.py                              # Nash meta-solver
    python -m launch.local configs/kuhn_psro.py psro.solver=prd              # projected replicator dynamics
    python -m launch.local configs/kuhn_psro.py layout.mode=distributed layout.num_actors=2   # the worker graph

Kept apart from ``srljax.config``, which imports ``PSROConfig`` and adds ``psro_problems`` to its checks.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from srljax.config.selfplay import OPENSPIEL_FACTORY

SOLVERS = ("nash", "uniform", "prd", "fictitious_play")  # srljax/population/meta_solvers.py


@dataclass(frozen=True)
class PSROConfig:
    """Policy-Space Response Oracles (Lanctot et al. 2017) on a small two-player zero-sum OpenSpiel game: a population
    of policies, a meta-strategy over them from their exact payoff matrix, and each iteration a new policy trained
    by the algorithm (``algo``) as a best response to that meta-strategy: in one process (``srljax/loops/psro.py``)
    or as a worker graph (``layout.mode=distributed``: ``srljax/system/managers/psro_manager.py``)."""

    enabled: bool = False
    iterations: int = 10
    """best responses trained, one per iteration; ``total_env_steps`` is split evenly among them (the learning
    rate anneals over each one's share with ``trainer.anneal_lr``)."""
    solver: Literal["nash", "uniform", "prd", "fictitious_play"] = "nash"
    """the meta-solver (``srljax/population/meta_solvers.py``): ``nash`` (a linear program: exact for the
    two-player zero-sum meta-game), ``uniform`` (fictitious self-play), ``prd`` (projected replicator dynamics) or
    ``fictitious_play``."""
    solver_iterations: int = 20_000
    """rounds of the iterative solvers (``prd``, ``fictitious_play``)."""
    greedy: bool = True
    """each best response joins the population as its greedy policy (the most probable action at every information
    state; an exact best response is pure) and acts so as an opponent; False: as the sampling policy it trained."""


def br_config(cfg: Any) -> Any:
    """One best response's experiment: ``total_env_steps / psro.iterations`` (its updates, its lr annealing)."""
    return dataclasses.replace(cfg, total_env_steps=cfg.total_env_steps // cfg.psro.iterations)


@dataclasses.dataclass(frozen=True)
class GraphSchedule:
    """The graph's one trainer trains every best response in turn, its params versions numbered on: best response
    ``k`` (0-based) starts from a fresh network published as version ``start(k) = k (U + 1)`` (0 for the first) and
    ends at ``end(k) = start(k) + U`` after its ``U`` updates; the fresh start is a version of its own, so the
    trainer drops every sample acted before it and the actors see the new network at once."""

    iterations: int
    updates: int  # U: each best response's updates

    @classmethod
    def of(cls, cfg: Any) -> GraphSchedule:
        return cls(cfg.psro.iterations, br_config(cfg).num_updates)

    def start(self, k: int) -> int:
        return k * (self.updates + 1)

    def end(self, k: int) -> int:
        return self.start(k) + self.updates

    @property
    def last(self) -> int:
        """The trainer's last version (its ``num_updates``)."""
        return self.end(self.iterations - 1)

    def response(self, version: int) -> int:
        """The best response a params version belongs to."""
        return min(version // (self.updates + 1), self.iterations - 1)


def psro_graph(cfg: Any) -> bool:
    """PSRO as a worker graph: one trainer numbers its versions on through every best response (``GraphSchedule``)."""
    return bool(cfg.psro.enabled and cfg.layout.mode == "distributed" and cfg.psro.iterations >= 1)


def last_params_version(cfg: Any) -> int:
    """The highest params version the trial's trainer publishes (a follower refuses any above it), which is also the
    last ``update`` of its ``metrics.jsonl``: ``num_updates``, or PSRO's graph trainer's last (``GraphSchedule.last``:
    a version per best response's fresh start too)."""
    return GraphSchedule.of(cfg).last if psro_graph(cfg) else cfg.num_updates


def ended_by_metrics(cfg: Any, update: int, env_steps: int) -> bool:
    """Whether a trainer's metrics line at ``update`` / ``env_steps`` is its trial's last: the last version, or
    ``total_env_steps`` reached (not in PSRO's graph: its ``env_steps`` count the samples stepped, and those the
    trainer drops between best responses pass ``total_env_steps`` before the last best response ends)."""
    return update >= last_params_version(cfg) or (not psro_graph(cfg) and env_steps >= cfg.total_env_steps)


def graph_problems(cfg: Any) -> list[str]:
    """PSRO as a worker graph (``layout.mode=distributed``): one trainer trains the best responses in turn, its actors
    act inline against the population manager's opponents."""
    lay, out = cfg.layout, []
    if lay.inference != "inline":
        out.append(f"layout.inference={lay.inference} with psro.enabled=true: PSRO's actors act inline (the "
                   "opponents play inside their envs beside the best response): set layout.inference=inline")
    if lay.num_buffer_workers:
        out.append(f"layout.num_buffer_workers={lay.num_buffer_workers} with psro.enabled=true: PSRO's actors send "
                   "samples straight to the trainer: set layout.num_buffer_workers=0")
    if cfg.trainer.num_hosts != 1:
        out.append(f"trainer.num_hosts={cfg.trainer.num_hosts} with psro.enabled=true: PSRO's trainer is one process "
                   "(it starts each best response from a fresh network between updates): set trainer.num_hosts=1")
    if lay.deterministic:
        out.append("layout.deterministic=true with psro.enabled=true: each best response drops the samples acted "
                   "before it, which a lockstep batch cannot: set layout.deterministic=false")
    return out


def psro_problems(cfg: Any) -> list[str]:
    p = cfg.psro
    if not p.enabled:
        return []
    out = []
    if cfg.env.factory != OPENSPIEL_FACTORY:
        out.append(f"psro.enabled=true needs a two-player zero-sum game: env.factory={OPENSPIEL_FACTORY} with "
                   f"env.options.game=kuhn_poker or leduc_poker (this env: {cfg.env.factory or cfg.env.id!r})")
    if cfg.layout.mode == "distributed":
        out += graph_problems(cfg)
    if getattr(cfg.algo, "consumes", "segments") != "segments" or getattr(cfg.algo, "lstm_size", 0):
        out.append("psro.enabled=true takes a feed-forward actor-critic algorithm (algo=ppo or impala, "
                   "algo.lstm_size=0): each policy is tabulated from its action probabilities at every information "
                   "state")
    if cfg.selfplay.enabled or cfg.pbt.enabled or cfg.policies.enabled:
        out.append("psro.enabled=true with selfplay.enabled, pbt.population > 1 or policies: PSRO's population is its "
                   "own; drop the others")
    if cfg.trainer.overlap_collection:
        out.append("psro.enabled=true with trainer.overlap_collection=true: the opponents change between best "
                   "responses while a collector thread plays; drop the override")
    if cfg.eval.every_updates:
        out.append(f"eval.every_updates={cfg.eval.every_updates} with psro.enabled=true: PSRO is judged by the exact "
                   "exploitability of its meta-strategy every iteration (psro/psro.jsonl); set eval.every_updates=0")
    if cfg.checkpoint.every_updates:
        out.append(f"checkpoint.every_updates={cfg.checkpoint.every_updates} with psro.enabled=true: PSRO writes each "
                   "policy's params (psro/policies/) and, with checkpoint.final, the last best response's train "
                   "state; set checkpoint.every_updates=0")
    if p.iterations < 1 or p.solver_iterations < 1:
        out.append(f"psro.iterations={p.iterations} and psro.solver_iterations={p.solver_iterations} must be >= 1")
    elif cfg.total_env_steps // p.iterations < cfg.env_steps_per_update:
        out.append(f"total_env_steps={cfg.total_env_steps} over psro.iterations={p.iterations} is "
                   f"{cfg.total_env_steps // p.iterations} env steps per best response, less than one update's "
                   f"{cfg.env_steps_per_update}; raise total_env_steps to at least "
                   f"{p.iterations * cfg.env_steps_per_update}")
    return out
