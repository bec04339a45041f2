"""Hide parts of any env's observation: ``EnvConfig(obs_mask=(0, 2))`` keeps only those indices.

    env = envs.make(EnvConfig(id="CartPole-v1", obs_mask=(0, 2)), seed=1)   # position and angle only
    env.spec.obs_shape                                                      # (2,)

CartPole's observation is (cart position, cart velocity, pole angle, pole angular velocity); without
the velocities a policy must infer them from consecutive observations, so a feed-forward policy
cannot balance the pole for long while a recurrent one can (``tests/test_recurrent.py``). Works on
any VecEnv: the observation is flattened and the kept indices are taken in the order given.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from envs.base import VecEnv
from srljax.types import TimeStep


class ObsMask:
    """A VecEnv whose observations are ``inner``'s, flattened, at ``keep`` only."""

    def __init__(self, inner: VecEnv, keep: tuple[int, ...]):
        size = math.prod(inner.spec.obs_shape)
        bad = [i for i in keep if not 0 <= i < size]
        if bad or not keep:
            inner.close()
            raise ValueError(f"env.obs_mask={tuple(keep)}: indices must be in [0, {size}) for {inner.spec.id}'s "
                             f"observation of shape {inner.spec.obs_shape} (flattened: {size} values)")
        self.inner = inner
        self.keep = np.asarray(keep, np.intp)
        self.spec = dataclasses.replace(inner.spec, obs_shape=(len(keep),), image_channels="", obs_keys=(), obs_key_sizes=())

    def _mask(self, ts: TimeStep) -> TimeStep:
        return ts._replace(obs=ts.obs.reshape(len(ts.obs), -1)[:, self.keep])

    def reset(self) -> TimeStep:
        return self._mask(self.inner.reset())

    def step(self, action: np.ndarray, env_id: np.ndarray | None = None) -> TimeStep:
        return self._mask(self.inner.step(action, env_id))

    def async_reset(self) -> None:
        self.inner.async_reset()

    def send(self, action: np.ndarray, env_id: np.ndarray) -> None:
        self.inner.send(action, env_id)

    def recv(self) -> TimeStep:
        return self._mask(self.inner.recv())

    def close(self) -> None:
        self.inner.close()
