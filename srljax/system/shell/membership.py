"""A distributed population's or league's member helpers shared by its workers: who acts for which member, each
member's experiment and folder, a follower of one member's params. The directives stream itself is
``srljax/comm/directives.py``.

    member_of_actor(cfg, a)                      # actor a acts for member a % members
    sub = member_experiment(cfg, i)              # member i's trainer: seed + i, run folder RUN_DIR/members/<i>
    follower = member_follower(worker, codec, i) # an actor's (of its member) or a manager's (one per member)
"""

from __future__ import annotations

import dataclasses
from typing import Any

from srljax.config.pbt import MEMBERS_DIR, member_count
from srljax.layout import PARAMS, TRAINER


def member_of_actor(cfg: Any, actor: int) -> int:
    """The member actor ``actor`` acts for: actors are dealt round robin, ``layout.num_actors / members`` each
    (a PBT population's or a league's, ``member_count``)."""
    return actor % member_count(cfg)


def member_follower(worker: Any, codec: Any, member: int) -> Any:
    """A ``ParamsFollower`` of member ``member``'s trainer (trainer ``member`` of the layout), following it
    to a new address when it restarts: an actor's (of its member) or the manager's (one per member)."""
    from srljax.system.training.params import ParamsFollower

    streams = worker.peers.get(TRAINER, {}).get(member, {})
    follower = ParamsFollower(worker.trial, [streams[PARAMS]] if PARAMS in streams else [], codec, worker.stats,
                              worker.ctx)
    worker.follow_peers(follower.sub, TRAINER, PARAMS, [member])
    return follower


def member_experiment(cfg: Any, member: int) -> Any:
    """The experiment as member ``member``'s trainer sees it: seed ``seed + member``, run folder
    ``RUN_DIR/members/<member>`` (``metrics.jsonl``, ``checkpoints/``), a checkpoint every ``pbt.ready_updates``
    updates (what another member copies; at least 3 kept, so a step being read is not pruned under the reader). A
    league's member checkpoints as ``checkpoint.every_updates`` says."""
    ready = cfg.pbt.ready_updates if cfg.pbt.enabled else cfg.checkpoint.every_updates
    checkpoint = dataclasses.replace(cfg.checkpoint, every_updates=ready, keep=max(3, cfg.checkpoint.keep))
    return dataclasses.replace(cfg, seed=cfg.seed + member, trial=f"{cfg.trial}/{MEMBERS_DIR}/{member}",
                               checkpoint=checkpoint)
