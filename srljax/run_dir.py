"""One run per trial folder: a launch never writes into a folder that an earlier run left files in.

    cfg = dataclasses.replace(cfg, trial=new_trial_name())   # "20250101-120000-3f9a1c"
    problems(cfg)      # [] or ["run folder runs/exp/t1 is not empty (config.json, metrics.jsonl) ..."]
    run_dir = claim(cfg)   # the folder, created; raises RunFolderInUse instead of mixing two runs

``launch.cli.resolve`` reports ``problems`` with the config's own (exit 2, nothing created), and
every entry point that writes a run folder (``srljax.train``, ``run_threads``, the local process
launcher) calls ``claim`` before it writes anything, so metrics are never appended to an old
run's, a config never overwrites the one its checkpoints were trained with, and orbax never
meets an earlier run's step. An existing empty folder is fine. Resuming a trial is not
supported yet.
"""

from __future__ import annotations

import secrets
import time
from pathlib import Path

from srljax.config import ConfigError, Experiment

SHOWN_ENTRIES = 4


class RunFolderInUse(ConfigError):
    """The trial's run folder holds an earlier run; the message names the folder and the fix."""

    def __init__(self, problems: list[str]):
        super().__init__(problems)
        self.args = ("\n".join(problems),)


def new_trial_name() -> str:
    """A default trial name: the local time to the second plus 24 random bits, so launches in the
    same second (a sweep, two terminals) get different folders, e.g. ``20250101-120000-3f9a1c``."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"


def problems(cfg: Experiment) -> list[str]:
    """Why ``cfg`` may not start in its run folder ([] if the folder is missing or empty)."""
    run_dir = Path(cfg.run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        return [f"run folder {run_dir} is a file; pick another trial name with -f (trial=...) or move it away"]
    try:
        entries = sorted(p.name for p in run_dir.iterdir())
    except FileNotFoundError:
        return []
    if not entries:
        return []
    shown = ", ".join(entries[:SHOWN_ENTRIES]) + (f" and {len(entries) - SHOWN_ENTRIES} more"
                                                  if len(entries) > SHOWN_ENTRIES else "")
    return [f"run folder {run_dir} is not empty ({shown}): it holds an earlier run of trial {cfg.name}/{cfg.trial}, "
            "and a new run would mix with it. Pick another trial name with -f (trial=... in Python), "
            "or move that folder away (resuming a trial is not supported yet)"]


def claim(cfg: Experiment) -> Path:
    """Create ``cfg.run_dir`` for a new run and return it; raise ``RunFolderInUse`` if an earlier run is in it."""
    if found := problems(cfg):
        raise RunFolderInUse(found)
    run_dir = Path(cfg.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    return run_dir
