"""A sweep file and its trials: ``Sweep`` (configs x grid x seeds) expanded into named ``TrialSpec``s.

A sweep file is plain Python exposing ``sweep() -> Sweep``::

    from launch.sweep import Reference, Sweep

    def sweep() -> Sweep:
        return Sweep(
            configs=["configs/mujoco_ppo.py"],                  # config files, as launch.local takes them
            grid={"env.id": ["HalfCheetah-v4", "Hopper-v4"]},   # every combination of these overrides
            seeds=[1, 2, 3],
            overrides=["total_env_steps=1000000"],             # the same for every trial
            reference=Reference("CleanRL", "https://...", {"Hopper-v4": 2382.86}),
        )

A sweep may instead name a search space (``Sweep(search=Search(...))``, ``launch/sweep/search.py``): Optuna picks
each trial's values (TPE or random) within a budget of trials and prunes the ones that fall behind::

    search=Search(space={"trainer.lr": LogUniform(1e-4, 3e-3), "algo.clip_coef": Choice([0.1, 0.2, 0.3]),
                         "trainer.update_epochs": IntRange(2, 8)}, trials=24, sampler="tpe", pruner="median")

Trials run in ``runs/<name>/<trial>/`` (``name`` defaults to the sweep file's stem). A trial's
name is its config's stem, its grid point and its seed, ``mujoco_ppo__env.id=Hopper-v4__seed=1``:
the same sweep always names the same folders, which is how a second launch finds the trials the
first one finished.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from srljax.config import ConfigError, Promise, load_promise
from srljax.objects import FileCallError, call_file

MAX_NAME = 120  # longer trial names keep their start and end with a hash of the whole


@dataclass(frozen=True)
class Reference:
    """Published final returns to compare against, keyed by env id (e.g. CleanRL's benchmark table)."""

    title: str
    """column heading in ``results.md``, e.g. ``"CleanRL ppo_continuous_action"``."""
    source: str
    """where the numbers come from (a URL and what they are), printed under the table."""
    returns: Mapping[str, float]
    """env id -> published final return."""
    env_steps: int = 0
    """the budget those returns were reached at (e.g. 1,000,000); 0: unknown. A sweep with another budget is
    compared with that said: the plot draws the reference as a point at its budget (a dashed line to it), and the
    table's ratio names both budgets."""


@dataclass(frozen=True)
class LogUniform:
    """A float drawn on a log scale between ``low`` and ``high`` (both > 0), e.g. a learning rate."""

    low: float
    high: float


@dataclass(frozen=True)
class Uniform:
    """A float drawn uniformly between ``low`` and ``high``."""

    low: float
    high: float


@dataclass(frozen=True)
class IntRange:
    """An integer from ``low`` to ``high`` inclusive (``log``: on a log scale, ``low`` >= 1)."""

    low: int
    high: int
    log: bool = False


@dataclass(frozen=True)
class Choice:
    """One of ``values`` (numbers, strings or booleans, written as on the command line)."""

    values: Sequence[Any]


SPACE_TYPES = (LogUniform, Uniform, IntRange, Choice)
SAMPLERS = ("tpe", "random")
PRUNERS = ("median", "halving", "none")


@dataclass(frozen=True)
class Search:
    """An Optuna search over ``space`` instead of a grid (``launch/sweep/search.py``)."""

    space: Mapping[str, Any]
    """``{"dotted.key": LogUniform(..) | Uniform(..) | IntRange(..) | Choice([...])}``."""
    trials: int = 24
    """the budget: trials started in all (finished, pruned and failed ones count)."""
    sampler: str = "tpe"
    """``tpe`` (Optuna's tree-structured Parzen estimator; random for the first ``startup_trials``) or ``random``."""
    pruner: str = "median"
    """``median`` (stop a trial whose metric is below the median of earlier trials' at the same env step),
    ``halving`` (successive halving, rungs from ``warmup_env_steps``) or ``none``."""
    metric: str = "episode_return"
    """the ``metrics.jsonl`` key the search maximises: each line's value is reported to the pruner at its
    ``env_steps``; a finished trial's value is its last line's."""
    direction: str = "maximize"
    """``maximize`` or ``minimize`` (e.g. a loss)."""
    startup_trials: int = 5
    """trials the sampler draws at random, and the pruner lets finish, before either uses what they found."""
    warmup_env_steps: int = 0
    """no trial is pruned before this many env steps (the successive-halving pruner's first rung)."""
    seed: int = 0
    """the sampler's seed."""


@dataclass(frozen=True)
class Sweep:
    """Every config x every grid point x every seed is one trial."""

    configs: Sequence[str]
    """config files (``experiment() -> Experiment``), paths as ``python -m launch.local`` takes them."""
    seeds: Sequence[int] = (1,)
    """one trial per seed (the override ``seed=N``)."""
    grid: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    """``{"dotted.key": [value, ...]}``: the cartesian product of these overrides; each value is written as on
    the command line (``True`` -> ``true``)."""
    overrides: Sequence[str] = ()
    """``dotted.key=value`` applied to every trial, before the grid point and the seed."""
    name: str = ""
    """the experiment folder ``runs/<name>/``; "": the sweep file's stem."""
    reference: Reference | None = None
    """published numbers shown beside each env's row in ``results.md``."""
    search: Search | None = None
    """an Optuna search (``Search``) over the config of ``configs`` (one) at ``seeds`` (one) instead of ``grid``."""
    gate: bool = False
    """a learning gate (``launch/sweep/gate.py``): each config's ``PROMISE`` gives its seeds and overrides (``seeds``
    and ``grid`` are not used), every launch runs anew, and the sweep exits 1 naming each promise that breaks."""


@dataclass(frozen=True)
class TrialSpec:
    """One trial of a sweep: what ``python -m launch.local CONFIG -e SWEEP -f NAME OVERRIDES`` runs."""

    name: str
    config: str
    point: tuple[tuple[str, str], ...]
    """its grid point: ``(("env.id", "Hopper-v4"),)``."""
    seed: int
    overrides: tuple[str, ...]
    """the sweep's overrides, then the grid point, then ``seed=N`` (later ones win)."""

    @property
    def group(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Its row in the report: the config and grid point, whatever the seed."""
        return self.config, self.point


def value_text(value: Any) -> str:
    """A grid value as an override's right-hand side: ``True`` -> ``true``, ``(64, 64)`` -> ``64,64``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (tuple, list)):
        return ",".join(value_text(v) for v in value)
    return str(value)


def trial_name(config: str, point: Sequence[tuple[str, str]], seed: int) -> str:
    """``mujoco_ppo__env.id=Hopper-v4__seed=1``: folder-safe (anything but ``[A-Za-z0-9._=+-]`` becomes
    ``_``) and at most ``MAX_NAME`` characters (a long one keeps its ends and a hash of the whole)."""
    full = "__".join([Path(config).stem, *(f"{k}={v}" for k, v in point), f"seed={seed}"])
    name = re.sub(r"[^A-Za-z0-9._=+-]", "_", full).lstrip(".")
    if len(name) > MAX_NAME:
        digest = hashlib.sha1(full.encode()).hexdigest()[:8]
        name = f"{name[:MAX_NAME // 2]}-{digest}-{name[-(MAX_NAME // 2 - 10):]}"
    return name


@functools.cache
def promise_of(config: str) -> Promise:
    """The promise of a config file in a gate sweep (its file imported once per launch, whatever asks: tiers,
    trials, busy loops, verdicts); ConfigError when it declares none."""
    promise = load_promise(config)
    if promise is None:
        raise ConfigError([f"{config} declares no PROMISE; a gate sweep lists only configs that do "
                           "(launch.sweep.gate.promised_configs())"])
    return promise


def expand(sweep: Sweep) -> list[TrialSpec]:
    """Every trial, configs outermost, then grid points (keys in the order given), then seeds; a gate's trials
    are each config's promise: its seeds, its overrides after the sweep's."""
    if sweep.gate:
        out = []
        for config in sweep.configs:
            promise = promise_of(config)
            for seed in promise.seeds:
                overrides = (*sweep.overrides, *promise.overrides, f"seed={seed}")
                out.append(TrialSpec(trial_name(config, (), seed), config, (), seed, overrides))
        return out
    keys = list(sweep.grid)
    points = [tuple(zip(keys, map(value_text, values))) for values in itertools.product(*sweep.grid.values())]
    out = []
    for config in sweep.configs:
        for point in points:
            for seed in sweep.seeds:
                overrides = (*sweep.overrides, *(f"{k}={v}" for k, v in point), f"seed={seed}")
                out.append(TrialSpec(trial_name(config, point, seed), config, point, seed, overrides))
    return out


def shape(sweep: Sweep, num_trials: int) -> str:
    """``2 config(s) x 3 grid point(s) x 2 seed(s)``, or for a gate ``17 promises over their seeds``."""
    if sweep.gate:
        return f"{len(sweep.configs)} promise(s) over their seeds"
    grid = num_trials // max(1, len(sweep.configs) * len(sweep.seeds))
    return f"{len(sweep.configs)} config(s) x {grid} grid point(s) x {len(sweep.seeds)} seed(s)"


def shape_problems(sweep: Sweep) -> list[str]:
    """What is wrong with the ``Sweep`` itself (before any config is loaded)."""
    out = []
    if isinstance(sweep.configs, str) or not sweep.configs:
        out.append("Sweep.configs must be a non-empty list of config files, e.g. ['configs/cartpole_ppo.py']")
    if isinstance(sweep.seeds, (str, int)) or not sweep.seeds or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in sweep.seeds):
        out.append(f"Sweep.seeds={sweep.seeds!r} must be a non-empty list of integers >= 0")
    elif len(set(sweep.seeds)) != len(sweep.seeds):
        out.append(f"Sweep.seeds={list(sweep.seeds)} lists a seed twice")
    if not isinstance(sweep.grid, Mapping):
        out.append(f"Sweep.grid must be a dict {{'dotted.key': [values]}}, got {type(sweep.grid).__name__}")
    else:
        for key, values in sweep.grid.items():
            if key == "seed":
                out.append("Sweep.grid names 'seed': list the seeds in Sweep.seeds instead")
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
                out.append(f"Sweep.grid[{key!r}]={values!r} must be a non-empty list of values")
            elif len({value_text(v) for v in values}) != len(values):
                out.append(f"Sweep.grid[{key!r}] lists a value twice")
    if sweep.gate and sweep.grid:
        out.append("Sweep.grid is not used by a gate sweep (each config's PROMISE sets its trials): leave it out")
    if sweep.search is not None:
        out += search_shape_problems(sweep)
    if isinstance(sweep.overrides, str):
        out.append(f"Sweep.overrides={sweep.overrides!r} must be a list of 'dotted.key=value' strings")
    if sweep.name and ("/" in sweep.name or sweep.name.startswith(".")):
        out.append(f"Sweep.name={sweep.name!r} must be a folder name without '/'")
    ref = sweep.reference
    if ref is not None and not (isinstance(ref, Reference) and all(
            isinstance(v, (int, float)) for v in ref.returns.values())):
        out.append("Sweep.reference must be Reference(title, source, {env_id: number})")
    return out


def search_shape_problems(sweep: Sweep) -> list[str]:
    """What is wrong with ``sweep.search`` itself (no config loaded, no optuna imported)."""
    s, out = sweep.search, []
    if not isinstance(s, Search):
        return ["Sweep.search must be Search(space={...}, trials=N) (from launch.sweep import Search)"]
    if sweep.gate or sweep.grid:
        out.append("Sweep.search replaces Sweep.grid (and is no gate): put the keys to tune in Search.space")
    if len(sweep.configs) != 1 or len(sweep.seeds) != 1:
        out.append("a search tunes one config at one seed: give Sweep.configs and Sweep.seeds one item each")
    if not isinstance(s.space, Mapping) or not s.space:
        out.append("Search.space must be a non-empty dict {'dotted.key': LogUniform(..) | Uniform(..) | "
                   "IntRange(..) | Choice([...])}")
    else:
        for key, dist in s.space.items():
            where = f"Search.space[{key!r}]={dist!r}"
            if key == "seed":
                out.append(f"{where}: the seed is not tuned; set Sweep.seeds")
            elif not isinstance(dist, SPACE_TYPES):
                out.append(f"{where} must be LogUniform, Uniform, IntRange or Choice (from launch.sweep)")
            elif isinstance(dist, Choice):
                if isinstance(dist.values, (str, bytes)) or not dist.values:
                    out.append(f"{where}: Choice takes a non-empty list of values")
                elif len({value_text(v) for v in dist.values}) != len(dist.values):
                    out.append(f"{where} lists a value twice")
            elif not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (dist.low, dist.high)):
                out.append(f"{where}: low and high must be numbers")
            elif not dist.low < dist.high:
                out.append(f"{where}: low must be below high")
            elif (isinstance(dist, LogUniform) or (isinstance(dist, IntRange) and dist.log)) and dist.low <= 0:
                out.append(f"{where}: a log scale needs low > 0")
            elif isinstance(dist, IntRange) and not (isinstance(dist.low, int) and isinstance(dist.high, int)):
                out.append(f"{where}: IntRange takes integers")
    if not isinstance(s.trials, int) or s.trials < 1:
        out.append(f"Search.trials={s.trials!r} must be an integer >= 1")
    if s.sampler not in SAMPLERS:
        out.append(f"Search.sampler={s.sampler!r}: use one of {', '.join(SAMPLERS)}")
    if s.pruner not in PRUNERS:
        out.append(f"Search.pruner={s.pruner!r}: use one of {', '.join(PRUNERS)}")
    if s.direction not in ("maximize", "minimize"):
        out.append(f"Search.direction={s.direction!r}: use maximize or minimize")
    for name in ("startup_trials", "warmup_env_steps", "seed"):
        value = getattr(s, name)
        if not isinstance(value, int) or value < 0:
            out.append(f"Search.{name}={value!r} must be an integer >= 0")
    return out


def load_sweep(path: str | Path) -> Sweep:
    """Import a sweep file and call its ``sweep()``; its name defaults to the file's stem."""
    path = Path(path)
    try:
        sweep = call_file(path, "sweep", "sweep", Sweep, "`def sweep() -> Sweep` (from launch.sweep import Sweep)",
                          "configs/sweeps/cartpole_smoke.py", "launch.sweep.Sweep")
    except FileCallError as err:
        raise ConfigError([str(err)]) from None
    if found := shape_problems(sweep):
        raise ConfigError(found)
    if not sweep.name:
        sweep = dataclasses.replace(sweep, name=path.stem)
    return sweep
