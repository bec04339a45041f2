"""Shared data shapes that cross the seams: env -> shell -> algorithm -> wire.

Shape letters: T time, B batch (envs), N agents, ``*O`` observation shape, ``*A`` action shape (a
multi-agent env's agents are an axis of ``*O`` and ``*A``: ``EnvSpec.num_agents``).
Everything here is plain data (NamedTuples / frozen dataclasses of numpy or jax arrays), so it
can be jitted, sharded and sent over the wire codec without pickle.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np

ActionKind = Literal["discrete", "continuous", "multi_discrete"]


RETURN_ACC = "ret_acc"
"""The segment extra holding each row's running discounted return (``algos.base.Algorithm.return_gamma``)."""


def channels_from_shape(shape: tuple[int, ...]) -> str:
    """Which axis of an image observation ``shape`` (3-D) holds its channels, by shape alone: ``"first"`` when the
    first axis is <= 4 and the last is not (envpool Atari ``4x84x84``), ``"last"`` for the reverse (envpool
    Football ``72x96x4``), else ``""`` (ambiguous, or not an image)."""
    if len(shape) != 3 or (shape[0] <= 4) == (shape[-1] <= 4):
        return ""
    return "first" if shape[0] <= 4 else "last"


@dataclass(frozen=True)
class EnvSpec:
    """What an algorithm needs to know about an environment batch."""

    id: str
    obs_shape: tuple[int, ...]
    obs_dtype: str  # numpy dtype name, e.g. "float32" or "uint8"
    action_kind: ActionKind
    num_actions: int = 0  # discrete only
    action_shape: tuple[int, ...] = ()  # continuous: (action_dim,); multi_discrete: (K,); discrete: ()
    action_nvec: tuple[int, ...] = ()  # multi_discrete only: the number of choices of each of the K sub-actions
    action_low: tuple[float, ...] = ()  # continuous only
    action_high: tuple[float, ...] = ()
    num_envs: int = 1  # environments owned by one VecEnv
    batch_size: int = 1  # environments returned by one recv (== num_envs in sync mode)
    max_episode_steps: int = 0  # 0: unknown / none
    image_channels: str = ""  # 3-D (image) observations: "first" (C, H, W) or "last" (H, W, C); "" otherwise
    # A Dict observation flattened to one float32 vector (envs/spaces.py): its leaves' keys ("a/b" when nested)
    # and sizes, in order; empty for an array observation.
    obs_keys: tuple[str, ...] = ()
    obs_key_sizes: tuple[int, ...] = ()
    # The agent axis (``envs/multi_agent.py``). With num_agents N > 1, obs is [B, N, F] float32, one packed
    # row per agent: [own view (agent_obs_size) | global state (state_size) | own reward (1 if agent_rewards)
    # | legal-action flags (num_actions if action_mask)], and action is [B, N] (action_shape (N,)).
    # TimeStep.reward [B] is the team reward (the sum over agents when rewards are per agent).
    num_agents: int = 1
    agent_obs_size: int = 0
    state_size: int = 0  # 0: the env gives no global state
    agent_rewards: bool = False
    action_mask: bool = False
    # Players taking turns in one game (pgx board games: 2), where obs is the player to move's view and a step's
    # reward the mover's; 1 for every other env.
    players: int = 1

    @property
    def channels(self) -> str:
        """``image_channels``, or for a hand-built spec that left it empty, what the image's shape says (the axis of
        size <= 4 when only one end is, ``channels_from_shape``); ``""`` when that is ambiguous or not an image."""
        return self.image_channels or channels_from_shape(self.obs_shape)

    @property
    def action_dtype(self) -> str:
        return "float32" if self.action_kind == "continuous" else "int32"

    @property
    def legal_actions(self) -> tuple[int, int] | None:
        """A single-agent Dict observation's ``action_mask`` leaf (``envs/spaces.py``): where its legal-action flags
        lie in the flattened observation, ``(start, stop)``; None when the env has no mask."""
        if self.num_agents != 1 or not self.action_mask or ACTION_MASK_KEY not in self.obs_keys:
            return None
        i = self.obs_keys.index(ACTION_MASK_KEY)
        start = sum(self.obs_key_sizes[:i])
        return start, start + self.obs_key_sizes[i]

    def agent_row(self) -> dict[str, slice]:
        """Where the parts of a multi-agent obs row lie (see the fields above); absent parts are empty slices."""
        sizes = {"view": self.agent_obs_size, "state": self.state_size, "reward": int(self.agent_rewards),
                 "mask": self.num_actions if self.action_mask else 0}
        out, start = {}, 0
        for name, size in sizes.items():
            out[name] = slice(start, start + size)
            start += size
        return out


ACTION_MASK_KEY = "action_mask"
"""The Dict observation key whose leaf flags the legal actions (1 legal, 0 not), as PettingZoo's and OpenSpiel's
wrappers name it; ``EnvSpec.legal_actions`` says where it lies once flattened."""


