"""LevelBasedForaging-v0 with IPPO: ``configs/lbf_mappo.py`` with each agent's critic on its own view only.

    python -m launch.local configs/lbf_ippo.py
"""

import dataclasses

from configs.lbf_mappo import experiment as mappo
from srljax.config import Experiment


def experiment() -> Experiment:
    cfg = mappo()
    return dataclasses.replace(cfg, algo=dataclasses.replace(cfg.algo, critic="local"))
