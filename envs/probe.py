"""Tiny deterministic envs whose true values are known, for testing learners.

Same semantics as envpool (lazy autoreset, sync and async); the seed is irrelevant::

    env = ConstantRewardTimeLimit(num_envs=4, horizon=10)
    env.true_value(gamma=0.9)          # 10.0 = 1 / (1 - 0.9) at every observation

    env = TerminalReward(num_envs=4, length=5)
    env.true_value(ts.obs, gamma=0.9)  # 0.9 ** (steps remaining - 1), per row

From a config (``max_episode_steps`` is the horizon / length)::

    EnvConfig(factory="envs.probe:make_constant_reward", max_episode_steps=10)
    EnvConfig(factory="envs.probe:make_constant_reward_box", max_episode_steps=10)   # continuous actions
    EnvConfig(factory="envs.probe:make_terminal_reward", max_episode_steps=5)
    EnvConfig(factory="envs.probe:make_cue_memory", max_episode_steps=4)   # needs memory
    EnvConfig(factory="envs.probe:make_cue_choices")                        # MultiDiscrete actions
    EnvConfig(factory="envs.probe:make_masked_choices", max_episode_steps=8) # legal-action masks
"""

from __future__ import annotations

from typing import Any

import numpy as np

from envs.python_loop import PythonLoopVecEnv
from srljax.config import EnvConfig
from srljax.types import EnvSpec


