"""The VecEnv interface: what every environment batch (envpool, gymnasium, probes, yours) offers.

    env = envs.make(EnvConfig(id="CartPole-v1", num_envs=4), seed=0)
    ts = env.reset()                       # TimeStep, leading axis 4
    ts = env.step(np.zeros(4, np.int32))   # all envs, or step(action, env_id) for a subset

    env = envs.make(EnvConfig(id="CartPole-v1", num_envs=4, batch_size=2), seed=0)   # an env ring
    env.async_reset()
    ts = env.recv()                        # whichever 2 envs are ready; ts.env_id says which
    env.send(policy(ts.obs), ts.env_id)
    env.close()

Everything returned is numpy with leading axis ``spec.batch_size``. Autoreset is lazy, as in envpool: the
step after a done ignores its action and returns the next episode's first observation with reward 0 and both
flags False (``srljax.types.TimeStep``). A user's env plugs in through
``EnvConfig(factory="my_package.my_module:make_env")``, ``make_env(env_config, seed)`` returning any object with
this interface: subclass ``envs.python_loop.PythonLoopVecEnv`` or wrap a gymnasium env with
``envs.gym_adapter.GymnasiumVecEnv`` (``SubprocGymnasiumVecEnv`` for parallel processes).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

from srljax.types import EnvSpec, TimeStep


@runtime_checkable
class VecEnv(Protocol):
    """A batch of ``spec.num_envs`` environments, stepped synchronously or as an async ring."""

    spec: EnvSpec

    def reset(self) -> TimeStep:
        """Reset every env and return the first observations (sync mode only)."""
        ...

    def step(self, action: np.ndarray, env_id: np.ndarray | None = None) -> TimeStep:
        """Act in ``env_id`` (all envs when None) and wait for the result (sync mode)."""
        ...

    def async_reset(self) -> None:
        """Reset every env; the first observations then arrive through ``recv``."""
        ...

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        """Queue ``action[i]`` for env ``env_id[i]`` (``env_id`` int32) without waiting."""
        ...

    def recv(self) -> TimeStep:
        """Wait for the next ``spec.batch_size`` envs that are ready."""
        ...

    def close(self) -> None:
        """Release threads and resources."""
        ...


def require_sync(spec: EnvSpec, method: str) -> None:
    """RuntimeError unless ``spec`` is in sync mode (``batch_size == num_envs``): envpool's rule, kept by every
    VecEnv here so code written against a probe runs on envpool."""
    if spec.batch_size < spec.num_envs:
        raise RuntimeError(
            f"{method}() needs sync mode, but env.batch_size={spec.batch_size} < env.num_envs={spec.num_envs}; "
            "use async_reset(), then recv() and send(action, env_id)"
        )
