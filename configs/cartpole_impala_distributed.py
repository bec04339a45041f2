"""CartPole-v1 IMPALA as an asynchronous worker graph: 2 actors acting inline, 1 trainer.

    python -m launch.local configs/cartpole_impala_distributed.py                        # one process per worker
    python -m launch.local configs/cartpole_impala_distributed.py layout.inference=remote   # plus a policy worker

The IMPALA settings are those of ``configs/cartpole_impala.py``, its envs split over the actors and
``trainer.batch_envs`` keeping the training batch its size. Actors never wait for a params version:
they act with the newest they hold, so segments arrive up to ``trainer.max_policy_lag`` versions old
(``lag/mean``, ``lag/max`` in metrics.jsonl) and V-trace corrects for the difference between the
behaviour policy that acted and the policy being learnt.
"""

import dataclasses

from configs import cartpole_impala
from srljax.config import Experiment, LayoutConfig, Promise, SlurmConfig, SlurmGroup

NUM_ACTORS = 2

PROMISE = Promise(
    "best_return", median=475, worst=400, wall_s=40,
    source="the gate at 9cfbcd3+changes on this 2-core box: final 500.0 / 500.0 / 222.1 (asynchronous: not "
    "reproducible per seed, so the best 3-line window is judged), 31-36 s",
)


def experiment() -> Experiment:
    base = cartpole_impala.experiment()
    return dataclasses.replace(
        base,
        name="cartpole_impala_distributed",
        env=dataclasses.replace(base.env, num_envs=max(1, base.env.num_envs // NUM_ACTORS), batch_size=0),
        trainer=dataclasses.replace(base.trainer, batch_envs=base.env.num_envs, max_policy_lag=4),
        layout=LayoutConfig(mode="distributed", num_actors=NUM_ACTORS, inference="inline", ring_size=1),
        slurm=SlurmConfig(policy=SlurmGroup(component="trainer")),
    )
