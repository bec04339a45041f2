"""Worker shells (floor 4 of the house, docs/architecture.md): stateful processes that own sockets, envs and devices
and call the algorithms, the learner and the replay below them.

    from launch.threads import run_threads
    result = run_threads(cfg)            # the whole layout as threads in this process (tests, notebooks)
    result.exit_code, result.metrics[-1]["episode_return"]

    python -m launch.local CFG.py        # the same layout, one process per worker (launch/processes.py)

The backends (threads, processes, Slurm) live in ``launch/``; this package holds the workers.

Roles: ``ActorWorker`` (actor.py), ``PolicyWorker`` (policy.py), ``TrainerWorker`` (trainer.py),
``BufferWorker`` (buffer.py), ``EvalManager`` (eval_manager.py: evaluations by params version), all on the ``Worker`` base (worker.py: loop, control, heartbeats,
metrics), driven by the ``Controller`` (controller.py), which restarts lost workers (restarts.py).
One ``TrainerWorker`` serves every run, composed of parts its plan picks (training/parts.py): a PBT population
(``pbt.population`` > 1) or a league has a trainer per member (training/members.py); a population also has a
``PopulationManager`` (population_manager.py, the ``population`` role; directives: srljax/comm/directives.py).
A replay algorithm (Ape-X DQN) runs the same roles with ``ApexActorWorker`` (apex_actor.py),
``ReplayBufferWorker`` (replay_buffer.py, a replay shard) and the trainer's replay source (training/replay_source.py).

Names are imported on first use, so a worker process loads only its own role's dependencies
(an actor never imports orbax, a trainer never imports envpool's ring code paths).
"""

from __future__ import annotations

from srljax.objects import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    "ActorWorker": "srljax.system.acting.actor", "BufferWorker": "srljax.system.staging.buffer",
    "Controller": "srljax.system.shell.controller", "EvalManager": "srljax.system.managers.eval_manager", "TrialResult": "srljax.system.shell.controller",
    "PolicyWorker": "srljax.system.acting.policy", "make_worker": "srljax.system.shell.roles", "TrainerWorker": "srljax.system.training.trainer", "Worker": "srljax.system.shell.worker",
    "ApexActorWorker": "srljax.system.acting.apex_actor", "ReplayBufferWorker": "srljax.system.staging.replay_buffer",
    "PopulationManager": "srljax.system.managers.population_manager",
}

__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = sorted(_EXPORTS)
