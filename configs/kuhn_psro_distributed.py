"""PSRO on OpenSpiel's Kuhn poker as a worker graph: the population manager's meta-game, one trainer training the best
responses in turn, two actors drawing each game's opponent from the meta-strategy.

    python -m launch.local configs/kuhn_psro_distributed.py              # one process per worker
    python -m launch.slurm configs/kuhn_psro_distributed.py -f try1      # the same graph on Slurm

The settings of ``configs/kuhn_psro.py`` (16 best responses, PPO with ``ent_coef=0.1``, greedy members, the Nash
meta-solver) with 40,000 env steps per best response instead of 20,000: at 20,000 the graph's best responses, trained
on batches acted 1-3 params versions back, stalled at 0.067-0.099 in 3 seeds of 3 (one process: 0.028, 0.028, 0.071);
at 40,000 two seeds of two ended at 0.042 (bench/RESULTS.md, "PSRO as a worker graph on Kuhn poker").
``RUN_DIR/psro/psro.jsonl`` has the same lines as one process's (``srljax/system/managers/psro_manager.py``).
"""

import dataclasses

from configs import kuhn_psro
from srljax.config import Experiment, LayoutConfig, Promise

PROMISE = Promise(
    "neg_exploitability", median=-0.05, worst=-0.05, seeds=(1, 2), wall_s=670, quick=False,
    source="bench/RESULTS.md (PSRO as a worker graph on Kuhn poker): seeds 1 and 2, exploitability 0.457 -> 0.042 "
    "after 16 best responses of 40k env steps (663 and 670 s side by side at load 11-19 on the 2 cores)",
)


def experiment() -> Experiment:
    base = kuhn_psro.experiment()
    return dataclasses.replace(
        base,
        name="kuhn_psro_distributed",
        total_env_steps=640_000,
        layout=LayoutConfig(mode="distributed", num_actors=2, inference="inline"),
    )
