"""envpool behind the VecEnv interface: Atari (``*-v5``), MuJoCo (``*-v4``), classic control.

    env = EnvpoolVecEnv(EnvConfig(id="Breakout-v5", num_envs=8), seed=1)
    ts = env.reset()       # obs uint8 [8, 4, 84, 84]; float observations arrive as float32

Atari gets envpool's standard preprocessing from ``env.options`` (``envs/atari.py``: episodic life,
reward clipping, sticky actions, frame stack, 84x84 gray, no-op starts). ``max_episode_steps`` counts agent steps
(envpool's Atari default is 27,000 agent steps = 108,000 frames at frame skip 4).

Episode statistics are true whole-game numbers. envpool's info keys used here (checked against
envpool 1.2.5 on CartPole-v1, Breakout-v5, SpaceInvaders-v5):

* ``env_id`` (int32): which env each row is.
* Atari ``reward`` (float32): the unclipped reward, also when ``reward_clip`` clips the learning one.
* Atari ``terminated`` (int32): 1 only when the game is over; with ``episodic_life`` the top-level
  ``terminated`` is also set on every lost life (``lives`` drops), which is not a game over.
* ``elapsed_step``: agent steps in the game so far; a reset row after a lost life leaves it
  unchanged, a reset row after a game over or time limit sets it to 0. ``EpisodeStats`` counts
  the same way.
"""

from __future__ import annotations

import difflib
import warnings

import envpool
import numpy as np

from envs.atari import atari_options
from envs.envpool_batch import EnvpoolBatch
from envs.episode_stats import EpisodeStats
from envs.football import CheckpointReward, football_options, is_football
from envs.spaces import ActionConverter, ObsConverter, spec_from_spaces
from srljax.config import EnvConfig
from srljax.types import TimeStep

# envpool builds gymnasium Boxes from float64 bounds; gymnasium then warns, with raw colour codes, that it
# cast them to float32 (the dtype envpool steps in). It says nothing to a user: filtered here, at its source.
warnings.filterwarnings("ignore", message=r".*precision lowered by casting to float32", category=UserWarning,
                        module="gymnasium.spaces.box")


def is_atari(env_id: str) -> bool:
    """True for envpool's Atari games (``Pong-v5``, ``Breakout-v5``, ...)."""
    entry = envpool.registration.registry.specs.get(env_id)
    return entry is not None and entry[0] == "envpool.atari"


def check_known_id(env_id: str) -> None:
    """Raise ValueError naming ``env_id``, close envpool ids, and how to plug in your own env."""
    message = unknown_id_problem(env_id)
    if message:
        raise ValueError(message)


def unknown_id_problem(env_id: str) -> str | None:
    """None for a known envpool id, else the message naming close ids and the factory seam."""
    known = envpool.list_all_envs()
    if env_id in known:
        return None
    close = difflib.get_close_matches(env_id, known, n=5, cutoff=0.6)
    # difflib is case-sensitive; "halfcheetah-v4" should still find "HalfCheetah-v4".
    close += [k for k in known if k.lower() == env_id.lower() and k not in close]
    suggestion = f"did you mean {', '.join(close)}?" if close else "no envpool id is close to it."
    return (
        f"env.id={env_id!r} is not an envpool env id: {suggestion} "
        f"(envpool.list_all_envs() has {len(known)} ids.) "
        "For your own environment set EnvConfig(factory='my_package.my_module:make_env') where "
        "make_env(env_config, seed) returns a VecEnv (see envs/base.py); for a plain gymnasium env "
        "use factory='envs.gym_adapter:make_gymnasium' with id set to the gymnasium id."
    )


def envpool_options(cfg: EnvConfig, seed: int) -> dict:
    """Keyword arguments for ``envpool.make``; warns about options that do not apply to ``cfg.id``."""
    options: dict = dict(num_envs=cfg.num_envs, batch_size=cfg.envs_per_recv, seed=seed)
    if cfg.num_threads > 0:
        options["num_threads"] = cfg.num_threads
    if cfg.max_episode_steps > 0:
        options["max_episode_steps"] = cfg.max_episode_steps
    if is_atari(cfg.id):
        options.update(atari_options(cfg))
    elif cfg.options and not is_football(cfg.id):  # Football's are applied in this class (envs/football.py)
        # envpool rejects Atari keywords for other tasks, so they are dropped; say so, since the user
        # evidently expected them to do something.
        changed = [f"{n}={v!r}" for n, v in cfg.options.items()]
        warnings.warn(
            f"env.id={cfg.id!r} is not an Atari game; the Atari-only options {', '.join(changed)} are ignored",
            stacklevel=4,  # point at the caller of envs.make
        )
    return options


class EnvpoolVecEnv(EnvpoolBatch):
    """One envpool instance (``env_type="gymnasium"``) with true episode statistics."""

    def __init__(self, cfg: EnvConfig, seed: int):
        check_known_id(cfg.id)
        self._atari = is_atari(cfg.id)
        # With episodic life a lost life ends the learning episode but not the game.
        self._game_over_from_info = self._atari and atari_options(cfg)["episodic_life"]
        self._env = envpool.make(cfg.id, env_type="gymnasium", **envpool_options(cfg, seed))
        self.spec = spec_from_spaces(
            cfg.id,
            self._env.observation_space,
            self._env.action_space,
            num_envs=cfg.num_envs,
            batch_size=cfg.envs_per_recv,
            max_episode_steps=int(self._env.spec.config.max_episode_steps),
            image_channels_declared=cfg.image_channels,
        )
        self._to_agent_obs = ObsConverter(self._env.observation_space)
        self._to_env_action = ActionConverter(self._env.action_space)
        self._stats = EpisodeStats(cfg.num_envs)
        shaped = is_football(cfg.id) and football_options(cfg)["reward"] == "checkpoints"
        self._checkpoints = CheckpointReward(cfg.num_envs) if shaped else None

    def _timestep(
        self, obs: np.ndarray, reward: np.ndarray, terminated: np.ndarray, truncated: np.ndarray, info: dict
    ) -> TimeStep:
        """Convert one envpool result (rows in ``info["env_id"]`` order) and account its statistics."""
        env_id = np.asarray(info["env_id"], np.int32)
        terminated = np.asarray(terminated, bool)
        truncated = np.asarray(truncated, bool)
        raw_reward = info["reward"] if self._atari else reward
        game_over = (np.asarray(info["terminated"], bool) if self._game_over_from_info else terminated) | truncated
        done = terminated | truncated
        episode_return, episode_length = self._stats.update(env_id, raw_reward, done, game_over)
        return TimeStep(
            obs=self._to_agent_obs(obs),
            reward=self._learning_reward(obs, reward, done, env_id, info),
            terminated=terminated,
            truncated=truncated,
            env_id=env_id,
            episode_return=episode_return,
            episode_length=episode_length,
        )

    def _learning_reward(self, obs, reward, done: np.ndarray, env_id: np.ndarray, info: dict) -> np.ndarray:
        """envpool's reward, or with Football's ``reward=checkpoints`` the shaped one (statistics keep the score)."""
        if self._checkpoints is None:
            return np.asarray(reward, np.float32)
        return self._checkpoints(obs, np.asarray(reward, np.float32), np.asarray(info["ball_owned_team"]), done,
                                 env_id)
