"""Multi-agent envs behind the VecEnv interface: the agent axis rides inside obs and action.

A multi-agent env is still a batch of ``B`` envs: ``TimeStep.obs`` is ``[B, N, F]`` float32 (one
packed row per agent, laid out by ``EnvSpec.agent_row()``: own view, global state, own reward,
legal-action flags), the action is ``[B, N]`` int32, and reward / flags / episode statistics are per
env (``reward`` is the team reward: envpool's shared reward, or the sum of the agents' rewards).
Every shell (single-process loop, actors, wire, segments) therefore runs unchanged; the algorithm
(``algos/mappo.py``) reads the agent axis::

    env = envs.make(EnvConfig(id="LevelBasedForaging-v0", num_envs=8), seed=1)   # envpool, 2 agents
    env.spec.num_agents, env.spec.obs_shape          # 2, (2, 18): 12 view + 6 action flags
    ts = env.reset()                                 # ts.obs [8, 2, 18]
    ts = env.step(np.zeros((8, 2), np.int32))

A PettingZoo parallel env (``possible_agents``, ``observation_space(agent)``, ``action_space(agent)``,
``reset(seed=) -> (obs, infos)``, ``step(actions) -> (obs, rewards, terminations, truncations, infos)``,
dicts keyed by agent) plugs in through the factory seam::

    EnvConfig(factory="envs.multi_agent:make_pettingzoo", id="mpe2.simple_spread_v3:parallel_env")

where ``id`` names a callable returning one such env (keyword arguments are not passed; wrap it).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from typing import Any

import gymnasium
import numpy as np

from envs.envpool_batch import EnvpoolBatch
from envs.episode_stats import EpisodeStats
from envs.python_loop import PythonLoopVecEnv
from srljax.config import EnvConfig
from srljax.types import EnvSpec, TimeStep

ENVPOOL_NUM_AGENTS = {"LevelBasedForaging-v0": 2, "Jumanji/LevelBasedForaging-v0": 2,
                      "RobotWarehouse-v0": 4, "Jumanji/RobotWarehouse-v0": 4}
"""envpool tasks that step several agents as one env, and their agents (checked against envpool 1.2.5 by
``tests/test_policies.py``): a dict observation with ``agents_view`` [N, V] and ``action_mask`` [N, A], an action
[N] of ints in [0, A), one shared reward. Known before launch, so the agent table is checked without an env."""


def is_multi_agent_envpool(env_id: str) -> bool:
    return env_id in ENVPOOL_NUM_AGENTS


def num_agents_before_launch(env_cfg: EnvConfig) -> int | None:
    """The env's agent count when it is known without building the env (envpool's multi-agent ids), else None."""
    return None if env_cfg.factory else ENVPOOL_NUM_AGENTS.get(env_cfg.id)


def pack_rows(spec: EnvSpec, view: np.ndarray, state: np.ndarray | None = None, reward: np.ndarray | None = None,
              mask: np.ndarray | None = None) -> np.ndarray:
    """Agent parts -> obs ``[B, N, F]`` float32 in ``spec.agent_row()`` order.

    ``view`` [B, N, *] (flattened per agent), ``state`` [B, S] (the same for every agent) or [B, N, S],
    ``reward`` [B, N], ``mask`` [B, N, A] (truthy: legal)."""
    b, n = view.shape[:2]
    parts = [view.reshape(b, n, -1)]
    if spec.state_size:
        state = np.asarray(state).reshape(b, -1, spec.state_size)
        parts.append(np.broadcast_to(state, (b, n, spec.state_size)))
    if spec.agent_rewards:
        parts.append(np.asarray(reward).reshape(b, n, 1))
    if spec.action_mask:
        parts.append(np.asarray(mask).reshape(b, n, spec.num_actions))
    return np.concatenate([np.asarray(p, np.float32) for p in parts], axis=-1)


class EnvpoolMultiAgentVecEnv(EnvpoolBatch):
    """envpool's ``LevelBasedForaging-v0`` / ``RobotWarehouse-v0`` (jumanji ports) with the agent axis packed."""

    def __init__(self, cfg: EnvConfig, seed: int):
        import envpool  # slow to load

        from envs.envpool_env import envpool_options

        self._env = envpool.make(cfg.id, env_type="gymnasium", **envpool_options(cfg, seed))
        obs_space, act_space = self._env.observation_space, self._env.action_space
        view, mask = obs_space["agents_view"], obs_space["action_mask"]
        num_agents, num_actions = int(view.shape[0]), int(mask.shape[1])
        assert act_space.shape == (num_agents,), (cfg.id, act_space)
        common = dict(id=cfg.id, obs_dtype="float32", action_kind="discrete", num_actions=num_actions,
                      action_shape=(num_agents,), num_envs=cfg.num_envs, batch_size=cfg.envs_per_recv,
                      max_episode_steps=int(self._env.spec.config.max_episode_steps), num_agents=num_agents,
                      agent_obs_size=int(np.prod(view.shape[1:])), action_mask=True)
        size = int(np.prod(view.shape[1:])) + num_actions
        self.spec = EnvSpec(obs_shape=(num_agents, size), **common)
        self._stats = EpisodeStats(cfg.num_envs)

    def _to_env_action(self, action: np.ndarray) -> np.ndarray:
        return np.asarray(action, np.int32)

    def _timestep(self, obs: dict, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray,
                  info: dict) -> TimeStep:
        env_id = np.asarray(info["env_id"], np.int32)
        terminated, truncated = np.asarray(terminated, bool), np.asarray(truncated, bool)
        done = terminated | truncated
        episode_return, episode_length = self._stats.update(env_id, reward, done, done)
        return TimeStep(
            obs=pack_rows(self.spec, obs["agents_view"], mask=obs["action_mask"]),
            reward=np.asarray(reward, np.float32),
            terminated=terminated,
            truncated=truncated,
            env_id=env_id,
            episode_return=episode_return,
            episode_length=episode_length,
        )


