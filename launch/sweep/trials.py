"""A sweep's trials resolved and checked as a whole, and where each one stands in its run folder.

    planned = resolve_trials(sweep)     # every trial's Experiment; ConfigError with every problem of the sweep
    planned[0].state                    # "new" | "done" | "partial", read from its run folder

Each trial is resolved exactly as ``python -m launch.local CONFIG -e SWEEP -f TRIAL OVERRIDES``
would resolve it (``load_file``, ``apply_overrides``, names, every check of
``srljax/prepare.py``), so a sweep that passes here does not fail at a trial's start for its config.
A message that many trials share is listed once with the trials it concerns.

A trial is ``done`` when its ``status.json`` says exit code 0 (distributed runs) or its last
``metrics.jsonl`` line reached the trial's last update or ``total_env_steps`` (the single-process
loop writes no ``status.json``); ``partial`` when its folder holds anything else; ``new`` when
the folder is missing or empty. A done trial whose ``config.json`` differs from what the sweep
would run now (in a key both have, outside ``log``, ``checkpoint`` and ``slurm``) is a problem: its
numbers would be reported under settings it did not run with.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from launch.sweep.spec import Sweep, TrialSpec, expand
from srljax.config import ConfigError, Experiment, apply_overrides, load_file, to_dict
from srljax.config.psro import ended_by_metrics, last_params_version
from srljax.prepare import CHECKS
from srljax.prepare import problems as check_problems

NEW, DONE, PARTIAL = "new", "done", "partial"
# set per launch, not by the sweep; or, like the log, checkpoint and slurm sections, without effect on the numbers
IGNORED_KEYS = frozenset({"name", "trial", "timeout_seconds", "layout.auth"})
IGNORED_SECTIONS = ("log.", "checkpoint.", "slurm.")
SHOWN_TRIALS = 3


@dataclass(frozen=True)
class Planned:
    """A trial, its resolved config and the state of its run folder (``detail`` says why)."""

    spec: TrialSpec
    cfg: Experiment
    state: str = NEW
    detail: str = ""

    @property
    def run_dir(self) -> Path:
        return Path(self.cfg.run_dir)


class Problems:
    """Problem messages in first-seen order, each with the trials it concerns."""

    def __init__(self) -> None:
        self._where: dict[str, list[str]] = {}

    def add(self, message: str, trial: str = "") -> None:
        self._where.setdefault(message, []).append(trial)

    def lines(self, num_trials: int) -> list[str]:
        out = []
        for message, trials in self._where.items():
            trials = [t for t in dict.fromkeys(trials) if t]
            if not trials:
                out.append(message)
            elif len(trials) == num_trials > 1:
                out.append(f"{message} (all {num_trials} trials)")
            elif len(trials) == 1:
                out.append(f"{trials[0]}: {message}")
            else:
                more = f" and {len(trials) - SHOWN_TRIALS} more" if len(trials) > SHOWN_TRIALS else ""
                out.append(f"{message} (trials {', '.join(trials[:SHOWN_TRIALS])}{more})")
        return out


def resolve_trials(sweep: Sweep, *, check_env: bool = True) -> list[Planned]:
    """Every trial of ``sweep`` resolved, with its run folder's state; ``ConfigError`` listing every problem
    of every trial (unknown config files, override keys, invalid values, settings of finished trials)."""
    problems = Problems()
    bases: dict[str, Experiment] = {}
    for config in dict.fromkeys(sweep.configs):
        try:
            bases[config] = load_file(config)
        except ConfigError as err:
            for message in err.problems:
                problems.add(message)
        except Exception as err:  # a config file that does not import or whose experiment() raises
            problems.add(f"config file {config}: {type(err).__name__}: {err}")
    specs = expand(sweep)
    for name, count in Counter(s.name for s in specs).items():
        if count > 1:
            problems.add(f"{count} trials share the folder name {name!r} (two configs with one file name, or grid "
                         "values that differ only in characters a folder name cannot hold); rename one")
    memo: dict[Any, list[str]] = {}  # the env checks' answers, by env (srljax/prepare.py)
    planned = []
    specs = [s for s in specs if s.config in bases]
    for spec in specs:
        cfg, bad = bases[spec.config], []
        for item in spec.overrides:  # one at a time: a bad one does not hide the env check of the others
            try:
                cfg = apply_overrides(cfg, [item])
            except ConfigError as err:
                bad += err.problems
        cfg = dataclasses.replace(cfg, name=sweep.name, trial=spec.name)
        # the tree's arithmetic only makes sense once every override applied; the env's checks once per env
        skip = tuple(owner for owner in CHECKS if owner != "envs") if bad else ()  # bad: the env's checks only
        found = check_problems(cfg, memo=memo, skip=skip + (() if check_env else ("envs",)))
        for message in bad + found:
            problems.add(message, spec.name)
        if not bad:
            planned.append(Planned(spec, cfg, *trial_state(cfg)))
    if len({p.cfg.log.run_root for p in planned}) > 1:
        problems.add("the trials' configs set different log.run_root values; a sweep's trials share one folder: "
                     "add log.run_root=... to Sweep.overrides")
    for p in planned:
        if p.state == DONE and (changed := settings_diff(p.cfg, p.run_dir / "config.json")):
            problems.add(f"{p.run_dir} holds a finished run with other settings ({changed}); its numbers would be "
                         "reported under this sweep's settings: move that folder away, or give the sweep "
                         "another name (Sweep.name)")
    if found := problems.lines(len(specs)):
        raise ConfigError(found)
    return planned


def trial_state(cfg: Experiment) -> tuple[str, str]:
    """``(state, detail)`` of ``cfg``'s run folder: ``new``, ``done`` or ``partial``."""
    run_dir = Path(cfg.run_dir)
    if not run_dir.is_dir() or not any(run_dir.iterdir()):
        return NEW, "no run folder yet"
    status = read_json(run_dir / "status.json")
    if status.get("exit_code") == 0:
        return DONE, f"status.json: exit code 0 ({status.get('reason', 'done')})"
    last = last_record(run_dir / "metrics.jsonl")
    updates, steps = int(last.get("update", 0)), int(last.get("env_steps", 0))
    if last and ended_by_metrics(cfg, updates, steps):
        return DONE, f"metrics reached update {updates:,} of {last_params_version(cfg):,} ({steps:,} env steps)"
    if status:
        return PARTIAL, f"status.json: exit code {status.get('exit_code')} ({status.get('reason', '?')})"
    if last:
        return PARTIAL, f"stopped at update {updates:,} of {last_params_version(cfg):,} ({steps:,} env steps)"
    return PARTIAL, "no metrics written"