class TimeStep(NamedTuple):
    """One recv/step result for ``B = spec.batch_size`` environments (numpy, leading axis B).

    ``reward``, ``terminated`` and ``truncated`` describe the transition that *led to* ``obs``
    (dm_env convention). envpool autoresets lazily: the step after a done returns the first
    observation of the next episode with reward 0 and both flags False; the action sent for
    that step is ignored. A transition starting at an observation whose ``terminated`` or
    ``truncated`` is set therefore crosses an episode boundary and must not be learned from.
    """

    obs: np.ndarray  # [B, *O]
    reward: np.ndarray  # [B] float32, the reward used for learning (clipped on Atari if asked)
    terminated: np.ndarray  # [B] bool: the MDP ended (bootstrap with 0)
    truncated: np.ndarray  # [B] bool: cut by a time limit (bootstrap from V(obs))
    env_id: np.ndarray  # [B] int32, which env of the VecEnv each row belongs to
    episode_return: np.ndarray  # [B] float32, true (unclipped, whole-game) return; NaN unless a game ended here
    episode_length: np.ndarray  # [B] int32, whole-game length in env steps; 0 unless a game ended here


class Trajectory(NamedTuple):
    """A time-major segment of ``T + 1`` consecutive TimeSteps of ``B`` envs plus agent outputs.

    Row ``t`` holds the observation at time t, the reward/flags that led to it, and what the
    agent did there (``action``, ``extras`` such as behaviour ``logp`` and ``value``). The
    segment's last row is the bootstrap row; its action/extras are what the agent computed
    there (used for bootstrapping values) and the next segment starts with that same row.
    Transition t (t < T) goes from row t to row t + 1 and is valid iff row t is not done.
    """

    obs: Any  # [T+1, B, *O]
    action: Any  # [T+1, B, *A]
    reward: Any  # [T+1, B]
    terminated: Any  # [T+1, B]
    truncated: Any  # [T+1, B]
    extras: dict[str, Any]  # name -> [T+1, B, ...], e.g. {"logp", "value"}
    policy_version: Any  # [B] int32: the oldest params version used to act in this segment


class ReplayBatch(NamedTuple):
    """``N`` transitions sampled from a replay (``srljax.replay.buffer.Replay``), sample-major, with their n-step windows.

    Transition i starts at a stored row (``obs``, the ``action`` taken there) and its window holds
    the next n transitions of the same env stream (``reward``, ``terminated``, ``truncated`` as in
    ``TimeStep``: what led to rows 1..n after the start). ``next_obs`` is the bootstrap row: the row
    after the window's first done transition, or after its last when nothing ends (for a truncation,
    the final observation). Entries after the first done belong to the next episode and must be
    ignored (``algos.returns.n_step_return`` does). Every leaf is split on its first axis when sharded.
    """

    obs: Any  # [N, *O]
    action: Any  # [N, *A]
    reward: Any  # [N, n]
    terminated: Any  # [N, n]
    truncated: Any  # [N, n]
    next_obs: Any  # [N, *O]
    weight: Any  # [N] float32 importance weight (1 for uniform replay)


class SequenceBatch(NamedTuple):
    """``N`` sequences of ``L`` consecutive rows of one env stream each, sampled from a sequence replay (R2D2).

    Rows are ``TimeStep`` rows with the action taken there: row 0 is the sampled start row, ``reward``,
    ``terminated`` and ``truncated`` of row t led to it from row t-1 (row 0's are from before the
    sequence). Episodes may end inside a sequence: a row after a done row starts a new episode (envpool's
    reset row), where a recurrent unroll resets its state (``algos.recurrent.episode_starts``). ``state``
    holds what the actor stored with the start row (R2D2: the LSTM carry it acted with, ``lstm_c`` and
    ``lstm_h`` ``[N, H]``). Every leaf is split on its first axis when sharded.
    """

    obs: Any  # [N, L, *O]
    action: Any  # [N, L, *A]
    reward: Any  # [N, L]
    terminated: Any  # [N, L]
    truncated: Any  # [N, L]
    state: Any  # {name: [N, ...]} stored at row 0
    weight: Any  # [N] float32 importance weight


def spec_to_wire(spec: EnvSpec) -> dict[str, Any]:
    """An ``EnvSpec`` as a msgpack-able dict (the configure message, the subprocess env's pipe)."""
    return {f.name: list(v) if isinstance(v := getattr(spec, f.name), tuple) else v for f in dataclasses.fields(spec)}


def spec_from_wire(data: Mapping[str, Any]) -> EnvSpec:
    """Inverse of ``spec_to_wire``; ValueError if it is not an env spec."""
    try:
        fields = {f.name: tuple(data[f.name]) if isinstance(data[f.name], list) else data[f.name]
                  for f in dataclasses.fields(EnvSpec) if f.name in data}
        return EnvSpec(**fields)
    except (TypeError, KeyError) as error:
        raise ValueError(f"not an env spec: {error}") from None
