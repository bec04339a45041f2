"""PSRO settings (``Experiment.psro``), read by ``srljax/loops/psro.py``.

    python -m launch.local configs/kuhn_psro.py                              # Nash meta-solver
    python -m launch.local configs/kuhn_psro.py psro.solver=prd              # projected replicator dynamics

Kept apart from ``srljax.config``, which imports ``PSROConfig`` and adds ``psro_problems`` to its checks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from srljax.config.selfplay import OPENSPIEL_FACTORY

SOLVERS = ("nash", "uniform", "prd", "fictitious_play")  # srljax/population/meta_solvers.py


@dataclass(frozen=True)
class PSROConfig:
    """Policy-Space Response Oracles (Lanctot et al. 2017) on a small two-player zero-sum OpenSpiel game: a population
    of policies, a meta-strategy over them from their exact payoff matrix, and each iteration a new policy trained
    by the algorithm (``algo``) as a best response to that meta-strategy (``srljax/loops/psro.py``)."""

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


def psro_problems(cfg: Any) -> list[str]:
    p = cfg.psro
    if not p.enabled:
        return []
    out = []
    if cfg.env.factory != OPENSPIEL_FACTORY:
        out.append(f"psro.enabled=true needs a two-player zero-sum game: env.factory={OPENSPIEL_FACTORY} with "
                   f"env.options.game=kuhn_poker or leduc_poker (this env: {cfg.env.factory or cfg.env.id!r})")
    if cfg.layout.mode != "single":
        out.append(f"psro.enabled=true with layout.mode={cfg.layout.mode}: PSRO runs in the single-process loop only "
                   "(srljax/loops/psro.py; a worker graph's PSRO is not built); set layout.mode=single")
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
