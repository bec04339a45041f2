"""JoinPool: joins into reused arrays give the batches fresh joins give, and a buffer zmq still sends from is
never rewritten (real ZeroMQ sockets, ``send_tracked``)."""

from __future__ import annotations

import numpy as np
import pytest

from srljax.comm.samples import SampleReceiver, SampleSender
from srljax.learning.rollout import JoinPool, concat_segments, split_segments
from srljax.types import Trajectory


def segment(rng: np.random.Generator, b: int, t: int = 5, frame: tuple[int, ...] = (2, 3)) -> Trajectory:
    return Trajectory(obs=rng.integers(0, 256, (t + 1, b, *frame), dtype=np.uint8),
                      action=rng.integers(0, 6, (t + 1, b)).astype(np.int32),
                      reward=rng.normal(size=(t + 1, b)).astype(np.float32),
                      terminated=rng.random((t + 1, b)) < 0.1, truncated=rng.random((t + 1, b)) < 0.1,
                      extras={"logp": rng.normal(size=(t + 1, b)).astype(np.float32)},
                      policy_version=rng.integers(0, 9, b).astype(np.int32))


def same(a: Trajectory, b: Trajectory) -> None:
    for x, y in zip(a[:5], b[:5]):
        np.testing.assert_array_equal(x, y)
    assert a.extras.keys() == b.extras.keys()
    for k in a.extras:
        np.testing.assert_array_equal(a.extras[k], b.extras[k])
    np.testing.assert_array_equal(a.policy_version, b.policy_version)


def test_reused_joins_equal_fresh_joins_over_many_rounds():
    rng = np.random.default_rng(0)
    pool = JoinPool(keep=2)
    pool_pending: list[Trajectory] = []
    fresh_pending: list[Trajectory] = []
    share, batches, kept = 6, 0, []
    for _ in range(300):
        seg = segment(rng, int(rng.integers(1, 9)))
        pool_pending.append(seg)
        fresh_pending.append(seg)
        while sum(s.reward.shape[1] for s in pool_pending) >= share:
            got, pool_pending = pool.join(pool_pending, share)
            want, rest = split_segments(concat_segments(fresh_pending), share)
            fresh_pending = [rest] if rest.reward.shape[1] else []
            same(got, want)
            assert got.obs.flags.c_contiguous
            batches += 1
            kept.append((got, {k: np.array(v) for k, v in got._asdict().items() if k != "extras"}))
            if len(kept) > 1:  # one batch still in use (not released): the pool must not hand it out
                old, _ = kept.pop(0)
                pool.free(old)
            assert all(got is not k[0] for k in kept[:-1])
            # the batch still held was not rewritten by this join
            held, copy = kept[0]
            np.testing.assert_array_equal(held.obs, copy["obs"])
    assert batches > 200
    assert pool.counts["reused"] > 150 and pool.counts["allocated"] <= 4


def test_one_segment_of_the_batch_width_passes_without_a_copy():
    rng = np.random.default_rng(1)
    pool = JoinPool()
    seg = segment(rng, 4)
    got, rest = pool.join([seg, segment(rng, 2)], 4)
    assert got is seg and len(rest) == 1 and pool.counts == {"reused": 0, "allocated": 0, "passed": 1}
    with pytest.raises(ValueError, match="cannot join 9 columns"):
        pool.join([seg], 9)


def test_a_buffer_zmq_still_sends_from_is_never_rewritten():
    """The receiver reads nothing until all are sent, so the later sends are still in zmq's queues when the next
    join runs. Were a tracked buffer reused in flight, its message would arrive holding a later batch's values."""
    rng = np.random.default_rng(2)
    receiver = SampleReceiver("tcp://127.0.0.1:*", "t", hwm=1)
    sender = SampleSender(receiver.address, "t", hwm=1)
    pool = JoinPool(keep=4)
    try:
        template = [segment(rng, 4, t=8, frame=(4, 84, 84)), segment(rng, 4, t=8, frame=(4, 84, 84))]  # 2 MB joined
        sent, trackers = 0, []
        in_flight_at_a_join = 0
        for i in range(64):
            batch, _ = pool.join(template, 8)
            busy = [b for b, t in trackers if not t.done]
            in_flight_at_a_join += bool(busy)
            assert all(batch is not b for b in busy), "a buffer zmq still held was handed out again"
            batch.obs[...] = i % 256
            batch.reward[...] = i
            tracker = sender.send_tracked(batch, timeout_ms=200, version=i)
            if tracker is None:  # every queue is full now
                pool.free(batch)
                break
            pool.hold(batch, tracker)
            trackers.append((batch, tracker))
            sent += 1
        assert sent >= 2 and in_flight_at_a_join >= 1
        assert pool.busy() >= 1
        for i in range(sent):
            msg = receiver.recv(timeout_ms=5000)
            assert msg is not None and msg.version == i
            assert (np.asarray(msg.tree["obs"]) == i % 256).all() and (np.asarray(msg.tree["reward"]) == i).all()
        for _, t in trackers:
            t.wait(5)
        before = pool.counts["reused"]
        pool.join(template, 8)
        assert pool.counts["reused"] == before + 1  # released once zmq let go
    finally:
        sender.close()
        receiver.close()


