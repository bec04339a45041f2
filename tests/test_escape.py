"""Liveness pieces of the data path: the throttle's starvation escape and remote inference following a restarted
trainer's versions back down."""

from __future__ import annotations

import numpy as np

from srljax.system.acting.escape import StarvationEscape
from srljax.system.acting.policy_client import PolicyClient
from srljax.system.training.params import FOLLOW_DOWN_POLLS, FOLLOW_DOWN_S
from srljax.telemetry.stats import WorkerStats
from srljax.types import EnvSpec


def test_escape_is_due_only_after_the_trainer_published_nothing_for_a_while():
    escape = StarvationEscape(min_s=5.0, updates=3)
    t = 100.0
    escape.version_time = t
    for v in range(10):  # versions every 0.5 s: the usual interval settles near 0.5 s
        t += 0.5
        escape.saw(v, now=t)
        assert not escape.due(now=t + 0.1)
    assert not escape.due(now=t + 4.9)  # at least min_s after the last version
    assert escape.due(now=t + 5.1)
    assert not escape.due(now=t + 6.0)  # counted from the escape: the next one min_s later
    assert escape.due(now=t + 10.2)
    escape.saw(10, now=t + 10.5)  # a new version: back to waiting
    assert not escape.due(now=t + 11.0)


def test_a_slow_trainer_waits_longer_before_an_escape():
    escape = StarvationEscape(min_s=5.0, updates=3)
    t = 0.0
    escape.version_time = t
    for v in range(60):  # an update every 4 s
        t += 4.0
        escape.saw(v, now=t)
    assert escape.update_interval > 3.9
    assert not escape.due(now=t + 10.0) and escape.due(now=t + 12.5)


class _NoSocket:
    def close(self) -> None:
        pass


def client() -> PolicyClient:
    spec = EnvSpec("CartPole-v1", (4,), "float32", "discrete", num_actions=2, num_envs=4, batch_size=4)
    return PolicyClient(_NoSocket(), spec, {}, WorkerStats())


def test_remote_inference_follows_a_restarted_trainer_back_down():
    """A trainer restarted from update 0 (or an older checkpoint): its policy workers follow it down and their
    replies carry low versions; the actor's newest version follows after FOLLOW_DOWN_S, so its throttle and stale
    drops count from the new versions (fails with a running maximum: the actor would drop every new segment)."""
    policy, t = client(), 0.0
    for v in range(52):
        policy.see_version(v, now=t)
    assert policy.newest_version == 51
    policy.see_version(50, now=t)  # one policy worker a version behind another: not a restart
    assert policy.newest_version == 51
    for i in range(FOLLOW_DOWN_POLLS):
        policy.see_version(3, now=t + 0.5 * i)
    assert policy.newest_version == 51  # not for long enough yet
    policy.see_version(4, now=t + FOLLOW_DOWN_S + 0.1)
    assert policy.newest_version == 4 and policy.stats.counters["params_version_reset"] == 1
    policy.see_version(5, now=t + FOLLOW_DOWN_S + 0.2)
    assert policy.newest_version == 5


def test_a_reply_at_the_newest_version_cancels_a_follow_down():
    policy, t = client(), 0.0
    policy.see_version(20, now=t)
    policy.see_version(2, now=t + 0.1)
    policy.see_version(20, now=t + 1.0)  # the newest is still served: the low one was a straggler
    policy.see_version(2, now=t + FOLLOW_DOWN_S + 0.5)
    assert policy.newest_version == 20
    assert np.isclose(policy._below[0], t + FOLLOW_DOWN_S + 0.5)