class ParallelEnvVecEnv(PythonLoopVecEnv):
    """``num_envs`` PettingZoo-style parallel envs stepped in a Python loop (for envs envpool lacks).

    Requirements, each checked with a clear error: every agent of ``possible_agents`` acts at every step
    (an episode ends for all of them at once: when any agent terminates or is truncated), every agent
    has the same ``Discrete`` action space and a ``Box`` observation of the same size. Optional: a global
    state (``env.state()`` with ``env.state_space``), legal actions (PettingZoo's convention: observation
    ``{"observation": ..., "action_mask": ...}``). Rewards are kept per
    agent (``spec.agent_rewards``); ``TimeStep.reward`` and the episode statistics are their sum.
    """

    def __init__(self, make_env: Callable[[], Any], num_envs: int, seed: int, batch_size: int | None = None,
                 max_episode_steps: int = 0):
        self._envs = [make_env() for _ in range(num_envs)]
        first = self._envs[0]
        self._agents = list(first.possible_agents)
        name = getattr(first, "metadata", {}).get("name", type(first).__name__)
        obs_space = first.observation_space(self._agents[0])
        self._dict_obs = isinstance(obs_space, gymnasium.spaces.Dict)
        view_space = obs_space["observation"] if self._dict_obs else obs_space
        act_space = first.action_space(self._agents[0])
        problems = []
        if not isinstance(act_space, gymnasium.spaces.Discrete) or int(act_space.start) != 0:
            problems.append(f"action space {act_space} is not Discrete(n) starting at 0")
        if not isinstance(view_space, gymnasium.spaces.Box):
            problems.append(f"observation space {view_space} is not a Box")
        for agent in self._agents[1:]:
            if first.action_space(agent) != act_space or first.observation_space(agent) != obs_space:
                problems.append(f"agent {agent!r}'s spaces differ from agent {self._agents[0]!r}'s (pad them to one "
                                "shape and one action set in a wrapper)")
        if problems:
            raise ValueError(f"{name}: cannot vectorise this parallel env: {'; '.join(problems)}")
        state_space = getattr(first, "state_space", None)
        self._has_state = state_space is not None and callable(getattr(first, "state", None))
        self._has_mask = self._dict_obs and "action_mask" in obs_space.spaces
        num_agents, num_actions = len(self._agents), int(act_space.n)
        view_size = int(np.prod(view_space.shape))
        spec = EnvSpec(id=name, obs_shape=(num_agents, 0), obs_dtype="float32", action_kind="discrete",
                       num_actions=num_actions, action_shape=(num_agents,), num_envs=num_envs,
                       batch_size=batch_size or num_envs, max_episode_steps=max_episode_steps,
                       num_agents=num_agents, agent_obs_size=view_size,
                       state_size=int(np.prod(state_space.shape)) if self._has_state else 0, agent_rewards=True,
                       action_mask=self._has_mask)
        row = spec.agent_row()
        super().__init__(dataclasses.replace(spec, obs_shape=(num_agents, row["mask"].stop)))
        self._next_seed: list[int | None] = [seed + i for i in range(num_envs)]
        self._steps = np.zeros(num_envs, np.int64)
        self._max_steps = max_episode_steps

    def _reset_env(self, index: int) -> np.ndarray:
        obs, _ = self._envs[index].reset(seed=self._next_seed[index])
        self._next_seed[index] = None
        self._steps[index] = 0
        return self._row(index, obs, np.zeros(len(self._agents)))

    def _step_env(self, index: int, action: Any) -> tuple[np.ndarray, float, bool, bool]:
        env = self._envs[index]
        obs, rewards, terms, truncs, _ = env.step({a: int(action[i]) for i, a in enumerate(self._agents)})
        missing = [a for a in self._agents if a not in obs]
        if missing and not (any(terms.values()) or any(truncs.values())):
            raise ValueError(f"{self.spec.id}: agents {missing} left before the episode ended; ParallelEnvVecEnv "
                             "needs every agent at every step (keep finished agents in with a no-op action)")
        reward = np.array([float(rewards.get(a, 0.0)) for a in self._agents])
        self._steps[index] += 1
        terminated = any(terms.get(a, False) for a in self._agents)
        truncated = not terminated and (any(truncs.get(a, False) for a in self._agents)
                                        or 0 < self._max_steps <= self._steps[index])
        # per-agent rewards travel in the rows; the env's reward (learning, statistics) is the team's sum
        return self._row(index, obs, reward), float(reward.sum()), terminated, truncated

    def _row(self, index: int, obs: dict, reward: np.ndarray) -> np.ndarray:
        env, zero = self._envs[index], np.zeros(self.spec.agent_obs_size)
        views = [np.asarray(obs[a]["observation"] if self._dict_obs else obs[a]) if a in obs else zero
                 for a in self._agents]
        mask = None
        if self._has_mask:
            mask = np.stack([np.asarray(obs[a]["action_mask"]) if a in obs else np.ones(self.spec.num_actions)
                             for a in self._agents])[None]
        state = np.asarray(env.state())[None] if self._has_state else None
        return pack_rows(self.spec, np.stack(views)[None], state=state, reward=reward[None], mask=mask)[0]

    def close(self) -> None:
        super().close()
        for env in self._envs:
            env.close()


def make_pettingzoo(cfg: EnvConfig, seed: int) -> ParallelEnvVecEnv:
    """Factory for ``EnvConfig(factory="envs.multi_agent:make_pettingzoo", id="package.module:make_env")``:
    ``id`` names a callable that returns one PettingZoo parallel env; ``max_episode_steps > 0`` truncates."""
    module, _, attr = cfg.id.partition(":")
    if not attr:
        raise ValueError(f"env.id={cfg.id!r}: with factory envs.multi_agent:make_pettingzoo, env.id names the "
                         "callable that returns one parallel env, as 'package.module:make_env' "
                         "(e.g. 'mpe2.simple_spread_v3:parallel_env')")
    try:
        make_env = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as error:
        raise ValueError(f"env.id={cfg.id!r} does not import ({error}); install the package or fix the name") from None
    return ParallelEnvVecEnv(make_env, cfg.num_envs, seed, batch_size=cfg.envs_per_recv,
                             max_episode_steps=cfg.max_episode_steps)