def settings_diff(cfg: Experiment, saved: Path) -> str:
    """The keys whose values differ between ``cfg`` and a run's ``config.json`` ("" if none, or no file).
    Keys only one side has (added to or removed from the config since the run) are not compared."""
    then = read_json(saved)
    if not then:
        return ""
    now, then = _flat(json.loads(json.dumps(to_dict(cfg)))), _flat(then)
    keys = sorted(k for k in now.keys() & then.keys()
                  if k not in IGNORED_KEYS and not k.startswith(IGNORED_SECTIONS) and now[k] != then[k])
    shown = ", ".join(f"{k}: {then[k]!r} there, {now[k]!r} now" for k in keys[:SHOWN_TRIALS])
    return shown + (f" and {len(keys) - SHOWN_TRIALS} more keys" if len(keys) > SHOWN_TRIALS else "")


def move_aside(run_dir: Path) -> Path:
    """Rename a partial run folder to ``<trial>.failed-<timestamp>`` (kept for its logs) and return the new path."""
    target = run_dir.with_name(f"{run_dir.name}.failed-{time.strftime('%Y%m%d-%H%M%S')}")
    run_dir.rename(target)
    return target


def read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_records(path: Path) -> list[dict[str, Any]]:
    """Every complete JSON line of a ``metrics.jsonl`` (a line cut short by a kill is skipped)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return []
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def last_record(path: Path) -> dict[str, Any]:
    records = read_records(path)
    return records[-1] if records else {}


def _flat(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out
