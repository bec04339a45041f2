"""Self-play settings (``Experiment.selfplay``), read by ``srljax.selfplay.trainer`` in the single-process loop.

    python -m launch.local configs/connect_four_selfplay.py                                  # PFSP over a pool
    python -m launch.local configs/connect_four_selfplay.py selfplay.sampling=latest         # plain self-play
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

OPENSPIEL_FACTORY = "envs.openspiel:make_openspiel"


@dataclass(frozen=True)
class SelfPlayConfig:
    """The learner plays a two-player game (``env.factory=envs.openspiel:make_openspiel``) against opponents drawn
    from a pool of its own snapshots (``srljax/selfplay/pool.py``), rated by Elo, and is evaluated against the
    game's fixed bots."""

    enabled: bool = False
    pool_size: int = 8
    """snapshots kept (the oldest leaves); each is also written to ``RUN_DIR/pool/v<version>.msgpack``."""
    snapshot_every: int = 10
    """updates between snapshots of the learning policy."""
    sampling: Literal["pfsp", "uniform", "recency", "latest"] = "pfsp"
    """how a game's opponent is drawn from the pool: ``pfsp`` (weight ``(1 - p) ** pfsp_power``, p the learner's
    mean score against it), ``uniform``, ``recency`` (weight by rank, newest most) or ``latest`` (only the current
    policy: plain self-play)."""
    pfsp_power: float = 2.0
    latest_share: float = 0.2
    """the share of games against the current policy itself, under any ``sampling``."""
    elo_k: float = 16.0
    bots: tuple[str, ...] = ("random", "mcts100")
    """fixed opponents of the evaluation: ``random`` (OpenSpiel's uniform random bot) or ``mcts<N>`` (OpenSpiel's MCTS
    bot with N simulations per move and random rollouts); one ``eval.jsonl`` row per bot and evaluation."""
    bot_games: int = 200
    """games per bot and evaluation, the learner's seat alternating (first in even games), fixed seeds."""
    bot_every_updates: int = 0
    """evaluate against the bots every N updates; 0: only at the end of the run."""


def selfplay_problems(cfg: Any) -> list[str]:
    s = cfg.selfplay
    if not s.enabled:
        return []
    out = []
    if cfg.env.factory != OPENSPIEL_FACTORY:
        out.append(f"selfplay.enabled=true needs a two-player game: env.factory={OPENSPIEL_FACTORY} with "
                   f"env.options.game=<an OpenSpiel game> (this env: {cfg.env.factory or cfg.env.id!r}, which has no "
                   "second seat for an opponent)")
    if cfg.layout.mode != "single":
        out.append(f"selfplay.enabled=true with layout.mode={cfg.layout.mode}: self-play runs in the single-process "
                   "loop only (its opponents act inside the env); set layout.mode=single")
    if getattr(cfg.algo, "consumes", "segments") != "segments" or getattr(cfg.algo, "lstm_size", 0):
        out.append("selfplay.enabled=true takes a feed-forward segment algorithm (algo=ppo or impala, algo.lstm_size=0): "
                   "opponents act from a pool of stateless snapshots")
    if cfg.trainer.overlap_collection:
        out.append("selfplay.enabled=true with trainer.overlap_collection=true: the opponents' params change between "
                   "updates while a collector thread plays; drop the override")
    if s.pool_size < 1:
        out.append(f"selfplay.pool_size={s.pool_size} must be >= 1 (snapshots kept as opponents)")
    if s.snapshot_every < 1 or s.bot_games < 0 or s.bot_every_updates < 0:
        out.append(f"selfplay.snapshot_every={s.snapshot_every} must be >= 1, selfplay.bot_games={s.bot_games} and "
                   f"selfplay.bot_every_updates={s.bot_every_updates} >= 0")
    if not 0.0 <= s.latest_share <= 1.0 or s.pfsp_power < 0 or s.elo_k <= 0:
        out.append(f"selfplay.latest_share={s.latest_share} must be in [0, 1], selfplay.pfsp_power={s.pfsp_power} "
                   f">= 0 and selfplay.elo_k={s.elo_k} > 0")
    if s.sampling not in ("pfsp", "uniform", "recency", "latest"):
        out.append(f"selfplay.sampling={s.sampling!r}: use pfsp, uniform, recency or latest")
    bad = [b for b in s.bots if not re.fullmatch(r"random|mcts[1-9][0-9]*", b)]
    if bad:
        out.append(f"selfplay.bots={bad}: each bot is random or mcts<N> (N simulations per move), e.g. mcts100")
    return out
