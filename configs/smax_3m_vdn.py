"""SMAX ``3m`` with VDN: ``configs/smax_3m_qmix.py`` with the agents' chosen Q-values summed instead of mixed on the
world state (the same agents, replay, targets, exploration and budget; ``algos/qmix_config.py``).

    python -m launch.local configs/smax_3m_vdn.py
"""

import dataclasses

from algos.qmix_config import VDNConfig
from configs import smax_3m_qmix


def experiment():
    cfg = smax_3m_qmix.experiment()
    shared = {f.name: getattr(cfg.algo, f.name) for f in dataclasses.fields(VDNConfig) if f.name != "name"}
    return dataclasses.replace(cfg, algo=VDNConfig(**shared))
