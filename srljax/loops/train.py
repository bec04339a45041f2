"""Single-process training, the notebook / one-GPU path: one entry that hands a config to its loop.

    from srljax import train
    from srljax.config import Experiment
    result = train(Experiment(total_env_steps=100_000))
    result.metrics[-1]["episode_return"]

The loops (this package): ``on_policy.py`` for segment algorithms (PPO, IMPALA, MAPPO, a user's),
``replay.py`` for replay algorithms (DQN, a user's), ``population.py`` for a PBT population; ``league.py`` for a
self-play league; ``psro.py`` for PSRO on a small two-player game; ``anakin.py`` for an algorithm on a JAX env (rollout and update in one compiled program, seeds
vmapped).
"""

from __future__ import annotations

from srljax.config import Experiment
from srljax.config.experiment import seed_trials
from srljax.loops.anakin import train_anakin
from srljax.loops.league import train_league
from srljax.loops.on_policy import train_on_policy
from srljax.loops.population import train_population
from srljax.loops.psro import train_psro
from srljax.loops.replay import train_replay
from srljax.loops.result import TrainResult
from srljax.parallel import dispatch
from srljax.prepare import Run, prepared
from srljax.storage import run_dir
from srljax.storage.checkpoint import CheckpointError

__all__ = ["TrainResult", "train"]


def train(cfg: Experiment | Run, resume: bool = False) -> TrainResult:
    """Train ``cfg`` in this process; ``resume``: continue its trial from the newest checkpoint. ``cfg`` may be a
    ``Run`` a launcher prepared (``srljax.prepare``); else it is checked and prepared here."""
    run = prepared(cfg, resume)
    if not run.cfg.trainer.overlap_collection:  # nothing runs beside a computation: no hand-off to a worker thread
        dispatch.run_cpu_inline()
    loop = {"population": train_population, "league": train_league, "replay": train_replay,
            "on_policy": train_on_policy, "anakin": train_anakin, "psro": train_psro}[run.plan.loop]  # srljax/layout.py decides which, once
    try:
        return loop(run)
    except CheckpointError:
        if run.resume:  # no step restored: the config.json the resume replaced goes back
            for trial in seed_trials(run.cfg):
                run_dir.undo_keep_config(trial.run_dir.absolute())
        raise
    finally:
        for trial in seed_trials(run.cfg):  # the trial's lock (srljax.storage.run_dir): another launch may take it
            run_dir.release(trial.run_dir.absolute())
