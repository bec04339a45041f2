"""Python envs in worker processes (``envs/subproc.py``): the in-process adapter's streams, in parallel, and no
process or shared memory outlives the VecEnv or its parent."""

from __future__ import annotations

import functools
import subprocess
import sys
import time
from pathlib import Path

import gymnasium
import numpy as np
import psutil
import pytest

import envs
from envs.gym_adapter import GymnasiumVecEnv, SubprocGymnasiumVecEnv
from srljax.config import EnvConfig
from tests.slow_env import SleepyEnv

ROOT = Path(__file__).resolve().parents[1]
FIELDS = ("obs", "reward", "terminated", "truncated", "env_id", "episode_return", "episode_length")
CARTPOLE = functools.partial(gymnasium.make, "CartPole-v1", max_episode_steps=12)  # truncations and terminations


def workers_of(pid: int) -> set[int]:
    """Live processes under ``pid``, less the fork server and resource tracker multiprocessing keeps for it."""
    out = set()
    for p in psutil.Process(pid).children(recursive=True):
        try:
            cmd = " ".join(p.cmdline())
            if p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in cmd and not (
                    p.ppid() == pid and "forkserver" in cmd):
                out.add(p.pid)
        except psutil.NoSuchProcess:
            pass
    return out


def alive(pids: set[int]) -> set[int]:
    out = set()
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.add(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def shared_blocks() -> set[str]:
    return {p.name for p in Path("/dev/shm").glob("psm_*")}


def assert_same_rows(a, b, where: str) -> None:
    for field in FIELDS:
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=f"{where}: {field}")


def test_sync_steps_match_the_in_process_adapter_on_cartpole():
    """Same seed, same actions: every field of every row equal, across terminations, truncations and a subset step."""
    ours = SubprocGymnasiumVecEnv(CARTPOLE, num_envs=4, seed=3, processes=2)
    ref = GymnasiumVecEnv(CARTPOLE, num_envs=4, seed=3)
    try:
        assert ours.spec == ref.spec and ours.processes == 2
        assert_same_rows(ours.reset(), ref.reset(), "reset")
        rng, ends = np.random.default_rng(0), 0
        for t in range(40):
            action = rng.integers(0, 2, 4).astype(np.int32)
            a, b = ours.step(action), ref.step(action)
            assert_same_rows(a, b, f"step {t}")
            ends += int((a.terminated | a.truncated).sum())
        assert ends >= 8  # both kinds of episode end were crossed, with their statistics
        subset = np.array([3, 1], np.int32)
        assert_same_rows(ours.step(np.ones(2, np.int32), subset), ref.step(np.ones(2, np.int32), subset), "subset")
    finally:
        ours.close()


def run_ring(env, recvs: int, min_rows: int = 0) -> dict[int, list]:
    """Each env's rows through the async ring, with a policy of the observation only (batching cannot matter):
    ``recvs`` batches, or more until every env has ``min_rows`` rows (which envs finish first depends on how the
    machine schedules the workers; each env's own stream does not)."""
    per_env: dict[int, list] = {i: [] for i in range(env.spec.num_envs)}
    env.async_reset()
    done = 0
    while done < recvs or (min(len(rows) for rows in per_env.values()) < min_rows and done < 50 * recvs):
        done += 1
        ts = env.recv()
        assert len(ts.env_id) == env.spec.batch_size and len(set(ts.env_id.tolist())) == env.spec.batch_size
        for row, i in enumerate(ts.env_id.tolist()):
            per_env[i].append(tuple(np.asarray(getattr(ts, f)[row]).tolist() for f in FIELDS))
        env.send((ts.obs[:, 2] > 0).astype(np.int32), ts.env_id)
    return per_env


def test_async_ring_gives_each_env_the_in_process_stream():
    ours = SubprocGymnasiumVecEnv(CARTPOLE, num_envs=4, seed=5, batch_size=2, processes=4)
    ref = GymnasiumVecEnv(CARTPOLE, num_envs=4, seed=5, batch_size=2)
    try:
        with pytest.raises(RuntimeError, match="async_reset"):
            ours.reset()
        got, want = run_ring(ours, 60, min_rows=20), run_ring(ref, 200)
    finally:
        ours.close()
    for i in range(4):
        n = min(len(got[i]), len(want[i]))
        assert n >= 20, (i, len(got[i]), len(want[i]))
        # NaN episode returns compare equal as strings
        assert [repr(r) for r in got[i][:n]] == [repr(r) for r in want[i][:n]], f"env {i}"


