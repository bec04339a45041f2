"""The envpool Atari family's options (``env.options`` for ``Pong-v5``, ``Breakout-v5``, ...).

envpool's standard preprocessing (84x84 gray, frame skip 4, ...), with envpool's own option names; these
are forwarded to ``envpool.make`` for Atari games only (``envs/envpool_env.py``). No envpool import here:
config checks read the defaults without loading it.
"""

from __future__ import annotations

from typing import Any

from envs.options import option_problems, with_defaults
from srljax.config import EnvConfig

ATARI_OPTIONS: dict[str, Any] = {
    "episodic_life": True,  # a lost life ends the learning episode (stats still report whole games)
    "reward_clip": True,  # learn from sign(reward); stats report the unclipped return
    "repeat_action_probability": 0.0,  # sticky actions (0.25 is the Machado et al. protocol)
    "stack_num": 4,
    "img_height": 84,
    "img_width": 84,
    "noop_max": 30,
    "full_action_space": False,
}


def atari_options(cfg: EnvConfig) -> dict[str, Any]:
    """The Atari options ``cfg`` builds with: the defaults above, overridden by ``env.options``."""
    return with_defaults(cfg.options, ATARI_OPTIONS)


def atari_option_problems(cfg: EnvConfig) -> list[str]:
    out = option_problems(cfg.options, ATARI_OPTIONS, f"the Atari game {cfg.id}")
    p = cfg.options.get("repeat_action_probability", 0.0)
    if isinstance(p, (int, float)) and not 0.0 <= p <= 1.0:
        out.append(f"env.options.repeat_action_probability={p} must be in [0, 1]")
    return out
