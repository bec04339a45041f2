"""Samples through shared memory (``layout.shared_memory``, ``srljax/comm/shm.py``): real rings in /dev/shm, real
ZeroMQ sockets, real processes killed with SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import msgpack
import numpy as np
import pytest
import zmq

from srljax.comm import shm
from srljax.comm.codec import encode
from srljax.comm.samples import SampleReceiver, SampleSender
from srljax.types import Trajectory

pytestmark = pytest.mark.skipif(bool(shm.available()), reason=shm.available() or "")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def trial(request):
    name = f"test-shm/{request.node.name}-{os.getpid()}-{time.monotonic_ns()}"
    yield name
    for f in os.listdir(shm.DIR):  # whatever a test left (a killed process's ring)
        if f.startswith(f"srljax-{shm.trial_tag(name)}-"):
            os.unlink(os.path.join(shm.DIR, f))


def rings(trial: str) -> list[str]:
    return [f for f in os.listdir(shm.DIR) if f.startswith(f"srljax-{shm.trial_tag(trial)}-")]


def segment(seed: int, t: int = 4, b: int = 3) -> Trajectory:
    rng = np.random.default_rng(seed)
    return Trajectory(obs=rng.integers(0, 256, (t + 1, b, 4, 84, 84), dtype=np.uint8),
                      action=rng.integers(0, 6, (t + 1, b), dtype=np.int32),
                      reward=rng.normal(size=(t + 1, b)).astype(np.float32),
                      terminated=rng.random((t + 1, b)) < 0.1, truncated=np.zeros((t + 1, b), bool),
                      extras={"logp": rng.normal(size=(t + 1, b)).astype(np.float32)},
                      policy_version=np.full(b, seed, np.int32))


def pair(trial: str, slots: int = 2, **kw) -> tuple[SampleReceiver, SampleSender]:
    rx = SampleReceiver("tcp://127.0.0.1:*", trial, shared_memory=True, **kw)
    tx = SampleSender(rx.address, trial, shared_memory=True, slots=slots)
    return rx, tx


def equal(a: Trajectory, b: Trajectory) -> bool:
    leaves = lambda x: [*x[:5], *(x.extras[k] for k in sorted(x.extras)), x.policy_version]  # noqa: E731
    return all(p.dtype == q.dtype and p.shape == q.shape and np.array_equal(p, q) for p, q in zip(leaves(a), leaves(b)))


def received(rx: SampleReceiver, timeout_ms: int = 5000) -> Trajectory:
    msg = rx.recv(timeout_ms)
    assert msg is not None, rx.counters()
    tree = msg.tree
    return Trajectory(**{k: tree[k] for k in Trajectory._fields}) if isinstance(tree, dict) else tree


def test_round_trip_is_bit_exact_and_only_a_descriptor_crosses_the_socket(trial):
    rx, tx = pair(trial)
    try:
        for seed in range(5):
            seg = segment(seed)
            assert tx.send(seg, timeout_ms=5000, version=seed, meta={"actor": 2})
            mine = Trajectory(*(np.array(x) for x in seg[:5]), extras={"logp": seg.extras["logp"].copy()},
                              policy_version=seg.policy_version.copy())
            seg.obs[:] = 0  # the sender writes its arrays again at once: they were copied into the slot
            got = received(rx)
            assert equal(got, mine)
            assert not got.obs.flags.writeable and got.obs.ctypes.data % shm.ALIGN == 0
            del got
        assert rx.counters()["shm.received"] == tx.counters()["shm.sent"] == 5
        assert tx.ring.counts["shm.full"] == 0 and len(rings(trial)) == 1
        # what went over the socket per message: the descriptor and the codec header, not the 28 kB per env step
        frames = encode("sample", trial, segment(0), version=0)
        slot = tx.ring.acquire(0)
        assert len(tx.ring.write(slot, frames[1:])) < 200
        tx.ring.unsent(slot)
    finally:
        tx.close()
        rx.close()
    assert rings(trial) == []  # nothing in flight at close: the ring went with it


def test_a_slot_is_rewritten_only_after_every_array_from_it_is_gone(trial):
    rx, tx = pair(trial, slots=2)
    try:
        assert tx.send(segment(1), timeout_ms=5000)
        held = received(rx)  # kept: its slot must not be written again
        for seed in range(2, 8):  # all through the other slot, one after another
            assert tx.send(segment(seed), timeout_ms=5000)
            assert equal(received(rx), segment(seed))
        assert equal(held, segment(1))
        second = received(rx) if tx.send(segment(9), timeout_ms=5000) else None
        assert second is not None
        assert not tx.send(segment(10), timeout_ms=200)  # both slots held: the send waits, then gives up
        assert tx.counters()["shm.full"] == 1 and tx.counters()["send_timeouts"] == 1
        part = held.obs[:, 1:]  # a view of a view still holds the slot
        del held
        assert not tx.send(segment(10), timeout_ms=100)
        del part
        assert tx.send(segment(10), timeout_ms=1000)  # released: the slot is the sender's again
        assert equal(received(rx), segment(10)) and equal(second, segment(9))
        assert tx.ring.counts["shm.reclaimed"] == 0
    finally:
        tx.close()
        rx.close()


RECEIVER = """
import sys, time
from srljax.comm.samples import SampleReceiver
rx = SampleReceiver("tcp://127.0.0.1:*", sys.argv[1], shared_memory=True)
print(rx.address, flush=True)
msg = rx.recv(20000)
print("held" if msg is not None else "nothing", flush=True)
time.sleep(60)
"""

SENDER = """
import sys, time, numpy as np
from srljax.comm.samples import SampleSender
tx = SampleSender(sys.argv[2] or None, sys.argv[1], shared_memory=True, slots=2)
if sys.argv[2]:
    assert tx.send({"x": np.arange(1 << 20, dtype=np.int64)}, timeout_ms=20000)
