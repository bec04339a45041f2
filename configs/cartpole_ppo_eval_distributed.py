"""CartPole-v1 PPO as a worker graph with an eval manager: deterministic evaluations by params version.

    python -m launch.local configs/cartpole_ppo_eval_distributed.py       # RUN_DIR/eval.jsonl, RUN_DIR/best/
    python -m launch.local configs/cartpole_ppo_eval_distributed.py eval.every_updates=5 eval.episodes=20

The graph of ``configs/cartpole_ppo_distributed.py`` plus one ``eval`` worker (``srljax/system/managers/eval_manager.py``):
every 10 params versions it plays 10 CartPole episodes with the greedy action on envs seeded
``eval.seed`` (the same episodes for every version), writes one line per version to ``eval.jsonl``
and keeps the best version's params in ``best/``; at the end it evaluates the last version.
The single-process loop does the same inline with ``eval.every_updates=N`` on any config.
"""

import dataclasses

from configs import cartpole_ppo_distributed
from srljax.config import Experiment, Promise
from srljax.config.eval import EvalConfig

PROMISE = Promise(
    "eval_final", median=475, worst=400, wall_s=140, quick=False,
    source="the gate at 9cfbcd3+changes on this 2-core box: greedy evaluation of the last version 500.0 / 500.0 "
    "/ 500.0 (best 500.0 each), 134-142 s",
)


def experiment() -> Experiment:
    base = cartpole_ppo_distributed.experiment()
    return dataclasses.replace(
        base,
        name="cartpole_ppo_eval_distributed",
        eval=EvalConfig(every_updates=10, episodes=10),
        # the eval worker is small: on Slurm it rides in the trainer's component, as the policy worker does
        slurm=dataclasses.replace(base.slurm, eval=dataclasses.replace(base.slurm.eval, component="trainer")),
    )
