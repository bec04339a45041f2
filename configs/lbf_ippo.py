"""LevelBasedForaging-v0 with IPPO: ``configs/lbf_mappo.py`` with each agent's critic on its own view only.

    python -m launch.local configs/lbf_ippo.py
"""

import dataclasses

from configs.lbf_mappo import experiment as mappo
from srljax.config import Experiment, Promise

PROMISE = Promise(
    "return", median=0.9, worst=0.8, wall_s=65,
    source="bench/RESULTS.md (LBF MAPPO over seeds): with lbf_mappo.py's 64 envs and entropy 0.05, IPPO seeds "
    "1-3 all 1.0 at 2M (first at 115k-369k)",
)


def experiment() -> Experiment:
    cfg = mappo()
    return dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, critic="local"))
