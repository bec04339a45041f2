"""Algorithms: ``make(cfg, spec) -> Algorithm`` (``algos/factory.py``; ``algos/base.py`` for the seam).

Each algorithm is a module of pure functions (``ppo.py``, ``impala.py``, ``dqn.py``, ``r2d2.py``, ``sac.py``,
``td3.py``, ``mappo.py``) with its config beside it (``ppo_config.py``, ...), which imports no JAX, so launchers
read configs without it; each built-in is one line of the registry ``srljax.config.registry`` (its config class
and its make function), which ``make`` reads. SAC's and TD3's configs (``sac_config.py``, ``td3_config.py``)
share ``twin_q_config.py``; they and DQN's (``dqn_config.py``) share ``replay_config.py``. ``board_torso.py`` is a
torso for board games' planes, ``testing.py`` random, correctly shaped data for tests and benchmarks.

A user's algorithm plugs in without touching this package: its config dataclass (in ``cfg.algo``)
carries ``factory = "package.module:make_fn"`` and ``make`` calls ``make_fn(cfg, spec)``, which
returns an ``Algorithm`` (``examples/reinforce.py``, ``examples/expected_sarsa.py``; ``docs/architecture.md``).
Names are loaded on first use.
"""

from __future__ import annotations

from srljax.objects import lazy_exports

_EXPORTS = {"Algorithm": "algos.base", "TrainState": "algos.base", "make": "algos.factory"}

__getattr__ = lazy_exports(__name__, _EXPORTS)


__all__ = sorted(_EXPORTS)
