"""``EnvConfig``: which environment an actor steps, and how many copies (``envs/`` builds it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EnvConfig:
    """Which environment one actor steps, and how many copies."""

    id: str = "CartPole-v1"
    """envpool task id (``Pong-v5``, ``HalfCheetah-v4``, ``CartPole-v1``, ...)."""
    num_envs: int = 8
    """environments owned by one actor (one envpool instance)."""
    batch_size: int = 0
    """environments returned per ``recv``; 0 means ``num_envs`` (sync). Smaller: async env ring."""
    num_threads: int = 0
    """envpool worker threads; 0 lets envpool choose."""
    max_episode_steps: int = 0
    """time limit in agent steps; 0 keeps the env's default (Atari: 27,000; MuJoCo: 1,000)."""
    # Atari-only options (envpool's standard preprocessing: 84x84 gray, frame skip 4, ...).
    episodic_life: bool = True
    """Atari: a lost life ends the learning episode (stats still report whole games)."""
    reward_clip: bool = True
    """Atari: learn from sign(reward); stats report the unclipped return."""
    repeat_action_probability: float = 0.0
    """Atari: sticky actions (0.25 is the Machado et al. protocol)."""
    stack_num: int = 4
    img_height: int = 84
    img_width: int = 84
    noop_max: int = 30
    full_action_space: bool = False
    factory: str = ""
    """user-defined env: ``"package.module:make_fn"``, called as ``make_fn(env_config, seed)``
    and returning an object with the VecEnv interface (see ``envs/base.py``)."""
    obs_mask: tuple[int, ...] = ()
    """keep only these indices of the flattened observation (any env), e.g. ``(0, 2)``: CartPole without
    its velocities, a partially observable task; ``()`` keeps everything."""

    @property
    def envs_per_recv(self) -> int:
        return self.batch_size or self.num_envs

    @property
    def is_async(self) -> bool:
        return self.envs_per_recv < self.num_envs
