"""Ape-X bookkeeping shared by its three workers (``srljax/system/acting/apex_actor.py``, ``replay_buffer.py``,
``srljax/system/training/replay_source.py``): which shard an actor feeds, the shard's stream ids, and the replay-ratio throttle.

    shard_of(actor=3, cfg)                  # 1 with 2 replay buffer workers: actor i feeds shard i % S
    shard_streams(cfg, shard=1)             # env streams that shard keeps (its actors x env.num_envs)
    actor_allowance(cfg, version=120)       # env steps one actor may have inserted by params version 120
    trainer_allowance(cfg, inserted=50_000) # updates the trainer may have made once 50k env steps are in

A shard keeps each of its actors' envs as separate replay streams, so an n-step window never leaves
one env of one actor. The replay ratio ``algo.replay_ratio`` (samples trained per env step inserted
after ``learning_starts``) is held within ``algo.ratio_tolerance`` both ways (``algo.throttle``):
the trainer waits when it is ahead of the inserts, an actor waits for a newer params version (one
version = one update) when it is ahead of its share of the updates. Pure arithmetic, no I/O.
"""

from __future__ import annotations

from typing import Any

from srljax.replay.buffer import frame_stack, replay_window, sequence_rows


def replay_ratio(cfg: Any) -> float:
    """Samples trained per env step: ``algo.replay_ratio``, or what the algorithm derives from its own keys
    (``replay_ratio_of(cfg)``: value decomposition's ``trainer.update_epochs`` batches per ``env.num_envs x
    num_steps`` env steps)."""
    derived = getattr(cfg.algo, "replay_ratio_of", None)
    return float(derived(cfg)) if callable(derived) else float(cfg.algo.replay_ratio)


def num_shards(cfg: Any) -> int:
    return max(1, cfg.layout.num_buffer_workers)


def shard_of(actor: int, cfg: Any) -> int:
    """The replay buffer worker actor ``actor`` pushes to (always the same one: its streams live there)."""
    return actor % num_shards(cfg)


def shard_actors(cfg: Any, shard: int) -> list[int]:
    """The actors that feed ``shard``, in the order of their stream blocks."""
    return list(range(shard, cfg.layout.num_actors, num_shards(cfg)))


def shard_streams(cfg: Any, shard: int) -> int:
    """Replay streams of ``shard``: ``env.num_envs`` per actor that feeds it (at least one block)."""
    return max(1, len(shard_actors(cfg, shard))) * cfg.env.num_envs


def stream_base(cfg: Any, actor: int) -> int:
    """The first stream id of ``actor``'s envs in its shard (env e is ``stream_base + e``)."""
    return (actor // num_shards(cfg)) * cfg.env.num_envs


def shard_capacity(cfg: Any) -> int:
    """Transitions one shard holds: ``algo.replay.capacity`` is the total over the shards."""
    return cfg.algo.replay.capacity // num_shards(cfg)


def actor_allowance(cfg: Any, version: int, actor: int = 0, since: int = 0) -> float:
    """Env steps actor ``actor`` may have inserted once the trainer made ``version`` updates: its share of
    ``learning_starts + updates x batch_size / replay_ratio x (1 + tolerance)``, plus slack: one chunk,
    one call's worth of env steps (``algo.updates_per_call`` updates), and enough for its shard's actors
    to refill a restarted (empty) shard with a batch, whichever is largest. So the trainer's next update is always possible once
    every actor used its allowance: neither throttle can hold the other forever. An actor that started
    at version ``since`` (a resumed run, a restarted actor: it counts its rows from zero) is allowed the
    updates since then, not the whole history again."""
    a, ratio = cfg.algo, replay_ratio(cfg)
    updates = max(0, version) - max(0, min(since, version))
    steps = a.learning_starts + updates * a.batch_size / ratio * (1.0 + a.ratio_tolerance)
    feeders = max(1, len(shard_actors(cfg, shard_of(actor, cfg))))
    refill = 1.5 * a.batch_size / feeders + (replay_window(a) + 1) * cfg.env.num_envs  # done rows are not sampleable
    slack = max(a.num_steps * cfg.env.num_envs, a.updates_per_call * a.batch_size / ratio, refill)
    return steps / max(1, cfg.layout.num_actors) + slack


def trainer_allowance(cfg: Any, inserted: int) -> float:
    """Updates the trainer may have made once ``inserted`` env steps reached the replay."""
    a = cfg.algo
    return replay_ratio(cfg) * max(0, inserted - a.learning_starts) * (1.0 + a.ratio_tolerance) / a.batch_size


def samples_per_insert(cfg: Any, updates: int, inserted: int) -> float:
    """The replay ratio achieved: samples trained per env step inserted after ``learning_starts``."""
    return updates * cfg.algo.batch_size / max(1, inserted - cfg.algo.learning_starts)


def apex_problems(cfg: Any) -> list[str]:
    """What a distributed replay algorithm's (Ape-X) layout needs, each naming the key and the fix."""
    lay, a, out = cfg.layout, cfg.algo, []
    name = getattr(a, "name", type(a).__name__)
    if lay.num_buffer_workers < 1:
        out.append(f"algo={name} with layout.mode=distributed samples from replay buffer workers: set "
                   "layout.num_buffer_workers>=1 (each holds algo.replay.capacity / num_buffer_workers transitions)")
    elif lay.num_buffer_workers > lay.num_actors >= 1:
        out.append(f"layout.num_buffer_workers={lay.num_buffer_workers} > layout.num_actors={lay.num_actors}: actor i "
                   "feeds replay buffer worker i % num_buffer_workers, so some would stay empty; use at most "
                   f"{lay.num_actors}")
    if lay.inference != "inline":
        out.append(f"algo={name} with layout.inference=remote is not built: each Ape-X actor's exploration values "
                   "(DQN's epsilon) are its own actor state, which policy workers do not keep per actor; set "
                   "layout.inference=inline")
    if cfg.trainer.num_hosts != 1:
        out.append(f"trainer.num_hosts={cfg.trainer.num_hosts}: Ape-X trains in one trainer process (use "
                   "trainer.devices for several devices); set trainer.num_hosts=1")
    if a.ratio_tolerance <= 0:
        out.append(f"algo.ratio_tolerance={a.ratio_tolerance} must be > 0 (e.g. 0.1: within 10% of algo.replay_ratio)")
    if lay.num_buffer_workers >= 1 and lay.num_actors >= 1:
        per_stream = shard_capacity(cfg) // max(1, shard_streams(cfg, 0))
        stack = frame_stack(cfg)
        window = replay_window(a)
        if per_stream <= window + stack:
            need = (window + stack + 1) * shard_streams(cfg, 0) * num_shards(cfg)
            what = "a sequence" if sequence_rows(a) else "an n-step window"
            out.append(f"algo.replay.capacity={a.replay.capacity:,} split over {num_shards(cfg)} replay buffer workers "
                       f"and {shard_streams(cfg, 0)} env streams each leaves {per_stream} rows per stream, fewer than "
                       f"{what} needs; raise it to at least {need:,}")
    return out
