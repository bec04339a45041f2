"""``make(cfg, spec) -> Algorithm``: the configured algorithm (see ``algos.base`` for the seam).

A built-in algorithm is found in the one registry, ``srljax.config.registry`` (its config class -> its make
function). A user's algorithm plugs in without touching this package: its config dataclass (in ``cfg.algo``)
carries ``factory = "package.module:make_fn"`` and ``make`` calls ``make_fn(cfg, spec)``, which
returns an ``Algorithm`` (``examples/reinforce.py``; ``docs/architecture.md``).
"""

from __future__ import annotations

from algos.base import Algorithm
from algos.multi_policy import make_multi_policy
from srljax.config.experiment import Experiment
from srljax.config.registry import BUILTIN_ALGOS, make_path
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
    path = make_path(type(cfg.algo))  # the nearest built-in in its MRO: MAPPOConfig before PPOConfig, its base
    if path is None:
        known = ", ".join(config.partition(":")[2] for config, _ in BUILTIN_ALGOS.values())
        raise ValueError(f"unknown algorithm config {type(cfg.algo).__name__}; known: {known}, "
                         "or a config with factory='package.module:make_fn'")
    return load_object(path, "algo")(cfg, spec)
