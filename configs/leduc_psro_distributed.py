"""PSRO on OpenSpiel's Leduc poker as a worker graph: the population manager's meta-game, one trainer training the
best responses in turn, two actors drawing each game's opponent from the meta-strategy.

    python -m launch.local configs/leduc_psro_distributed.py              # one process per worker
    python -m launch.slurm configs/leduc_psro_distributed.py -f try1      # the same graph on Slurm

The settings and budget of ``configs/leduc_psro.py`` (19 best responses of 50,000 env steps: 48 updates of 32 envs x
32 steps each; PPO, MLP 128x128, ``ent_coef=0.01``, greedy members, the Nash meta-solver); each actor steps 32 envs
and each update is one actor's segment, one process's batch. 11-15 minutes a seed on the shared 2-core box (launcher
walls 679-927 s beside other runs, load 12-33). Twice the env steps per best response (``total_env_steps=1900000``:
what the Kuhn graph needed) ended a little lower in the median of three seeds (1.069 against 1.146), within the
seeds' spread, and strictly on-policy batches (``trainer.max_policy_lag=0``, one seed) no lower, so the graph keeps
one process's budget; its curves sit beside one process's in bench/RESULTS.md ("PSRO on Leduc poker as a worker
graph"). ``RUN_DIR/psro/psro.jsonl`` has the same lines as one
process's (``srljax/system/managers/psro_manager.py``).
"""

import dataclasses

from configs import leduc_psro
from srljax.config import Experiment, LayoutConfig, Promise

PROMISE = Promise(
    "neg_exploitability", median=-1.2, worst=-1.3, seeds=(1, 2, 3), wall_s=930, quick=False,
    source="bench/RESULTS.md (PSRO on Leduc poker as a worker graph, session 27): seeds 1, 2, 3: exploitability "
    "2.38 -> 1.259, 0.996, 1.146 after 19 best responses of 50k env steps (launcher walls 927, 897, 679 s at load "
    "12-33 on the 2 cores, beside other runs; one process at this budget the same day: 1.096, 0.976, 1.092)",
)


def experiment() -> Experiment:
    base = leduc_psro.experiment()
    return dataclasses.replace(
        base,
        name="leduc_psro_distributed",
        layout=LayoutConfig(mode="distributed", num_actors=2, inference="inline"),
    )
