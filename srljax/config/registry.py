"""The built-in algorithms, one line each: ``algo=NAME`` -> its config class and its make function.

The one table the config loader (``algo=NAME``, ``srljax.config.algo``), the exports of ``srljax.config``
(``from srljax.config import PPOConfig``) and ``algos.make`` read. Both halves are ``"package.module:name"``
strings, loaded on first use, so this module imports nothing and reading a config loads no JAX.

Adding a built-in algorithm is its module (``algos/foo.py``, ``make_foo(cfg, spec) -> Algorithm``), its config
beside it (``algos/foo_config.py``, a frozen dataclass ``FooConfig`` with ``name = "foo"``, no JAX), and one
line here (``docs/architecture.md``, "Adding a built-in algorithm")::

    "foo": ("algos.foo_config:FooConfig", "algos.foo:make_foo"),
"""

from __future__ import annotations

BUILTIN_ALGOS: dict[str, tuple[str, str]] = {
    "ppo": ("algos.ppo_config:PPOConfig", "algos.ppo:make_ppo"),
    "impala": ("algos.impala_config:IMPALAConfig", "algos.impala:make_impala"),
    "dqn": ("algos.dqn_config:DQNConfig", "algos.dqn:make_dqn"),
    "mappo": ("algos.mappo_config:MAPPOConfig", "algos.mappo:make_mappo"),
    "sac": ("algos.sac_config:SACConfig", "algos.sac:make_sac"),
    "td3": ("algos.td3_config:TD3Config", "algos.td3:make_td3"),
    "r2d2": ("algos.r2d2_config:R2D2Config", "algos.r2d2:make_r2d2"),
    "alphazero": ("algos.alphazero_config:AlphaZeroConfig", "algos.alphazero:make_alphazero"),
    "muzero": ("algos.muzero_config:MuZeroConfig", "algos.muzero:make_muzero"),
    "qmix": ("algos.qmix_config:QMixConfig", "algos.qmix:make_qmix"),
    "vdn": ("algos.qmix_config:VDNConfig", "algos.qmix:make_qmix"),
}
"""``algo=NAME`` -> (its config class, its ``make(cfg, spec) -> Algorithm``), each ``"package.module:name"``."""


def config_exports() -> dict[str, str]:
    """Each built-in config class's name -> the module that defines it (``srljax.config``'s lazy exports)."""
    return {config.partition(":")[2]: config.partition(":")[0] for config, _ in BUILTIN_ALGOS.values()}


def make_path(config_class: type) -> str | None:
    """The make function of the built-in algorithm whose config ``config_class`` is or subclasses (the nearest in
    its MRO, so ``MAPPOConfig`` picks MAPPO's, not PPO's), or None for a config of no built-in algorithm."""
    makes = {config: make for config, make in BUILTIN_ALGOS.values()}
    for cls in config_class.__mro__:
        if (found := makes.get(f"{cls.__module__}:{cls.__qualname__}")) is not None:
            return found
    return None
