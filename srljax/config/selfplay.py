"""Self-play settings (``Experiment.selfplay``), read by ``srljax.selfplay.trainer`` in the single-process loop.

    python -m launch.local configs/connect_four_selfplay.py                                  # PFSP over a pool
    python -m launch.local configs/connect_four_selfplay.py selfplay.sampling=latest         # plain self-play
    python -m launch.local configs/connect_four_league.py                                    # a league, as a worker graph
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
    """fixed opponents of the evaluation: ``random`` (OpenSpiel's uniform random bot), ``mcts<N>`` (OpenSpiel's MCTS
    bot with N simulations per move and random rollouts) or ``ckpt:RUN_DIR`` (a trained self-play run's policy,
    greedy; ``ckpt-sampled:RUN_DIR`` samples its moves: ``srljax/selfplay/checkpoint_bot.py``); one ``eval.jsonl``
    row per bot and evaluation."""
    bot_games: int = 200
    """games per bot and evaluation, the learner's seat alternating (first in even games), fixed seeds."""
    bot_every_updates: int = 0
    """evaluate against the bots every N updates; 0: only at the end of the run."""
    league: tuple[str, ...] = ()
    """a league (``srljax/selfplay/league.py``): one role per member, each a policy with its own train state and
    envs, e.g. ``("main", "main_exploiter", "league_exploiter")``; each role draws its opponents by its own rule
    from every member's snapshots (``pool_size`` kept per member; ``latest_share`` is the main agents' self-play
    share; the bots play the main agents). ``layout.mode=single``: members train in turn in one process
    (``srljax/loops/league.py``); ``distributed``: a trainer and ``layout.num_actors / members`` actors per
    member and a league manager (``srljax/system/managers/league_manager.py``). (): one learner against its own pool."""


def selfplay_problems(cfg: Any) -> list[str]:
    s = cfg.selfplay
    if not s.enabled:
        return []
    out = []
    if cfg.env.factory != OPENSPIEL_FACTORY:
        out.append(f"selfplay.enabled=true needs a two-player game: env.factory={OPENSPIEL_FACTORY} with "
                   f"env.options.game=<an OpenSpiel game> (this env: {cfg.env.factory or cfg.env.id!r}, which has no "
                   "second seat for an opponent)")
    if s.league:
        out += league_problems(cfg)
    elif cfg.layout.mode != "single":
        out.append(f"selfplay.enabled=true with layout.mode={cfg.layout.mode}: self-play against one learner's own "
                   "pool runs in the single-process loop only (its opponents act inside the env); set layout.mode=single, "
                   "or train a league (selfplay.league), which runs as a worker graph")
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
    out += bot_name_problems(s.bots)  # a ckpt bot's run folder: srljax.selfplay.checkpoint_bot, before launch
    return out


BOT_HELP = ("each bot is random, mcts<N> (OpenSpiel's MCTS, N simulations per move, e.g. mcts100), ckpt:RUN_DIR (a "
            "trained OpenSpiel self-play run's policy, greedy; RUN_DIR/checkpoints/<step> for one checkpoint) or "
            "ckpt-sampled:RUN_DIR (its moves sampled)")
CHECKPOINT_BOTS = ("ckpt:", "ckpt-sampled:")


def bot_name_problems(bots: tuple[str, ...] | list[str]) -> list[str]:
    """The names of ``selfplay.bots`` that are no bot (``BOT_HELP``)."""
    bad = [b for b in bots if not b.startswith(CHECKPOINT_BOTS) and not re.fullmatch(r"random|mcts[1-9][0-9]*", b)]
    return [f"selfplay.bots={bad}: {BOT_HELP}"] if bad else []


LEAGUE_ROLES = ("main", "main_exploiter", "league_exploiter")


def league_members(cfg: Any) -> int:
    """Members of a league (``selfplay.league``); 0 without one."""
    return len(cfg.selfplay.league) if cfg.selfplay.enabled else 0


def league_problems(cfg: Any) -> list[str]:
    s = cfg.selfplay
    out = []
    bad = [r for r in s.league if r not in LEAGUE_ROLES]
    if bad:
        out.append(f"selfplay.league={s.league}: {bad} not a league role; each member is one of {LEAGUE_ROLES}")
    if "main" not in s.league:
        out.append(f"selfplay.league={s.league} has no main agent: a league trains at least one \"main\" (the "
                   "exploiters hunt for its weaknesses)")
    if s.sampling != "pfsp":
        out.append(f"selfplay.sampling={s.sampling} with a league: each member's role sets how it draws opponents "
                   "(srljax/selfplay/league.py); drop the override")
    if cfg.pbt.population > 1:
        out.append(f"pbt.population={cfg.pbt.population} with selfplay.league: a league's members are its population; "
                   "set pbt.population=0")
    if cfg.eval.every_updates:
        out.append(f"eval.every_updates={cfg.eval.every_updates} with a league: the main agents are evaluated against "
                   "selfplay.bots (selfplay.bot_every_updates); set eval.every_updates=0")
    if cfg.layout.mode == "single" and cfg.checkpoint.every_updates:
        out.append(f"checkpoint.every_updates={cfg.checkpoint.every_updates}: a league in one process writes each "
                   "member's final checkpoint only (checkpoint.final); set checkpoint.every_updates=0, or run it as a "
                   "worker graph (layout.mode=distributed), whose member trainers checkpoint as configured")
    if cfg.layout.mode == "distributed":
        from srljax.config.pbt import member_layout_problems

        out += member_layout_problems(cfg, len(s.league), "selfplay.league's members")
    return out
