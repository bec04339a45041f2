"""Population-based training settings (``Experiment.pbt``), read by ``srljax.loops.population``.

    python -m launch.local configs/cartpole_pbt.py                       # 4 members, two start at lr 1e-6
    python -m launch.local configs/cartpole_pbt.py pbt.ready_updates=0    # the same members, no exploit

Kept apart from ``srljax.config``, which imports ``PBTConfig`` and adds ``pbt_problems`` to its checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class PBTConfig:
    """A population of policies trained side by side (Jaderberg et al. 2017), see ``srljax/loops/population.py``."""

    population: int = 0
    """members (K), each a policy with its own train state, envs and learning rate; 0: no population (one
    policy, the ordinary loop). ``layout.mode=single``: members train in turn in one process (``srljax/loops/population.py``);
    ``distributed``: a trainer per member, ``layout.num_actors / population`` actors each and a population
    manager (``srljax/system/managers/population_manager.py``)."""
    ready_updates: int = 10
    """every N updates (of every member) the members are evaluated (``eval.episodes`` on the fixed-seed
    eval envs) and ranked; the bottom ``quantile`` copies a top member and perturbs its learning rate.
    0: never (the members train independently: the control arm)."""
    quantile: float = 0.25
    """the fraction of the population that exploits (the bottom) and that is copied from (the top);
    ``floor(quantile x population)`` must be between 1 and half the population."""
    perturb_factors: tuple[float, ...] = (0.8, 1.2)
    """explore: the copied learning rate times one of these, chosen at random."""
    resample_probability: float = 0.0
    """explore: with this probability resample the learning rate log-uniformly from ``lr_range`` instead."""
    lr_range: tuple[float, ...] = (1e-5, 1e-2)
    """(low, high): learning rates stay inside it (and are resampled from it)."""
    member_lr: tuple[float, ...] = ()
    """each member's starting learning rate; (): ``trainer.lr`` for every member."""
    seed: int = 0
    """seed of the exploit/explore choices (which top member is copied, which factor or resampled value)."""

    @property
    def enabled(self) -> bool:
        return self.population > 1

    @property
    def num_exploit(self) -> int:
        """Members replaced at each ready step (and members copied from): ``floor(quantile x population)``."""
        return math.floor(self.quantile * self.population + 1e-9)


def pbt_problems(cfg: Any) -> list[str]:
    """Every problem with ``cfg.pbt`` (one line each, naming the key, the arithmetic and the fix)."""
    p = cfg.pbt
    out: list[str] = []
    if p.population < 0:
        out.append(f"pbt.population={p.population} must be >= 0 (0: no population)")
    if not p.enabled:
        return out
    if cfg.layout.mode == "distributed":
        out += population_layout_problems(cfg)
    if getattr(cfg.algo, "name", "") != "ppo":
        out.append(f"pbt.population={p.population} needs algo=ppo (its learning rate lives in the optimiser state); "
                   f"got algo={getattr(cfg.algo, 'name', type(cfg.algo).__name__)}")
    if p.ready_updates < 0:
        out.append(f"pbt.ready_updates={p.ready_updates} must be >= 0 (0: never exploit)")
    n = p.num_exploit
    if n < 1:
        out.append(f"pbt.quantile={p.quantile} of pbt.population={p.population} selects nobody "
                   f"(floor({p.quantile} x {p.population}) = 0): raise pbt.quantile to at least {1 / p.population:.3g}")
    elif 2 * n > p.population:
        out.append(f"pbt.quantile={p.quantile} of pbt.population={p.population} selects {n} members for the bottom "
                   f"and {n} for the top, more than the population: use pbt.quantile <= 0.5")
    if p.member_lr and len(p.member_lr) != p.population:
        out.append(f"pbt.member_lr has {len(p.member_lr)} learning rates for pbt.population={p.population} members: "
                   "give one per member, or () for trainer.lr")
    if any(x <= 0 for x in p.member_lr):
        out.append(f"pbt.member_lr={p.member_lr}: learning rates must be > 0")
    if not p.perturb_factors or any(x <= 0 for x in p.perturb_factors):
        out.append(f"pbt.perturb_factors={p.perturb_factors} must be one or more numbers > 0")
    if len(p.lr_range) != 2 or not 0 < p.lr_range[0] <= p.lr_range[1]:
        out.append(f"pbt.lr_range={p.lr_range} must be (low, high) with 0 < low <= high")
    if not 0.0 <= p.resample_probability <= 1.0:
        out.append(f"pbt.resample_probability={p.resample_probability} must be in [0, 1]")
    if cfg.eval.episodes < 1:
        out.append("pbt ranks members by evaluation: eval.episodes must be >= 1")
    if cfg.eval.every_updates or not cfg.eval.final or not cfg.eval.keep_best:
        out.append("a population is evaluated every pbt.ready_updates and at the end, and keeps the best member's "
                   "final train state: leave eval.every_updates=0, eval.final and eval.keep_best at their defaults "
                   "(eval.episodes, num_envs, seed and deterministic apply)")
    if cfg.checkpoint.every_updates:
        out.append(f"checkpoint.every_updates={cfg.checkpoint.every_updates}: a population writes only the best "
                   "member's final checkpoint (checkpoint.final); set checkpoint.every_updates=0")
    if cfg.trainer.overlap_collection:
        out.append("trainer.overlap_collection=true is not built for a population (members collect in turn): drop it")
    return out