@pytest.mark.parametrize("obs_dtype", ["float64", "uint8"])
def test_lazy_autoreset_seeding_and_episode_stats(obs_dtype):
    """Env i is first reset with seed + i and later resets continue its stream; the row after a done ignores its
    action, pays 0 and has no flags; the done row carries the episode's return and length; any Box dtype."""
    env = SubprocGymnasiumVecEnv(functools.partial(SleepyEnv, length=3, obs_dtype=obs_dtype), num_envs=2, seed=7)
    try:
        draws = []
        for i in range(2):
            twin = SleepyEnv(obs_dtype=obs_dtype)
            draws.append([twin.reset(seed=7 + i)[0], twin.reset()[0]])  # the first two episodes' first obs
        want_dtype = np.float32 if obs_dtype == "float64" else np.uint8
        rows = [env.reset()] + [env.step(np.array([2, 1], np.int32)) for _ in range(4)]
        assert rows[0].obs.shape == (2, 2, 3) and rows[0].obs.dtype == want_dtype
        for i in range(2):
            np.testing.assert_array_equal(rows[0].obs[i], draws[i][0].astype(want_dtype))
            np.testing.assert_array_equal(rows[4].obs[i], draws[i][1].astype(want_dtype))  # the stream went on
        assert [r.reward.tolist() for r in rows] == [[0, 0], [2.5, 1.5], [2.5, 1.5], [2.5, 1.5], [0, 0]]
        assert [r.terminated.tolist() for r in rows] == [[False] * 2] * 3 + [[True] * 2, [False] * 2]
        assert not any(r.truncated.any() for r in rows)
        assert rows[3].episode_return.tolist() == [7.5, 4.5] and rows[3].episode_length.tolist() == [3, 3]
        assert np.isnan(rows[4].episode_return).all() and (rows[4].episode_length == 0).all()
    finally:
        env.close()


def test_an_env_that_raises_is_one_clear_error_and_close_still_works():
    env = SubprocGymnasiumVecEnv(functools.partial(SleepyEnv, fail_at=2), num_envs=4, seed=0, processes=2)
    pids = workers_of(psutil.Process().pid)
    env.reset()
    env.step(np.zeros(4, np.int32))
    with pytest.raises(RuntimeError, match=r"env [0-3] \(SleepyEnv\) raised in step: ValueError\('step 2 of this "
                                           r"episode fails on purpose'\)") as error:
        env.step(np.zeros(4, np.int32))
    assert "worker traceback" in str(error.value) and "slow_env.py" in str(error.value)
    with pytest.raises(RuntimeError, match="fails on purpose"):  # the env stays failed, it does not hang
        env.step(np.zeros(4, np.int32))
    env.close()
    assert not alive(pids)
    with pytest.raises(RuntimeError, match=r"building envs 0\.\.0 raised .*NoSuchEnv"):
        SubprocGymnasiumVecEnv(functools.partial(gymnasium.make, "NoSuchEnv-v0"), num_envs=1, seed=0)


def test_close_joins_the_workers_and_frees_the_shared_memory():
    me, blocks = psutil.Process().pid, shared_blocks()
    before = workers_of(me)
    env = envs.make(EnvConfig(id="CartPole-v1", factory="envs.gym_adapter:make_gymnasium", num_envs=3,
                              options={"processes": 3}), seed=0)
    ours = workers_of(me) - before
    assert len(ours) == 3 and len(shared_blocks() - blocks) == 1
    env.reset()
    env.close()
    assert not alive(ours) and shared_blocks() - blocks == set()
    with pytest.raises(RuntimeError, match="closed"):
        env.reset()


CHILD = """
import functools, time
from envs.gym_adapter import SubprocGymnasiumVecEnv
from tests.slow_env import SleepyEnv
env = SubprocGymnasiumVecEnv(functools.partial(SleepyEnv, step_ms=30_000), num_envs=3, seed=0,
                             batch_size=1)
env.async_reset()
env.send([0], env.recv().env_id)  # one worker is in a 30 s step when the parent dies: it must not wait
print("ready", flush=True)
time.sleep(60)
"""


def test_a_sigkilled_parent_leaves_no_workers_and_no_shared_memory():
    blocks = shared_blocks()
    child = subprocess.Popen([sys.executable, "-c", CHILD], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                             env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    try:
        assert child.stdout.readline().strip() == "ready"
        below = {p.pid for p in psutil.Process(child.pid).children(recursive=True)}  # workers, fork server, tracker
        assert len(workers_of(child.pid)) == 3 and len(shared_blocks() - blocks) == 1
    finally:
        child.kill()
        child.wait()
    deadline = time.monotonic() + 10
    while (alive(below) or shared_blocks() - blocks) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(below), [psutil.Process(p).cmdline() for p in alive(below)]
    assert shared_blocks() - blocks == set()


def test_sleeping_envs_step_in_parallel_and_send_returns_at_once():
    """8 copies of a 20 ms step in 4 processes: a sync step of all takes ~2 x 20 ms, not 8 x 20 ms."""
    slow = functools.partial(SleepyEnv, step_ms=20, length=10**6)
    env = SubprocGymnasiumVecEnv(slow, num_envs=8, seed=0, processes=4)
    try:
        env.reset()
        start = time.perf_counter()
        for _ in range(5):
            env.step(np.zeros(8, np.int32))
        per_step = (time.perf_counter() - start) / 5
        assert per_step < 0.08, f"{per_step * 1e3:.0f} ms per step of 8 x 20 ms envs in 4 processes"
    finally:
        env.close()
    ring = SubprocGymnasiumVecEnv(slow, num_envs=2, seed=0, batch_size=1)
    try:
        ring.async_reset()
        ts = ring.recv()
        start = time.perf_counter()
        ring.send(np.zeros(1, np.int32), ts.env_id)
        assert time.perf_counter() - start < 0.01  # the 20 ms step runs in the worker meanwhile
        other = ring.recv()  # the other env's reset row is ready before the stepped env
        assert other.env_id[0] != ts.env_id[0] and ring.recv().env_id[0] == ts.env_id[0]
    finally:
        ring.close()