else:
    from srljax.comm import shm
    tx.ring = shm.SlotRing(sys.argv[1], 2, 1 << 20)
print(tx.ring.name, flush=True)
time.sleep(60)
"""


def child(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code, *args], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_dead_receivers_slots_are_the_senders_again(trial):
    proc = child(RECEIVER, trial)
    try:
        address = proc.stdout.readline().strip()
        tx = SampleSender(address, trial, shared_memory=True, slots=1)
        assert tx.send(segment(1), timeout_ms=20000)
        assert proc.stdout.readline().strip() == "held"
        assert tx.ring.acquire(300) is None  # the receiver holds the one slot
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        slot = tx.ring.acquire(2000)  # the kernel dropped its lock; claimed, so no wait for RECLAIM_S
        assert slot == 0 and tx.ring.counts["shm.reclaimed"] == 0
        tx.ring.cancel(slot)
        tx.close()
    finally:
        proc.kill()
        proc.wait()


def test_an_unclaimed_slot_comes_back_and_its_late_descriptor_is_dropped_as_stale(trial, monkeypatch):
    monkeypatch.setattr(shm, "RECLAIM_S", 0.3)
    rx, tx = pair(trial, slots=1)
    try:
        assert tx.send(segment(1), timeout_ms=5000)  # not read yet: in flight
        assert tx.ring.acquire(100) is None
        time.sleep(0.4)
        assert tx.send(segment(2), timeout_ms=5000)  # its descriptor counted as lost: the slot rewritten
        assert tx.ring.counts["shm.reclaimed"] == 1
        assert equal(received(rx), segment(2))  # the first descriptor (stale) was dropped on the way
        assert rx.counters()["drop.shm_stale"] == 1 and rx.counters()["received"] == 1
    finally:
        tx.close()
        rx.close()


def test_a_dead_senders_ring_is_removed_and_what_was_received_stays_readable(trial):
    rx = SampleReceiver("tcp://127.0.0.1:*", trial, shared_memory=True)
    sender = child(SENDER, trial, rx.address)
    idle = child(SENDER, trial, "")  # a sender killed before it sent anything
    try:
        msg = rx.recv(20000)
        assert msg is not None, rx.counters()
        got = msg.tree
        del msg
        names = [sender.stdout.readline().strip(), idle.stdout.readline().strip()]
        assert sorted(rings(trial)) == sorted(names)
        for p in (sender, idle):
            p.send_signal(signal.SIGKILL)
            p.wait(10)
        rx.shm.sweep(force=True)
        assert rings(trial) == [names[1]] and rx.counters()["shm.rings_removed"] == 1
        assert rx.counters()["shm.rings"] == 1  # still mapped: an array from it lives
        assert np.array_equal(got["x"], np.arange(1 << 20))
        del got
        rx.shm.sweep(force=True)
        assert rx.counters()["shm.rings"] == 0
        assert shm.remove_dead_rings(trial) == 1 and rings(trial) == []
    finally:
        for p in (sender, idle):
            p.kill()
            p.wait()
        rx.close()


def test_bad_descriptors_are_dropped_and_counted_and_the_next_good_one_arrives(trial, tmp_path):
    rx, tx = pair(trial, slots=2)
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.connect(rx.address)
    try:
        assert tx.send(segment(1), timeout_ms=5000)
        assert equal(received(rx), segment(1))  # the ring exists and is attached
        name = tx.ring.name
        head = encode("sample", trial, {"x": np.zeros(8, np.int64)})[0]
        forged = f"srljax-{shm.trial_tag(trial)}-1-{'0' * 12}"
        with open(os.path.join(shm.DIR, forged), "wb") as f:  # a file named like a ring, not one
            f.write(b"\0" * 8192)
        other = f"srljax-{shm.trial_tag('another/trial')}-{os.getpid()}-{'1' * 12}"

        def desc(**d):
            return shm.MAGIC + msgpack.packb({"ring": name, "slot": 0, "gen": 1, "sizes": [64], **d})
        bad = {
            shm.SHM_BAD: [shm.MAGIC + b"\xc1 not msgpack", desc(ring="../../../etc/passwd"), desc(ring=other),
                          desc(slot=2), desc(slot=-1), desc(sizes=[1 << 40]), desc(sizes=["x"]), desc(ring=forged),
                          shm.MAGIC + msgpack.packb([1, 2])],
            shm.SHM_STALE: [desc(gen=7)],
            shm.SHM_GONE: [desc(ring=f"srljax-{shm.trial_tag(trial)}-1-{'2' * 12}")],
            "size": [desc(sizes=[65])],  # the header's array is 64 bytes
        }
        for frames in bad.values():
            for d in frames:
                push.send_multipart([d, head])
        expected, deadline = sum(map(len, bad.values())), time.monotonic() + 10
        while rx.drops.total() < expected and time.monotonic() < deadline:
            assert rx.recv(100) is None  # every one of them is dropped
        assert tx.send(segment(3), timeout_ms=5000)  # and the receiver carries on
        assert equal(received(rx), segment(3))
        counts = rx.counters()
        for reason, frames in bad.items():
            assert counts.get(f"drop.{reason}") == len(frames), (reason, counts)
        os.unlink(os.path.join(shm.DIR, forged))
        kept = received(rx) if tx.send(segment(4), timeout_ms=5000) else None  # held here
        (slot,) = rx.shm.rings[name].held
        push.send_multipart([desc(slot=slot, gen=int(tx.ring.entries[slot, 0])), head])  # a replay of its descriptor
        while rx.counters().get("drop.shm_stale") == 1 and time.monotonic() < deadline:
            assert rx.recv(100) is None
        assert rx.counters()["drop.shm_stale"] == 2
        other_slot = tx.ring.acquire(100)
        assert other_slot is not None and other_slot != slot  # the replay did not let go of the held slot's lock
        tx.ring.cancel(other_slot)
        assert equal(kept, segment(4))
        off = SampleReceiver("tcp://127.0.0.1:*", trial)  # without shared memory: a descriptor is not a sample
        to_off = zmq.Context.instance().socket(zmq.PUSH)
        try:
            to_off.connect(off.address)
            to_off.send_multipart([desc(), head])
            assert off.recv(1000) is None and off.counters().get("drop.shm_off") == 1
        finally:
            to_off.close(linger=0)
            off.close()
    finally:
        push.close(linger=0)
        tx.close()
        rx.close()


def test_the_config_key_is_refused_where_it_cannot_work():
    from configs import cartpole_ppo, cartpole_ppo_distributed
    from launch.slurm.plan import slurm_problems
    from srljax.config import apply_overrides
    from srljax.layout import layout_problems

    single = apply_overrides(cartpole_ppo.experiment(), ["layout.shared_memory=true"])
    assert any("layout.mode=single has no sample stream" in p for p in layout_problems(single))
    dist = apply_overrides(cartpole_ppo_distributed.experiment(), ["layout.shared_memory=true"])
    assert layout_problems(dist) == []
    assert any("layout.shared_memory=true only reaches workers on one node" in p for p in slurm_problems(dist))
    assert not any("shared_memory" in p for p in slurm_problems(cartpole_ppo_distributed.experiment()))


def test_worker_processes_pass_the_key_to_their_sample_endpoints(trial):
    """What a worker builds its sample sockets with: an actor's ring holds a whole batch of its segments beyond 8
    (a trainer holds a batch's segments until it cuts it, maybe all from one actor); a buffer's slots fit its
    messages; a policy's parts may be one column wide. And a sender with those slots is not stopped by a receiver
    holding a batch's worth of its segments."""
    from configs import atari_ppo
    from srljax.comm.samples import SHM_SLOTS
    from srljax.config import apply_overrides
    from srljax.system.shell.worker import SLOT_SLACK, Worker
    from srljax.types import EnvSpec

    cfg = apply_overrides(atari_ppo.experiment(), ["layout.mode=distributed", "layout.shared_memory=true",
                                                   "env.num_envs=2", "trainer.batch_envs=12"])
    w = Worker.__new__(Worker)
    w.cfg, w.extras_spec = cfg, {}
    w.spec = EnvSpec(id="pong", obs_shape=(4, 84, 84), obs_dtype="uint8", action_kind="discrete", num_actions=6)
    assert w.samples_options(sender=False) == {"shared_memory": True}
    actor = w.samples_options(sender=True)
    assert actor == {"shared_memory": True, "slots": SHM_SLOTS + 6}
    buffer = w.samples_options(True, message_columns=4)
    assert buffer["slots"] == SHM_SLOTS + 3
    assert buffer["slot_bytes"] >= 4 * (cfg.algo.num_steps + 1) * 4 * 84 * 84 + SLOT_SLACK
    assert w.samples_options(True, fewest_columns=1)["slots"] == SHM_SLOTS + 12
    w.cfg = apply_overrides(cfg, ["layout.shared_memory=false"])
    assert w.samples_options(sender=True) == {}

    rx = SampleReceiver("tcp://127.0.0.1:*", trial, shared_memory=True)
    tx = SampleSender(rx.address, trial, **actor)
    try:
        held = []
        for seed in range(6):  # a batch of 12 columns, all from this actor, held until the batch is cut
            assert tx.send(segment(seed, b=2), timeout_ms=5000)
            held.append(received(rx))
        for seed in range(SHM_SLOTS):  # and the actor keeps going meanwhile
            assert tx.send(segment(seed, b=2), timeout_ms=1000)
        assert all(equal(h, segment(i, b=2)) for i, h in enumerate(held))
    finally:
        tx.close()
        rx.close()


def test_no_room_in_dev_shm_sends_over_the_socket(trial, monkeypatch):
    """A full /dev/shm (a container's 64 MB one) is no SIGBUS: pages are reserved before the copy, and a message
    that gets none goes over the socket."""
    rx, tx = pair(trial)

    def full(fd, offset, length):
        raise OSError(28, "No space left on device")
    try:
        monkeypatch.setattr(os, "posix_fallocate", full)
        assert tx.send(segment(1), timeout_ms=5000)
        assert equal(received(rx), segment(1))
        assert tx.counters()["shm.no_space"] == 1 and rx.counters().get("shm.received", 0) == 0
        monkeypatch.undo()
        assert tx.send(segment(2), timeout_ms=5000)
        assert equal(received(rx), segment(2)) and rx.counters()["shm.received"] == 1
    finally:
        tx.close()
        rx.close()


def test_threads_backend_with_a_buffer_moves_every_segment_through_rings(tmp_path):
    """Actors -> buffer -> trainer in one process (the threads backend): each hop through a ring, no drop, and no
    ring left once the trial ends."""
    from configs import cartpole_ppo_distributed
    from launch.threads import run_threads
    from srljax.config import apply_overrides

    cfg = apply_overrides(cartpole_ppo_distributed.experiment(), [
        "layout.shared_memory=true", "layout.num_buffer_workers=1", "layout.inference=inline", "layout.num_actors=2",
        "total_env_steps=8192", "checkpoint.final=false", f"log.run_root={tmp_path}", "log.wandb=disabled",
        "name=shmthreads", "trial=t"])
    result = run_threads(cfg)
    assert result.exit_code == 0, result.message
    trainer, buffer = result.worker_metrics("trainer", 0)[-1], result.worker_metrics("buffer", 0)[-1]
    assert trainer["samples/shm.received"] == trainer["samples/received"] > 0
    assert buffer["receiver/shm.received"] == buffer["receiver/received"] > 0
    assert buffer["sender/shm.sent"] == buffer["sender/sent"] > 0
    assert not any("/drop." in k for k in (*trainer, *buffer))
    assert rings("shmthreads/t") == []


def test_a_batch_put_on_the_cpu_device_is_the_slot_and_holds_it_until_the_device_array_goes(trial):
    """A trainer batch that is one whole segment (``JoinPool`` passes it) goes to ``jax.device_put`` as it is: on
    the CPU backend the device array is the slot's memory (no copy at all), so the slot must stay the receiver's
    until the device array is gone, not only the numpy one."""
    import gc

    import jax

    rx, tx = pair(trial, slots=1)
    try:
        assert tx.send({"x": np.arange(1 << 20, dtype=np.float32)}, timeout_ms=5000)
        msg = rx.recv(5000)
        arr = msg.tree["x"]
        del msg
        placed = jax.device_put(arr)
        if jax.default_backend() == "cpu":
            assert placed.unsafe_buffer_pointer() == arr.ctypes.data  # aliased: the update reads the slot
        del arr
        gc.collect()
        assert tx.ring.acquire(0) is None
        assert float(placed[-1]) == (1 << 20) - 1
        del placed
        gc.collect()
        assert tx.ring.acquire(0) == 0
        tx.ring.cancel(0)
    finally:
        tx.close()
        rx.close()


def test_plan_measures_ingest_through_shared_memory_when_the_config_asks():
    """``launch.plan --measure``'s ingest unit goes the way the run's samples will."""
    import dataclasses

    import algos
    import envs
    from configs import cartpole_ppo_distributed
    from launch.plan_measure import TRIAL, measure_ingest
    from srljax.config import apply_overrides

    cfg = apply_overrides(cartpole_ppo_distributed.experiment(), ["layout.shared_memory=true"])
    env = envs.make(dataclasses.replace(cfg.env, num_envs=1, batch_size=0), seed=0)
    spec = env.spec
    env.close()
    got = measure_ingest(cfg, spec, algos.make(cfg, spec).extras_spec, 0.5)
    assert got["segments"] > 0 and got["bytes_per_s"] > 0
    assert rings(TRIAL) == []


def test_a_sender_that_cannot_make_its_ring_sends_over_the_socket(trial, monkeypatch):
    def refused(*a, **k):
        raise OSError(24, "Too many open files")
    monkeypatch.setattr(shm, "SlotRing", refused)
    rx, tx = pair(trial)
    try:
        for seed in range(2):
            assert tx.send(segment(seed), timeout_ms=5000)
            assert equal(received(rx), segment(seed))
        assert tx.counters()["shm.unavailable"] == 1 and rx.counters().get("shm.received", 0) == 0
    finally:
        tx.close()
        rx.close()


def test_random_descriptors_are_all_dropped_and_the_receiver_carries_on(trial):
    """Fuzz: valid descriptors with fields swapped for random values, and random bytes after the magic."""
    rx, tx = pair(trial, slots=2)
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.connect(rx.address)
    rng = np.random.default_rng(0)
    try:
        assert tx.send(segment(1), timeout_ms=5000)
        assert equal(received(rx), segment(1))
        head = encode("sample", trial, {"x": np.zeros(8, np.int64)})[0]
        values = [None, -1, 0, 1, 2 ** 63 - 1, -2 ** 63, 3.5, "", "x" * 300, b"\0" * 5, [], [64] * 5000, [-1],
                  [1 << 62, 1 << 62], {"a": 1}, True, tx.ring.name + "/..", "srljax-" + "0" * 16 + "-1-" + "0" * 12]
        sent = 0
        for _ in range(300):
            d = {"ring": tx.ring.name, "slot": 0, "gen": 99, "sizes": [64]}
            for key in rng.choice(list(d), size=rng.integers(1, 4), replace=False):
                d[key] = values[rng.integers(len(values))]
            if rng.random() < 0.2:
                frame = shm.MAGIC + rng.bytes(int(rng.integers(0, 64)))
            else:
                frame = shm.MAGIC + msgpack.packb(d)
            push.send_multipart([frame, head])
            sent += 1
        deadline = time.monotonic() + 20
        while rx.drops.total() < sent and time.monotonic() < deadline:
            assert rx.recv(100) is None
        assert rx.drops.total() == sent and rx.counters()["received"] == 1
        assert tx.send(segment(2), timeout_ms=5000)
        assert equal(received(rx), segment(2))
    finally:
        push.close(linger=0)
        tx.close()
        rx.close()
