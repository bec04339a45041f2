"""One frozen, typed configuration tree for an experiment: the ground floor, importing nothing above it.

A config file is plain Python exposing ``experiment() -> Experiment``::

    from srljax.config import EnvConfig, Experiment, PPOConfig

    def experiment() -> Experiment:
        return Experiment(env=EnvConfig(id="CartPole-v1"), algo=PPOConfig(), total_env_steps=500_000)

Launchers load it, apply ``dotted.key=value`` overrides (``trainer.lr=1e-4``), call ``validate``
(every problem at once, with the arithmetic) and write the resolved tree to
``runs/<experiment>/<trial>/config.json``. Derived sizes are properties; nothing mutates a config
at run time.

The tree, one module a section: ``experiment.py`` (``Experiment``, ``problems``, ``validate``),
``env.py``, ``sections.py`` (trainer, layout, log, checkpoint), ``eval.py``, ``pbt.py``,
``policies.py``, ``slurm.py``, ``selfplay.py``, ``psro.py``, ``promise.py``, ``errors.py``, ``dicts.py``; ``algo.py`` (what
algorithm configs share, ``algo=NAME``), ``registry.py`` (the built-in algorithms, one line each) and ``tree.py``
(overrides, config files, JSON). Each algorithm's config lives beside the algorithm
(``algos/ppo_config.py``, ...). Every name below is importable from ``srljax.config``; each is
loaded on first use, so ``import srljax.config`` costs nothing.
"""

from __future__ import annotations

from srljax.config.registry import config_exports
from srljax.objects import lazy_exports

_EXPORTS = {  # name -> the module that defines it
    "ConfigError": "srljax.config.errors",
    "EnvConfig": "srljax.config.env",
    "TrainerConfig": "srljax.config.sections", "LayoutConfig": "srljax.config.sections",
    "LogConfig": "srljax.config.sections", "CheckpointConfig": "srljax.config.sections",
    "EvalConfig": "srljax.config.eval", "PBTConfig": "srljax.config.pbt",
    "PoliciesConfig": "srljax.config.policies", "PolicyConfig": "srljax.config.policies",
    "policy_experiment": "srljax.config.policies",
    "Promise": "srljax.config.promise", "load_promise": "srljax.config.promise",
    "SlurmConfig": "srljax.config.slurm", "SlurmGroup": "srljax.config.slurm",
    "Experiment": "srljax.config.experiment", "problems": "srljax.config.experiment",
    "validate": "srljax.config.experiment", "THREE_DAYS_SECONDS": "srljax.config.experiment",
    "consumes": "srljax.config.algo", "algo_config_class": "srljax.config.algo",
    "apply_overrides": "srljax.config.tree", "load_file": "srljax.config.tree", "to_dict": "srljax.config.tree",
    "from_dict": "srljax.config.tree", "write_json": "srljax.config.tree",
    "ReplayConfig": "algos.replay_config", "SelfPlayConfig": "srljax.config.selfplay",
    "PSROConfig": "srljax.config.psro",
}
# and each built-in algorithm's config class (PPOConfig, ...), beside its algorithm, named by the one registry
_ALGO_EXPORTS = config_exports()

__getattr__ = lazy_exports(__name__, {**_EXPORTS, **_ALGO_EXPORTS})


__all__ = sorted({**_EXPORTS, **_ALGO_EXPORTS})