def test_a_held_buffer_waits_for_its_check_and_device_put_takes_it_without_a_copy():
    """On the CPU backend ``jax.device_put`` of a pooled (64-byte aligned) batch is the pooled memory itself: a
    rewrite shows through the device array. So the pool must not hand it out before its check (the trainer's:
    the update that read it has ended) says so."""
    import jax

    from srljax.system.training.sources import _ended

    rng = np.random.default_rng(3)
    pool = JoinPool(keep=2)
    segs = [segment(rng, 3, frame=(4, 84, 84)), segment(rng, 5, frame=(4, 84, 84))]
    batch, _ = pool.join(segs, 8)
    assert all(x.ctypes.data % 64 == 0 for x in (*batch[:5], *batch.extras.values()))
    placed = jax.device_put(batch.obs)
    total = jax.jit(lambda x: x.astype(np.int32).sum())(placed)
    want = int(batch.obs.astype(np.int32).sum())
    released = [False]
    pool.hold(batch, lambda: released[0])
    other, _ = pool.join(segs, 8)
    assert other is not batch and pool.busy() == 2
    jax.block_until_ready(total)
    assert _ended(total) and int(total) == want
    pool.free(other)
    released[0] = True
    again, _ = pool.join(segs[::-1], 8)
    assert again is batch or again is other
    if jax.default_backend() == "cpu":
        before = int(np.asarray(placed[0, 0, 0, 0, 0]))
        batch.obs[0, 0, 0, 0, 0] = (before + 1) % 256
        assert int(np.asarray(placed[0, 0, 0, 0, 0])) == (before + 1) % 256  # aliased: no copy was made


RECEIVE_FAULTS = r"""
import collections, resource, sys
import numpy as np, zmq
from srljax.comm.sockets import keep_freed_memory
if sys.argv[1] == "keep":
    assert keep_freed_memory()
ctx = zmq.Context()
pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
pull.rcvhwm = push.sndhwm = 2  # a bounded number in flight: the I/O thread cannot read far ahead on a loaded box
port = pull.bind_to_random_port("tcp://127.0.0.1")
push.connect(f"tcp://127.0.0.1:{port}")
frame = np.random.default_rng(0).integers(0, 256, 29 << 20, dtype=np.uint8)  # an Atari segment's frames
held = collections.deque(maxlen=4)  # the trainer holds a batch's segments until it joins them
for _ in range(3):
    push.send_multipart([b"header", memoryview(frame)], copy=False)
for i in range(64):
    if i == 16:  # the steady state: every fault of the process (libzmq's I/O thread fills frames on its own time)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    push.send_multipart([b"header", memoryview(frame)], copy=False)
    got = pull.recv_multipart(copy=False)
    assert len(got[1]) == frame.nbytes
    held.append(got)
for _ in range(3):
    pull.recv_multipart(copy=False)
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
push.close(linger=0)
pull.close(linger=0)
ctx.term()
print((after - before) / 51)
"""


def test_a_receiver_that_keeps_freed_memory_takes_big_frames_without_faulting_in_fresh_pages():
    """``keep_freed_memory`` (what a worker serving samples runs at start): libzmq mallocs every received frame
    afresh; with glibc's defaults, while a trainer holds a batch's 29 MB segments, each new one is memory the kernel
    zeroes and faults in (thousands of faults), with the heap kept it is memory an earlier message freed. Real zmq
    over loopback TCP, in fresh processes; every fault of the process over the steady state after the first 16
    messages, per message (counted around each receive alone, the I/O thread's faults fell outside at random)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]

    def faults(mode: str) -> float:
        out = subprocess.run([sys.executable, "-c", RECEIVE_FAULTS, mode], cwd=root, capture_output=True, text=True,
                             timeout=120, env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})
        assert out.returncode == 0, out.stderr
        return float(out.stdout.split()[-1])

    fresh, kept = faults("fresh"), faults("keep")
    assert fresh > 500, fresh  # 29 MB = 7,424 pages; fault-around maps several per fault
    # kept: none, or now and then one frame's worth (7,425 faults over 51 messages: the I/O thread's arena grows
    # once); fresh: every message faults its frame in
    assert kept < fresh / 4, (kept, fresh)


def test_a_buffer_message_stays_below_the_kept_threshold_and_atari_segments_pass_whole():
    from srljax.comm.sockets import KEEP_MMAP_THRESHOLD
    from srljax.system.staging.buffer import message_columns
    from srljax.types import EnvSpec

    atari = EnvSpec(id="Pong-v5", obs_shape=(4, 84, 84), obs_dtype="uint8", action_kind="discrete", num_actions=6)
    extras = {"logp": ((), "float32"), "value": ((), "float32")}
    columns = message_columns(128, atari, extras, 8)
    assert columns == 8  # one actor's segment of 8 envs: 129 x 8 x 28,224 B = 29.1 MB, whole
    assert 129 * 9 * 4 * 84 * 84 < KEEP_MMAP_THRESHOLD < 129 * 10 * 4 * 84 * 84
    assert message_columns(128, atari, extras, 1) == 9  # one env per actor: as many as fit
    assert message_columns(128, atari, extras, 4) == 8  # two whole segments of 4
    assert message_columns(128, atari, extras, 16) == 9  # a segment wider than fits is cut
    cartpole = EnvSpec(id="CartPole-v1", obs_shape=(4,), obs_dtype="float32", action_kind="discrete", num_actions=2)
    assert message_columns(128, cartpole, extras) > 10_000  # small frames: only the trainer's batch caps it
    huge = EnvSpec(id="x", obs_shape=(64, 512, 512), obs_dtype="float32", action_kind="discrete", num_actions=2)
    assert message_columns(128, huge, {}) == 1
    # a held segment exactly one message wide is forwarded as it came: the join passes it, no copy
    pool = JoinPool(keep=2)
    seg = segment(np.random.default_rng(1), columns)
    out, rest = pool.join([seg, segment(np.random.default_rng(2), columns)], columns)
    assert out is seg and len(rest) == 1 and pool.counts["passed"] == 1
