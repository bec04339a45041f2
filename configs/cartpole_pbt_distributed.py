"""CartPole-v1 PPO, a population of 4 (PBT) as a worker graph: a trainer and an actor per member, a population manager.

    python -m launch.local configs/cartpole_pbt_distributed.py                       # one process per worker
    python -m launch.local configs/cartpole_pbt_distributed.py pbt.ready_updates=0    # control: no exploit
    python -m launch.slurm configs/cartpole_pbt_distributed.py -f try1                # the same graph on Slurm

The members and settings of ``configs/cartpole_pbt.py`` (members 0 and 1 start at lr 1e-6, 2 and 3 at
1e-3; 20 sampled evaluation episodes per member every 10 updates) with 200k env steps per member instead
of 150k (at 150k one member of four ended at 445.8 in one of four runs: a copy costs the copier an
update, and the graph is not seeded end to end; bench/RESULTS.md), in the
distributed graph (``srljax/system/managers/population_manager.py``): trainer ``i`` trains member ``i``
(``RUN_DIR/members/<i>/``: metrics, a checkpoint every ``pbt.ready_updates``), actor ``a`` acts for member
``a % 4`` and the population manager evaluates, ranks and tells a bottom member's trainer to copy a top
member's checkpoint (``RUN_DIR/pbt/lineage.jsonl``, ``lineage.png``, ``members.json``; ``RUN_DIR/eval.jsonl``).

On Slurm the manager rides in the trainers' component (one node: controller, 4 trainers, the manager),
the actors in another.
"""

import dataclasses

from configs import cartpole_pbt
from srljax.config import Experiment, LayoutConfig, Promise, SlurmConfig, SlurmGroup

PROMISE = Promise(
    "pbt_worst_member", median=450, worst=400, wall_s=250, quick=False,
    source="bench/RESULTS.md (PBT as a worker graph): at 200k, members 500.0 / 476.8 / 488.8 / 489.6",
)


def experiment() -> Experiment:
    base = cartpole_pbt.experiment()
    return dataclasses.replace(
        base,
        name="cartpole_pbt_distributed",
        total_env_steps=200_000,  # per member
        layout=LayoutConfig(mode="distributed", num_actors=base.pbt.population, inference="inline", ring_size=1),
        slurm=SlurmConfig(eval=SlurmGroup(component="trainer")),  # the population manager's resources: slurm.eval
    )
