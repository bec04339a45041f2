"""What every algorithm config shares, and how a name picks one (the ``algo`` key of a config).

Each algorithm's config lives beside the algorithm (``algos/ppo_config.py`` beside ``algos/ppo.py``); this
module holds what they share (the built-in names are in ``srljax.config.registry``). ``Experiment.algo`` holds
one of them or a user's own frozen dataclass (``docs/architecture.md``, "Adding your own algorithm"). Every algo config
has ``name`` (the key ``algo=NAME`` and the JSON round trip choose the class by: a built-in name or the
user's ``"package.module:Class"``), ``num_steps`` (segment length T) and ``gamma``; a
``problems(cfg) -> list[str]`` method, where present, adds its own config errors to
``srljax.config.problems``. What an algorithm's update consumes (``consumes``): fresh segments (the
default) or batches sampled from a replay (``DQNConfig.consumes = "replay"``, a class attribute, not a
config key); a replay algorithm also has ``num_updates(cfg)`` and ``describe_batch(cfg)``.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Literal

from srljax.config.errors import ConfigError
from srljax.config.registry import BUILTIN_ALGOS
from srljax.objects import load_object


def algo_config_class(name: str, key: str = "algo") -> type:
    """The algo config class ``name`` picks: a built-in name (``srljax.config.registry``) or a user's
    ``"package.module:Class"`` (a frozen dataclass whose ``name`` field defaults to that same path)."""
    if name in BUILTIN_ALGOS:
        return load_object(BUILTIN_ALGOS[name][0], key)
    if ":" not in name:
        raise ConfigError([f"{key}={name!r}: unknown algorithm; known: {', '.join(BUILTIN_ALGOS)}, "
                           "or a user config class 'package.module:Class'"])
    try:
        cls = load_object(name, key)
    except ValueError as error:
        raise ConfigError([str(error)]) from None
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ConfigError([f"{key}={name!r} names {cls!r}, not an algo config dataclass"])
    return cls


def hash_by_value(self: Any) -> int:
    """``__hash__`` of a frozen algo config holding a dict (``network_options``): by its JSON form. jit's static
    arguments and caches hash configs; a dataclass's generated hash would fail on the dict."""
    return hash(json.dumps(dataclasses.asdict(self), sort_keys=True, default=str))


def default_algo() -> Any:
    """``Experiment.algo``'s default: PPO."""
    return algo_config_class("ppo")()


def vtrace_problems(algo: Any) -> list[str]:
    """Errors in the V-trace thresholds shared by IMPALA and APPO (``rho_bar``, ``c_bar``)."""
    return [f"algo.{key}={getattr(algo, key)} must be > 0 (1.0 is the paper's)"
            for key in ("rho_bar", "c_bar") if getattr(algo, key) <= 0]


def consumes(algo: Any) -> Literal["segments", "replay", "search", "sequences"]:
    """What ``algo``'s update trains on: ``"segments"`` (PPO, IMPALA, a user's by default), ``"replay"`` (DQN),
    ``"search"`` (AlphaZero: rows its tree search chose, on a JAX env) or ``"sequences"`` (QMIX, VDN: sequences from
    a replay on the device, on a JAX env)."""
    return getattr(algo, "consumes", "segments")


def gamma_problems(algo: Any) -> list[str]:
    return [] if 0.0 < algo.gamma <= 1.0 else [f"algo.gamma={algo.gamma} must be in (0, 1]"]


def recurrent_problems(algo: Any, cfg: Any) -> list[str]:
    """Errors in ``algo.lstm_size``: recurrent minibatches are whole env columns, split over the trainer devices."""
    t = cfg.trainer
    parts = t.num_minibatches * t.devices * t.num_hosts
    if algo.lstm_size < 0:
        return [f"algo.lstm_size={algo.lstm_size} must be >= 0 (0: feed-forward)"]
    if algo.lstm_size and parts >= 1 and cfg.batch_envs % parts:
        return [f"algo.lstm_size={algo.lstm_size}: recurrent minibatches are whole env columns, so batch_envs="
                f"{cfg.batch_envs} must divide into trainer.num_minibatches={t.num_minibatches} x "
                f"{t.devices * t.num_hosts} trainer devices; use a multiple of {parts} envs"]
    return []


BUILTIN_NETWORKS = ("auto", "mlp", "cnn")


def network_problems(algo: Any) -> list[str]:
    """Errors in ``algo.hidden_sizes`` (at least one hidden layer, each at least one unit wide) and ``algo.network``:
    a built-in name, or a user's ``"package.module:Class"`` that imports, is a Flax module and takes every key of
    ``algo.network_options`` (the module is imported, not run: a Flax module's fields are its keyword arguments)."""
    out = []
    sizes = tuple(getattr(algo, "hidden_sizes", (1,)))
    if not sizes or min(sizes) < 1:
        out.append(f"algo.hidden_sizes={sizes} needs at least one layer, each of width >= 1 (e.g. (64, 64))")
    network, options = getattr(algo, "network", "auto"), dict(getattr(algo, "network_options", {}) or {})
    if network in BUILTIN_NETWORKS:
        if options:
            out.append(f"algo.network_options={options} apply to a network of your own, and algo.network={network!r} "
                       "is built in (it takes algo.hidden_sizes and algo.activation): drop them")
        return out
    if ":" not in network:
        return out + [f"algo.network={network!r}: use auto, mlp, cnn, or a Flax module of your own as "
                      "'package.module:Class' (examples/custom_torso.py)"]
    try:
        cls = load_object(network, "algo.network")
    except ValueError as error:
        return out + [str(error)]
    # a flax.linen.Module subclass, told by its class names so this config check loads no JAX itself
    if not (isinstance(cls, type) and any(c.__name__ == "Module" and c.__module__.startswith("flax.linen")
                                          for c in cls.__mro__)):
        return out + [f"algo.network={network!r} is {cls!r}, not a flax.linen.Module class"]
    fields = {f.name for f in dataclasses.fields(cls)} - {"parent", "name"}
    if unknown := sorted(set(options) - fields):
        out.append(f"algo.network_options has {', '.join(unknown)}, which {network} does not take; its fields: "
                   f"{', '.join(sorted(fields)) or 'none'}")
    required = [f.name for f in dataclasses.fields(cls) if f.name in fields and f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING and f.name not in options]
    if required:
        out.append(f"algo.network={network!r} needs {', '.join(required)}: give them in algo.network_options "
                   f"(e.g. algo.network_options.{required[0]}=...)")
    return out
