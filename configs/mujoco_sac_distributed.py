"""MuJoCo SAC as an Ape-X worker graph: 2 actors, 1 replay buffer worker, 1 trainer (HalfCheetah-v4 by default).

    python -m launch.local configs/mujoco_sac_distributed.py                     # one process per worker
    python -m launch.local configs/mujoco_sac_distributed.py layout.num_actors=4 layout.num_buffer_workers=2

The SAC settings are ``configs/mujoco_sac.py``'s (CleanRL's: one update of 256 samples per env step, 8 per compiled
call), laid out as Ape-X lays out DQN (``srljax/replay/apex.py``): each actor steps its own env, acts with the
newest params it was sent (uniformly random until ``algo.learning_starts`` env steps are in, reckoned by each actor
as its own times the number of actors) and sends chunks of ``algo.num_steps`` rows to its replay buffer worker,
which keeps a uniform replay (``algo.replay.capacity`` in total) and sends the trainer the batches it asks for. The
replay ratio is held within 10% both ways (``algo.throttle=both``): with 256 samples per env step the trainer's
updates set the pace and the actors wait for newer params. ``env.num_envs`` is per actor.
"""

import dataclasses

from configs import mujoco_sac
from srljax.config import Experiment, LayoutConfig, Promise

PROMISE = Promise(
    "return", median=6000, worst=6000, seeds=(1,), wall_s=3200, overrides=("total_env_steps=300000",), quick=False,
    source="bench/RESULTS.md: seed 1, 8,105 at 300k env steps (52:44 wall, loaded)",
)


def experiment() -> Experiment:
    base = mujoco_sac.experiment()
    return dataclasses.replace(
        base,
        name="mujoco_sac_distributed",
        algo=dataclasses.replace(base.algo, num_steps=16, ratio_tolerance=0.1, throttle="both"),
        layout=LayoutConfig(mode="distributed", num_actors=2, num_buffer_workers=1, inference="inline"),
    )
