"""``make(cfg, spec) -> Algorithm``: the configured algorithm (see ``algos.base`` for the seam).

A user's algorithm plugs in without touching this package: its config dataclass (in ``cfg.algo``)
carries ``factory = "package.module:make_fn"`` and ``make`` calls ``make_fn(cfg, spec)``, which
returns an ``Algorithm`` (``examples/reinforce.py``; ``docs/architecture.md``).
"""

from __future__ import annotations

from algos.base import Algorithm
from algos.dqn import make_dqn
from algos.dqn_config import DQNConfig
from algos.impala import make_impala
from algos.impala_config import IMPALAConfig
from algos.mappo import make_mappo
from algos.mappo_config import MAPPOConfig
from algos.multi_policy import make_multi_policy
from algos.ppo import make_ppo
from algos.ppo_config import PPOConfig
from algos.r2d2 import make_r2d2
from algos.r2d2_config import R2D2Config
from algos.sac import make_sac
from algos.sac_config import SACConfig
from algos.td3 import make_td3
from algos.td3_config import TD3Config
from srljax.config.experiment import Experiment
from srljax.objects import load_object
from srljax.types import EnvSpec


def make(cfg: Experiment, spec: EnvSpec) -> Algorithm:
    """Build the configured algorithm for environments described by ``spec``."""
    if cfg.policies.enabled:  # several policies, each acting for its agents (srljax/config/policies.py)
        return make_multi_policy(cfg, spec)
    if getattr(cfg.algo, "factory", ""):  # a user's algorithm, also one whose config subclasses a built-in's
        algo = load_object(cfg.algo.factory, "algo.factory")(cfg, spec)
        if not isinstance(algo, Algorithm):
            raise TypeError(f"algo.factory={cfg.algo.factory!r} returned {type(algo).__name__}, not algos.Algorithm")
        return algo
    match cfg.algo:
        case MAPPOConfig():  # before PPOConfig, its base class
            return make_mappo(cfg, spec)
        case PPOConfig():
            return make_ppo(cfg, spec)
        case IMPALAConfig():
            return make_impala(cfg, spec)
        case R2D2Config():  # before DQNConfig, its base class
            return make_r2d2(cfg, spec)
        case DQNConfig():
            return make_dqn(cfg, spec)
        case SACConfig():
            return make_sac(cfg, spec)
        case TD3Config():
            return make_td3(cfg, spec)
        case other:
            raise ValueError(f"unknown algorithm config {type(other).__name__}; known: PPOConfig, IMPALAConfig, "
                             "DQNConfig, R2D2Config, SACConfig, TD3Config, or a config with factory='package.module:make_fn'")
