"""Whether an algorithm config and its network fit an env's spaces (no JAX: launchers check before launch).

    spec_problems(cfg.algo, spec)    # [] or one message per misfit, each naming the fix

An algorithm config states what it takes with class attributes (not config keys): ``action_kinds``
(``discrete``, ``multi_discrete``, ``continuous``), ``dict_obs`` (whether it takes a Dict observation,
which ``envs/spaces.py`` flattens into one vector) and ``action_masks`` (whether it applies the legal-action
flags of a Dict observation's ``action_mask`` key, ``EnvSpec.legal_actions``). A user's config without them is not checked. The network
(``algo.network``) must fit the observation: no zero-width input, and the Nature CNN only on images it fits.
``envs.fit_problems`` runs this before launch on the spec envpool describes; ``algos.networks`` runs it again
when it builds the network (a user's ``env.factory`` env is only known then).
"""

from __future__ import annotations

import math
from typing import Any

from srljax.types import EnvSpec

NATURE_CNN = ((8, 4), (4, 2), (3, 1))
"""The Nature CNN's convolutions, (kernel, stride) each, VALID padding (``algos.networks.NatureCNN``)."""


def conv_output(size: int, layers: tuple[tuple[int, int], ...] = NATURE_CNN) -> int:
    """The width ``size`` pixels have after ``layers``; < 1 means the stack does not fit."""
    for kernel, stride in layers:
        size = (size - kernel) // stride + 1 if size >= kernel else 0
    return size


def _smallest_fit(layers: tuple[tuple[int, int], ...] = NATURE_CNN) -> int:
    return next(n for n in range(1, 1024) if conv_output(n, layers) >= 1)


def spec_problems(algo: Any, spec: EnvSpec) -> list[str]:
    """Every way ``algo`` (an algo config) and its network do not fit ``spec``."""
    name = getattr(algo, "name", type(algo).__name__)
    out = []
    kinds = getattr(algo, "action_kinds", None)
    if kinds is not None and spec.action_kind not in kinds:
        what = {"multi_discrete": f"MultiDiscrete actions {list(spec.action_nvec)}", "discrete": "discrete actions",
                "continuous": f"continuous actions {list(spec.action_shape)}"}[spec.action_kind]
        out.append(f"algo={name} takes {' or '.join(k.replace('_', '-') for k in kinds)} actions; {spec.id} has "
                   f"{what}: pick an algorithm that takes them (algo=ppo takes all three)")
    if spec.obs_keys and not getattr(algo, "dict_obs", True):
        out.append(f"algo={name} does not take Dict observations, and {spec.id}'s is a Dict ({', '.join(spec.obs_keys)}); "
                   "use algo=ppo, impala or dqn (they see it flattened, envs/spaces.py) or flatten it in your env")
    if spec.legal_actions and getattr(algo, "action_masks", None) is False:
        out.append(f"algo={name} does not apply action masks, and {spec.id}'s observation flags its legal actions "
                   "(its 'action_mask' key): use algo=ppo, impala, dqn or r2d2, which never pick an illegal action")
    if math.prod(spec.obs_shape) == 0:
        out.append(f"{spec.id}'s observation {spec.obs_shape} has zero features: a network on it would learn nothing; "
                   "check env.obs_mask and your env's observation space")
        return out
    network = getattr(algo, "network", "auto")
    if network == "cnn" or (network == "auto" and len(spec.obs_shape) == 3):
        out += _cnn_problems(network, spec)
    return out


def _cnn_problems(network: str, spec: EnvSpec) -> list[str]:
    key = f"algo.network={network}" + (" (the Nature CNN for image observations)" if network == "auto" else "")
    if len(spec.obs_shape) != 3:
        return [f"{key} needs image observations (3-D); {spec.id}'s are {spec.obs_shape}: use algo.network=mlp"]
    if not spec.channels:
        return [f"{key}: {spec.id}'s image observation {spec.obs_shape} does not say by its shape which axis holds the "
                "channels; declare it with env.image_channels=first or last (your env's EnvSpec.image_channels)"]
    c, h, w = spec.obs_shape if spec.channels == "first" else (spec.obs_shape[2], *spec.obs_shape[:2])
    if min(conv_output(h), conv_output(w)) >= 1:
        return []
    need = _smallest_fit()
    other = "last" if spec.channels == "first" else "first"
    return [f"{key} does not fit {spec.id}'s frames: {spec.obs_shape} read channels-{spec.channels} is "
            f"{h}x{w} pixels with {c} channels, and its 8x8/4, 4x4/2, 3x3/1 convolutions need at least {need}x{need}; "
            f"if the channels are the other axis set env.image_channels={other} (or auto), else use algo.network=mlp "
            "or a network of your own (algo.network='package.module:Class')"]
