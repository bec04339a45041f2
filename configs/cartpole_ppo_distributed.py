"""CartPole-v1 PPO as a worker graph: 2 actors, 1 policy worker (remote inference), 1 trainer.

    python -m launch.local configs/cartpole_ppo_distributed.py                      # one process per worker
    python -m launch.local configs/cartpole_ppo_distributed.py layout.inference=inline   # no policy worker
    python -m launch.slurm configs/cartpole_ppo_distributed.py -f try1                   # on a Slurm cluster

The PPO settings are those of ``configs/cartpole_ppo.py``; its envs are split over the actors and
``trainer.batch_envs`` keeps a training batch the size it is there, for any number of actors. CartPole steps in microseconds, so no env ring
(``layout.ring_size=1``): one request per actor step, batched across actors by the policy worker.
"""

import dataclasses

from configs import cartpole_ppo
from srljax.config import Experiment, LayoutConfig, Promise, SlurmConfig, SlurmGroup

NUM_ACTORS = 2

PROMISE = Promise(
    "best_return", median=475, worst=400, wall_s=130, quick=False,
    source="the gate at 9cfbcd3+changes on this 2-core box: final 500.0 / 496.7 / 500.0 (asynchronous: the best "
    "3-line window is judged), 128-315 s beside an Ape-X run and two busy loops",
)


def experiment() -> Experiment:
    base = cartpole_ppo.experiment()
    envs_per_actor = max(1, base.env.num_envs // NUM_ACTORS)
    return dataclasses.replace(
        base,
        name="cartpole_ppo_distributed",
        env=dataclasses.replace(base.env, num_envs=envs_per_actor, batch_size=0),
        # the batch of the single-process config, whatever the number of actors: scaling actors up
        # (layout.num_actors=200) changes throughput and policy lag, not the algorithm
        trainer=dataclasses.replace(base.trainer, batch_envs=base.env.num_envs),
        layout=LayoutConfig(mode="distributed", num_actors=NUM_ACTORS, num_policy_workers=1, inference="remote",
                            ring_size=1),
        # python -m launch.slurm: het-job components never share a node, so the small policy worker
        # rides in the trainer's component (one node: controller, trainer, policy; actors on another)
        slurm=SlurmConfig(policy=SlurmGroup(component="trainer")),
    )
