"""Measure the prioritized replay against a uniform numpy ring: inserts/s and sampled transitions/s.

    python bench/replay.py                          # 1M Atari transitions, batch 512, 8 env streams
    python bench/replay.py --capacity 200000 --seconds 5

The replay (``srljax.replay.buffer.Replay``, alpha 0.6, n-step 3) is filled with 84x84x4 uint8 stacks
built from a pool of random frames (stacks continue row to row; every 500th row ends an episode,
every 2,000th a game, whose next stack repeats one frame), ``--streams`` rows per insert as an
actor's env batch. Sampling: batches of ``--batch`` with importance weights, restacked frames,
n-step windows and bootstrap observations, each followed by a priority update for every sample.
The uniform ring draws indices uniformly from the same frame array and gathers the same 4 + 4
frames, actions, rewards and flags per sample, with no priorities, windows or episode handling:
the floor any replay of these frames pays. 1M stacks of 84x84x4 are 28.3 GB; where that does not
fit in available memory the replay stores single frames (``dedup_frames``) and the output says so.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from machine import describe  # bench/machine.py, next to this script

from srljax.replay.buffer import MEMORY_HEADROOM, Replay, available_memory_bytes, replay_bytes  # noqa: E402

STACK, SIDE = 4, 84


def fill(replay: Replay, rows: int, streams: int, rng: np.random.Generator) -> float:
    """Insert ``rows`` rows, ``streams`` per call; returns seconds spent inside ``Replay.add``."""
    pool = rng.integers(0, 256, (997, SIDE, SIDE), dtype=np.uint8)
    ids = np.arange(streams)
    action = np.zeros(streams, np.int32)
    reward = np.ones(streams, np.float32)
    no = np.zeros(streams, bool)
    start = np.zeros(streams, np.int64)  # each stream's stack restarts at its last game start
    spent = 0.0
    for t in range(rows // streams):
        game_start = t % 2000 == 0
        if game_start:
            start[:] = t
        back = np.maximum(t - np.arange(STACK - 1, -1, -1), start[0])
        obs = np.broadcast_to(pool[(back[None, :] + 31 * ids[:, None]) % len(pool)], (streams, STACK, SIDE, SIDE))
        done = np.full(streams, t % 500 == 499)
        t0 = time.perf_counter()
        replay.add(obs, action, reward, done, no, ids)
        spent += time.perf_counter() - t0
    return spent


def uniform_ring(obs: np.ndarray, action: np.ndarray, reward: np.ndarray, done: np.ndarray, batch: int,
                 rng: np.random.Generator) -> tuple:
    """A plain uniform ring over the same rows: an index draw and gathers (frames restacked if deduplicated)."""
    idx = rng.integers(STACK, obs.shape[0] - 1, batch)
    if obs.ndim == 4:  # full stacks
        both = np.take(obs, np.concatenate([idx, idx + 1]), axis=0)
    else:  # [2N, 4] frame rows, one gather, as the replay does
        rows = np.concatenate([idx, idx + 1])[:, None] + np.arange(1 - STACK, 1)
        both = np.take(obs, rows.reshape(-1), axis=0).reshape(2 * batch, STACK, *obs.shape[1:])
    return both[:batch], action[idx], reward[idx + 1], done[idx + 1], both[batch:]


def rates(fns: list, seconds: float, rounds: int = 10) -> list[tuple[float, int]]:
    """Calls per second of each of ``fns``, measured in alternating rounds of ``seconds / rounds`` each so that
    a change in the machine's load hits them alike (one warm-up call each first)."""
    for fn in fns:
        fn()
    calls, spent = [0] * len(fns), [0.0] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            while time.perf_counter() - t0 < seconds / rounds:
                fn()
                calls[i] += 1
            spent[i] += time.perf_counter() - t0
    return [(c / t, c) for c, t in zip(calls, spent)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capacity", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--streams", type=int, default=8, help="env streams, rows per insert")
    parser.add_argument("--n-step", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=10.0, help="per sampling measurement (interleaved)")
    args = parser.parse_args()
    print(describe())

    shape = (STACK, SIDE, SIDE)
    full = replay_bytes(args.capacity, args.streams, shape, "uint8")
    available = available_memory_bytes()
    dedup = available is not None and full > MEMORY_HEADROOM * available
    stored = replay_bytes(args.capacity, args.streams, shape, "uint8", dedup_frames=dedup)
    print(f"replay: {args.capacity:,} transitions of {'x'.join(map(str, shape))} uint8, {args.streams} streams, "
          f"n-step {args.n_step}, alpha 0.6; full stacks need {full / 1e9:.1f} GB, MemAvailable "
          f"{(available or 0) / 1e9:.1f} GB -> "
          + (f"frame deduplication ON (single 84x84 frames, {stored / 1e9:.1f} GB)" if dedup
             else f"full stacks ({stored / 1e9:.1f} GB)"))
    replay = Replay(args.capacity, args.streams, shape, "uint8", n_step=args.n_step, alpha=0.6,
                    dedup_frames=dedup)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    spent = fill(replay, args.capacity, args.streams, rng)
    print(f"filled {replay.inserted:,} rows in {time.perf_counter() - t0:.1f} s (building stacks included); "
          f"{replay.size:,} sampleable")
    inserts = replay.inserted / spent

    # the uniform ring's insert: each row's stored observation and fields at the next ring position
    ring = {"obs": np.zeros((65_536, *replay.obs.shape[1:]), np.uint8), "action": np.zeros(65_536, np.int32),
            "reward": np.zeros(65_536, np.float32), "done": np.zeros(65_536, bool)}
    rows = np.zeros((args.streams, *shape), np.uint8)
    position = [0]

    def ring_insert() -> None:
        at = (position[0] + np.arange(args.streams)) % 65_536
        ring["obs"][at] = rows[:, -1] if dedup else rows
        ring["action"][at], ring["reward"][at], ring["done"][at] = 0, 1.0, False
        position[0] += args.streams


    def prioritized() -> None:
        _, keys = replay.sample(args.batch, beta=0.4, rng=rng)
        replay.update_priorities(keys, rng.random(args.batch))

    def uniform() -> None:
        uniform_ring(replay.obs, replay.action, replay.reward, replay.terminated, args.batch, rng)

    (prioritized_rate, calls), (uniform_rate, uniform_calls) = rates([prioritized, uniform], 2 * args.seconds)
    ring_inserts = rates([ring_insert], 2.0)[0][0] * args.streams
    p, u = prioritized_rate * args.batch, uniform_rate * args.batch
    print(f"inserts/s ({args.streams} rows per call): prioritized replay {inserts:,.0f}, "
          f"uniform ring {ring_inserts:,.0f}")
    print(f"sampled transitions/s (batch {args.batch}): prioritized with priority updates {p:,.0f} ({calls} batches), "
          f"uniform ring {u:,.0f} ({uniform_calls} batches)")
    print(f"prioritized / uniform = {p / u:.2f} (target >= 0.50); prioritized {p / 1000:.0f}k transitions/s "
          f"(target >= 32k: a learner at 1,000 updates/s of batch 32)")


if __name__ == "__main__":
    main()