def population_layout_problems(cfg: Any) -> list[str]:
    """What a distributed population's layout cannot host (``srljax/system/managers/population_manager.py``)."""
    return member_layout_problems(cfg, cfg.pbt.population, f"pbt.population={cfg.pbt.population}")


def member_layout_problems(cfg: Any, members: int, what: str) -> list[str]:
    """What a distributed population's or league's layout cannot host: one trainer per member,
    ``layout.num_actors / members`` inline actors per member, no buffers (``what`` names the members' key)."""
    lay = cfg.layout
    out: list[str] = []
    if lay.num_actors < members or lay.num_actors % members:
        out.append(f"{what} needs layout.num_actors to be a multiple of {members} (each member "
                   f"gets an equal share of the actors) but layout.num_actors={lay.num_actors}: set "
                   f"layout.num_actors={members * max(1, -(-lay.num_actors // members))}")
    if lay.inference != "inline":
        out.append(f"layout.inference={lay.inference}: a distributed population acts inline (policy workers per "
                   "member are not built): set layout.inference=inline")
    if lay.num_buffer_workers:
        out.append(f"layout.num_buffer_workers={lay.num_buffer_workers}: a distributed population's actors send "
                   "samples straight to their member's trainer: set layout.num_buffer_workers=0")
    if cfg.trainer.num_hosts != 1:
        out.append(f"trainer.num_hosts={cfg.trainer.num_hosts}: a population member's trainer is one process "
                   "(multi-host trainer groups per member are not built): set trainer.num_hosts=1")
    return out


MEMBERS_DIR = "members"


def member_dir(cfg: Any, member: int, run_dir: Path | None = None) -> Path:
    """``RUN_DIR/members/<member>``: a population's or league's member's folder (metrics, checkpoints);
    ``run_dir``: the trial's folder where it is now (default ``cfg.run_dir``, as launched)."""
    return Path(cfg.run_dir if run_dir is None else run_dir) / MEMBERS_DIR / str(member)


def member_count(cfg: Any) -> int:
    """Members trained side by side, each with its own trainer in a distributed layout: a PBT population's
    (``pbt.population``) or a league's (``selfplay.league``); 0 for one policy."""
    if cfg.pbt.enabled:
        return cfg.pbt.population
    selfplay = getattr(cfg, "selfplay", None)
    return len(selfplay.league) if selfplay is not None and selfplay.enabled else 0


def member_lr(cfg: Any, member: int) -> float:
    """Member ``member``'s starting learning rate: ``pbt.member_lr[member]``, else ``trainer.lr`` (both layouts)."""
    return float(cfg.pbt.member_lr[member]) if cfg.pbt.member_lr else float(cfg.trainer.lr)