class ConstantRewardTimeLimit(PythonLoopVecEnv):
    """Reward ``reward`` every step, never terminates, truncated after ``horizon`` steps.

    The observation is constant, so a value function cannot tell how close the time limit is.
    Bootstrapping from ``V(obs)`` at truncation gives ``reward / (1 - gamma)``; treating
    truncation as termination drags the estimate clearly below that. Actions (2 discrete, or with
    ``action_dim`` a continuous box ``[-1, 1]^action_dim``) are ignored.
    """

    def __init__(self, num_envs: int, horizon: int, reward: float = 1.0, batch_size: int | None = None,
                 action_dim: int = 0):
        if horizon < 1:
            raise ValueError(f"horizon={horizon} must be >= 1")
        actions = (dict(action_kind="continuous", action_shape=(action_dim,), action_low=(-1.0,) * action_dim,
                        action_high=(1.0,) * action_dim) if action_dim else dict(action_kind="discrete", num_actions=2))
        super().__init__(
            EnvSpec(
                id="ConstantRewardTimeLimit",
                obs_shape=(1,),
                obs_dtype="float32",
                num_envs=num_envs,
                batch_size=batch_size or num_envs,
                max_episode_steps=horizon,
                **actions,
            )
        )
        self.horizon = horizon
        self.reward = reward
        self._elapsed = np.zeros(num_envs, np.int64)

    def true_value(self, gamma: float) -> float:
        """The value of every observation under proper truncation bootstrapping."""
        return self.reward / (1.0 - gamma)

    def _reset_env(self, index: int) -> np.ndarray:
        self._elapsed[index] = 0
        return np.ones(1, np.float32)

    def _step_env(self, index: int, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        self._elapsed[index] += 1
        return np.ones(1, np.float32), self.reward, False, bool(self._elapsed[index] >= self.horizon)


class TerminalReward(PythonLoopVecEnv):
    """Terminates after ``length`` steps with reward 1 on the last step only, 0 before.

    The observation is the one-hot step index, of size ``length + 1`` so that the terminal
    observation (index ``length``) is distinct. With ``remaining = length - index`` steps
    left, the value is exactly ``gamma ** (remaining - 1)``. Actions (2 discrete) are ignored.
    """

    def __init__(self, num_envs: int, length: int, batch_size: int | None = None):
        if length < 1:
            raise ValueError(f"length={length} must be >= 1")
        super().__init__(
            EnvSpec(
                id="TerminalReward",
                obs_shape=(length + 1,),
                obs_dtype="float32",
                action_kind="discrete",
                num_actions=2,
                num_envs=num_envs,
                batch_size=batch_size or num_envs,
                max_episode_steps=length,
            )
        )
        self.length = length
        self._elapsed = np.zeros(num_envs, np.int64)

    def true_value(self, obs: np.ndarray, gamma: float) -> np.ndarray:
        """``gamma ** (remaining - 1)`` per row of one-hot ``obs`` [B, length + 1] (0 at the terminal obs)."""
        remaining = self.length - np.argmax(obs, axis=-1)
        return np.where(remaining > 0, float(gamma) ** (remaining - 1.0), 0.0)

    def _one_hot(self, index: int) -> np.ndarray:
        obs = np.zeros(self.length + 1, np.float32)
        obs[index] = 1.0
        return obs

    def _reset_env(self, index: int) -> np.ndarray:
        self._elapsed[index] = 0
        return self._one_hot(0)

    def _step_env(self, index: int, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        self._elapsed[index] += 1
        done = bool(self._elapsed[index] >= self.length)
        return self._one_hot(int(self._elapsed[index])), 1.0 if done else 0.0, done, False


class CueMemory(PythonLoopVecEnv):
    """Needs memory: a cue shown only at the first step decides the reward of every step.

    Each episode draws a cue, 0 or 1, shown as the observation ``[+1, 1]`` or ``[-1, 1]`` at its
    first step and never again (``[0, 0]`` afterwards); it lasts ``length`` steps and every action
    equal to the cue earns 1 (2 discrete actions). A feed-forward policy can only answer the first
    step right and guess the others: expected return ``1 + (length - 1) / 2``. A policy that
    remembers the cue earns ``length``, and its value at later steps is the remaining steps, where
    a memoryless value can only average over the two cues.
    """

    def __init__(self, num_envs: int, length: int, seed: int = 0, batch_size: int | None = None):
        if length < 1:
            raise ValueError(f"length={length} must be >= 1")
        super().__init__(
            EnvSpec(
                id="CueMemory",
                obs_shape=(2,),
                obs_dtype="float32",
                action_kind="discrete",
                num_actions=2,
                num_envs=num_envs,
                batch_size=batch_size or num_envs,
                max_episode_steps=length,
            )
        )
        self.length = length
        self._rng = np.random.default_rng(seed)
        self.cue = np.zeros(num_envs, np.int64)
        self._elapsed = np.zeros(num_envs, np.int64)

    def _reset_env(self, index: int) -> np.ndarray:
        self._elapsed[index] = 0
        self.cue[index] = self._rng.integers(2)
        return np.array([1.0 if self.cue[index] else -1.0, 1.0], np.float32)

    def _step_env(self, index: int, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        self._elapsed[index] += 1
        reward = 1.0 if int(action) == self.cue[index] else 0.0
        return np.zeros(2, np.float32), reward, bool(self._elapsed[index] >= self.length), False


class CueChoices(PythonLoopVecEnv):
    """MultiDiscrete actions: ``choices`` sub-actions of ``options`` values each; one-step episodes.

    The observation shows one cue per sub-action (one-hot, ``choices x options`` floats); the reward is the
    fraction of sub-actions equal to their cue. A uniformly random policy earns ``1 / options``; a policy that
    maps each cue to its own sub-action earns 1, which a distribution that mixes up the sub-actions' logits
    (or their order) cannot.
    """

    def __init__(self, num_envs: int, choices: int = 3, options: int = 4, seed: int = 0, batch_size: int | None = None):
        super().__init__(
            EnvSpec(id="CueChoices", obs_shape=(choices * options,), obs_dtype="float32", action_kind="multi_discrete",
                    action_nvec=(options,) * choices, action_shape=(choices,), num_envs=num_envs,
                    batch_size=batch_size or num_envs, max_episode_steps=1)
        )
        self.choices, self.options = choices, options
        self._rng = np.random.default_rng(seed)
        self.cue = np.zeros((num_envs, choices), np.int64)

    def _reset_env(self, index: int) -> np.ndarray:
        self.cue[index] = self._rng.integers(self.options, size=self.choices)
        return np.eye(self.options, dtype=np.float32)[self.cue[index]].reshape(-1)

    def _step_env(self, index: int, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        reward = float(np.mean(np.asarray(action) == self.cue[index]))
        return np.zeros(self.choices * self.options, np.float32), reward, True, False


class MaskedChoices(PythonLoopVecEnv):
    """Legal-action masks: a Dict observation ``{"action_mask": [A] flags}`` (flattened, ``EnvSpec.legal_actions``).

    Every step a random 2..A-1 of the ``A`` actions are legal; the highest legal one earns 1, any other legal one
    0, and an illegal action raises ``ValueError`` (the run fails), so an algorithm that ever picks one is caught.
    Episodes end by a time limit of ``length`` steps. Random legal play earns about ``length x 0.3``; a policy that
    prefers higher actions among the legal ones earns ``length``.
    """

    def __init__(self, num_envs: int, length: int, actions: int = 6, seed: int = 0, batch_size: int | None = None):
        if actions < 3:
            raise ValueError(f"actions={actions} must be >= 3")
        super().__init__(
            EnvSpec(id="MaskedChoices", obs_shape=(actions,), obs_dtype="float32", action_kind="discrete",
                    num_actions=actions, num_envs=num_envs, batch_size=batch_size or num_envs,
                    max_episode_steps=length, obs_keys=("action_mask",), obs_key_sizes=(actions,), action_mask=True)
        )
        self.length, self.actions = length, actions
        self._rng = np.random.default_rng(seed)
        self.legal = np.zeros((num_envs, actions), bool)
        self._elapsed = np.zeros(num_envs, np.int64)
        self.illegal_taken = 0

    def _draw(self, index: int) -> np.ndarray:
        k = int(self._rng.integers(2, self.actions))
        self.legal[index] = False
        self.legal[index, self._rng.choice(self.actions, size=k, replace=False)] = True
        return self.legal[index].astype(np.float32)

    def _reset_env(self, index: int) -> np.ndarray:
        self._elapsed[index] = 0
        return self._draw(index)

    def _step_env(self, index: int, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        a = int(action)
        if not self.legal[index, a]:
            self.illegal_taken += 1
            raise ValueError(f"MaskedChoices: action {a} is illegal here (legal: {np.flatnonzero(self.legal[index])})")
        reward = float(a == np.flatnonzero(self.legal[index]).max())
        self._elapsed[index] += 1
        return self._draw(index), reward, False, bool(self._elapsed[index] >= self.length)


def _steps_from(cfg: EnvConfig, what: str) -> int:
    if cfg.max_episode_steps < 1:
        raise ValueError(f"this probe env reads its {what} from env.max_episode_steps; set it >= 1 (e.g. 10)")
    return cfg.max_episode_steps


def make_constant_reward(cfg: EnvConfig, seed: int) -> ConstantRewardTimeLimit:
    """Factory for ``EnvConfig(factory="envs.probe:make_constant_reward", max_episode_steps=H)``."""
    return ConstantRewardTimeLimit(cfg.num_envs, _steps_from(cfg, "horizon"), batch_size=cfg.envs_per_recv)


def make_constant_reward_box(cfg: EnvConfig, seed: int) -> ConstantRewardTimeLimit:
    """``make_constant_reward`` with one continuous action in ``[-1, 1]`` (SAC, TD3), ignored as the discrete one is."""
    return ConstantRewardTimeLimit(cfg.num_envs, _steps_from(cfg, "horizon"), batch_size=cfg.envs_per_recv,
                                   action_dim=1)


def make_terminal_reward(cfg: EnvConfig, seed: int) -> TerminalReward:
    """Factory for ``EnvConfig(factory="envs.probe:make_terminal_reward", max_episode_steps=L)``."""
    return TerminalReward(cfg.num_envs, _steps_from(cfg, "length"), batch_size=cfg.envs_per_recv)


def make_cue_memory(cfg: EnvConfig, seed: int) -> CueMemory:
    """Factory for ``EnvConfig(factory="envs.probe:make_cue_memory", max_episode_steps=L)``."""
    return CueMemory(cfg.num_envs, _steps_from(cfg, "length"), seed=seed, batch_size=cfg.envs_per_recv)


def make_cue_choices(cfg: EnvConfig, seed: int) -> CueChoices:
    """Factory for ``EnvConfig(factory="envs.probe:make_cue_choices")``: 3 sub-actions of 4 values."""
    return CueChoices(cfg.num_envs, seed=seed, batch_size=cfg.envs_per_recv)


def make_masked_choices(cfg: EnvConfig, seed: int) -> MaskedChoices:
    """Factory for ``EnvConfig(factory="envs.probe:make_masked_choices", max_episode_steps=L)``: 6 actions."""
    return MaskedChoices(cfg.num_envs, _steps_from(cfg, "length"), seed=seed, batch_size=cfg.envs_per_recv)
