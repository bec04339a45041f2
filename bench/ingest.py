"""Trainer ingest at scale: N simulated actors push Atari-size segments to one trainer-side receiver, directly
and through buffer workers, over the real sample streams; GB/s per trainer against this machine's memcpy.

    python bench/ingest.py                                   # 1, 2, 4 actors direct; 4 actors through 1 and 2 buffers
    python bench/ingest.py --actors 8 --buffers 0 2 --seconds 10
    python bench/ingest.py --put --shared-memory both         # each row over TCP, then through /dev/shm rings
    python bench/ingest.py --costs runs/plan/atari_ppo-<digest>.json --cores 10000   # and the 10,000-core table

Each actor, buffer and the trainer is a process of its own (``python bench/ingest.py --child ROLE JSON``, in a
session of its own as ``launch/processes.py`` starts workers). The segment is the config's (``--config``, default
``configs/atari_ppo.py``: ``algo.num_steps`` + 1 rows x ``env.num_envs`` columns of uint8 4x84x84 frames, the
algorithm's extras), built once by each actor and sent over and over with ``SampleSender`` (``comm/codec.py``'s
frames, ``copy=False``) to a ``SampleReceiver`` on loopback TCP (``recv_multipart(copy=False)``: the arrays are
``np.frombuffer`` views of the received frames). The trainer process does what the trainer does with a segment
(``checked_trajectory``, then ``concat_segments`` / ``split_segments`` into batches of one segment per actor,
as a planned layout's ``trainer.batch_envs``, or ``--batch`` segments: one copy); a buffer does what ``BufferWorker.poll`` does (check, join what it holds
into messages of one trainer's batch, forward). Joins go into reused arrays (``JoinPool``; a buffer's sent ones
are reused once zmq's tracker is done), or with ``--join fresh`` into new ones (``concat_segments`` /
``split_segments``, the path before). ``--put``: the trainer also ``jax.device_put``s each batch (as ``Learner.put``)
and waits for it; on the CPU backend that is no copy for a pooled (64-byte aligned) batch. The trainer and the
buffers keep freed memory for the next frames (``comm.sockets.keep_freed_memory``, as a worker serving samples
does), or with ``--memory fresh`` keep glibc's defaults (every received 29 MB frame a fresh mapping, faulted in);
a buffer's messages stay below 32 MB, whole segments forwarded unjoined (``staging.buffer.message_columns``), or
with ``--buffer-messages batch`` are one trainer batch (116 MB at 4 actors). ``--transport ipc``: unix sockets,
as ``layout.transport=ipc``. ``--shared-memory on``: as ``layout.shared_memory=true``, each sender (actor, buffer)
copies a message into a slot of its ring in ``/dev/shm`` and sends a descriptor, and the receiver reads the slot in
place (``srljax/comm/shm.py``); ``both``: every row over the socket, then through shared memory, back to back. The trainer's page faults per MB received are printed beside its GB/s. Figures over the window after ``--warmup`` s: the trainer's GB/s and env steps/s,
its process's CPU (zmq's I/O thread included) and the GB/s one core of it would take (bytes over its CPU seconds);
each buffer's the same; this machine's memcpy bandwidth (``np.copyto`` of 256 MB, one thread, best of 5) and the
ratio. With ``--costs`` (what ``python -m launch.plan CFG --measure`` wrote for the same config), the table of
every tier's measured capacity and the count of each role a cluster of ``--cores`` cores needs.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TRIAL = "bench/ingest"


# -- the children ----------------------------------------------------------------------------------------------
def _segment(spec: Any, extras_spec: dict[str, Any], t: int, b: int, seed: int) -> Any:
    from srljax.types import Trajectory

    rng = np.random.default_rng(seed)
    return Trajectory(
        obs=rng.integers(0, 256, (t + 1, b, *spec.obs_shape), dtype=np.uint8) if spec.obs_dtype == "uint8"
        else rng.normal(size=(t + 1, b, *spec.obs_shape)).astype(spec.obs_dtype),
        action=rng.integers(0, max(spec.num_actions, 1), (t + 1, b, *spec.action_shape)).astype(spec.action_dtype),
        reward=rng.normal(size=(t + 1, b)).astype(np.float32), terminated=np.zeros((t + 1, b), bool),
        truncated=np.zeros((t + 1, b), bool),
        extras={k: np.zeros((t + 1, b, *shape), dtype) for k, (shape, dtype) in extras_spec.items()},
        policy_version=np.zeros(b, np.int32))


def _spec(d: dict[str, Any]) -> Any:
    from srljax.types import EnvSpec

    return EnvSpec(**{k: tuple(v) if isinstance(v, list) else v for k, v in d.items()})


def _extras(d: dict[str, Any]) -> dict[str, tuple[tuple[int, ...], str]]:
    return {k: (tuple(shape), dtype) for k, (shape, dtype) in d.items()}


def _faults() -> int:
    """This process's page faults so far (minor: memory the kernel zeroed and mapped in)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _say(**x: Any) -> None:
    print(json.dumps(x), flush=True)


def _memory(a: dict[str, Any]) -> None:
    """As ``srljax.system.shell.run`` does for a process serving samples, unless ``--memory fresh``."""
    if a["memory"] == "keep":
        from srljax.comm.sockets import keep_freed_memory

        keep_freed_memory()


def child_actor(a: dict[str, Any]) -> None:
    from srljax.comm.samples import SampleSender

    segment = _segment(_spec(a["spec"]), _extras(a["extras"]), a["t"], a["b"], a["index"])
    sender = SampleSender(None, TRIAL, shared_memory=a["shm"])
    for address in a["to"]:
        sender.connect(address)
    sent, deadline = 0, time.monotonic() + a["run_s"]
    while time.monotonic() < deadline:
        if sender.send(segment, timeout_ms=100, version=0, meta={"actor": a["index"]}):
            sent += 1
    sender.close()
    _say(role="actor", sent=sent)


def child_buffer(a: dict[str, Any]) -> None:
    """``BufferWorker.poll``'s data path: take what came (checked), join it, split it into one trainer's batch."""
    from srljax.comm.samples import SampleReceiver, SampleSender
    from srljax.learning.rollout import JoinPool, concat_segments, split_segments
    from srljax.system.shell.common import checked_trajectory

    spec, extras = _spec(a["spec"]), _extras(a["extras"])
    _memory(a)
    chunk = a["chunk"]
    if a["buffer_messages"] == "capped":  # as BufferWorker: no frame above glibc's largest mmap threshold
        from srljax.system.staging.buffer import message_columns

        chunk = min(chunk, message_columns(a["t"], spec, extras, a["b"]))
    receiver = SampleReceiver("ipc://*" if a["transport"] == "ipc" else "tcp://127.0.0.1:*", TRIAL,
                              shared_memory=a["shm"])
    sender = SampleSender(a["to"][0], TRIAL, shared_memory=a["shm"],
                          slot_bytes=a["segment_bytes"] * -(-chunk // a["b"]) + (1 << 16))
    pool = JoinPool(keep=6) if a["join"] == "pool" else None

    def send(batch: Any, timeout_ms: int) -> bool:
        if pool is None:
            return sender.send(batch, timeout_ms=timeout_ms, version=0)
        tracker = sender.send_tracked(batch, timeout_ms=timeout_ms, version=0)
        if tracker is not None:
            pool.hold(batch, tracker)
        return tracker is not None
    _say(address=receiver.address)
    outgoing: list[Any] = []
    got, bytes_in, window = 0, 0, None
    start = time.monotonic()
    deadline = start + a["run_s"]
    while time.monotonic() < deadline:
        if len(outgoing) >= 4:
            if send(outgoing[0], 50):
                outgoing.pop(0)
            continue
        held, msg = [], receiver.recv(timeout_ms=50)
        while msg is not None and len(held) < 64:
            held.append(checked_trajectory(msg.tree, spec, a["t"], extras))
            msg = receiver.recv(timeout_ms=0) if len(held) < 64 else None
        if window is None and time.monotonic() - start >= a["warmup_s"] + a["settle_s"]:
            window = (time.monotonic(), time.process_time(), got, bytes_in)
        if held:
            got += len(held)
            bytes_in += len(held) * a["segment_bytes"]
            if pool is None:  # --join fresh: the join before this issue, into new arrays
                merged = concat_segments(held)
                while merged.reward.shape[1]:
                    head, merged = split_segments(merged, chunk)
                    outgoing.append(head)
            else:
                left = len(held) * a["b"]
                while held:
                    head, held = pool.join(held, min(chunk, left))
                    left -= head.reward.shape[1]
                    outgoing.append(head)
        while outgoing and send(outgoing[0], 0):
            outgoing.pop(0)
        if window is not None and time.monotonic() - window[0] >= a["window_s"]:
            break
    wall, cpu = time.monotonic() - window[0], time.process_time() - window[1]
    _say(role="buffer", segments=got - window[2], bytes=bytes_in - window[3], wall_s=wall, cpu_s=cpu)
    receiver.close()
    sender.close()


def child_trainer(a: dict[str, Any]) -> None:
    """The trainer's sample intake (``sources.take`` / ``cut``): check each segment, cut batches (one copy)."""
    from srljax.comm.samples import SampleReceiver
    from srljax.learning.rollout import JoinPool, concat_segments, split_segments
    from srljax.system.shell.common import checked_trajectory

    spec, extras = _spec(a["spec"]), _extras(a["extras"])
    _memory(a)
    receiver = SampleReceiver("ipc://*" if a["transport"] == "ipc" else "tcp://127.0.0.1:*", TRIAL,
                              shared_memory=a["shm"])
    pool = JoinPool(keep=3) if a["join"] == "pool" else None
    if a["put"]:  # as Learner.put: the batch to the (CPU) device, waited for
        import jax
    _say(address=receiver.address)
    pending, columns, batches, got, nbytes, taken, window = [], 0, 0, 0, 0, 0, None
    start, first = time.monotonic(), None
    while time.monotonic() - start < a["run_s"]:
        msg = receiver.recv(timeout_ms=100)
        if msg is None:
            continue
        if first is None:
            first = time.monotonic()
        if window is None and time.monotonic() - first >= a["warmup_s"]:
            window = (time.monotonic(), time.process_time(), got, nbytes, batches, taken, _faults())
        traj = checked_trajectory(msg.tree, spec, a["t"], extras)
        got += 1
        nbytes += sum(x.nbytes for x in (*traj[:5], *traj.extras.values(), traj.policy_version))
        pending.append(traj)
        columns += traj.reward.shape[1]
        taken += traj.reward.shape[1]
        if columns >= a["batch"]:
            if pool is None:  # --join fresh
                batch, rest = split_segments(concat_segments(pending), a["batch"])
                pending = [rest] if rest.reward.shape[1] else []
            else:  # as SegmentSource.cut; the batch is released at once (no update reads it here)
                batch, pending = pool.join(pending, a["batch"])
                pool.free(batch)
            if a["put"]:
                jax.block_until_ready(jax.device_put(batch))
            columns -= a["batch"]
            batches += 1
            del batch
        if window is not None and time.monotonic() - window[0] >= a["window_s"]:
            break
    if window is None:
        _say(role="trainer", error="no window: too few segments arrived")
        return
    wall, cpu = time.monotonic() - window[0], time.process_time() - window[1]
    _say(role="trainer", messages=got - window[2], bytes=nbytes - window[3], batches=batches - window[4],
         columns=taken - window[5], wall_s=wall, cpu_s=cpu, faults=_faults() - window[6],
         counters=receiver.counters())
    receiver.close()


# -- the parent ------------------------------------------------------------------------------------------------
def memcpy_gbps(mbytes: int = 256, repeats: int = 5) -> float:
    src = np.random.default_rng(0).integers(0, 256, mbytes << 20, dtype=np.uint8)
    dst = np.zeros_like(src)  # its pages touched before the timing
    np.copyto(dst, src)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return src.nbytes / best / 1e9


def start(role: str, args: dict[str, Any]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, __file__, "--child", role, json.dumps(args)], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def first_line(proc: subprocess.Popen) -> dict[str, Any]:
    line = proc.stdout.readline()
    if not line:
        raise SystemExit(f"a child exited before saying its address (exit {proc.wait()})")
    return json.loads(line)


def one_row(setup: dict[str, Any], actors: int, buffers: int, opts: argparse.Namespace, shared: bool) -> dict[str, Any]:
    settle = 1.0 + 0.3 * (actors + buffers)  # the children's start-up (imports) before the first segment
    run_s = settle + opts.warmup + opts.seconds + 5.0
    batch = (opts.batch or actors) * setup["b"]  # a planned layout's trainer.batch_envs: every actor's columns
    common = {**setup, "join": opts.join, "put": opts.put, "memory": opts.memory, "buffer_messages": opts.buffer_messages, "transport": opts.transport, "shm": shared, "warmup_s": opts.warmup, "window_s": opts.seconds, "run_s": run_s, "settle_s": settle,
              "batch": batch, "chunk": batch}
    trainer = start("trainer", common)
    procs = [trainer]
    try:
        to = [first_line(trainer)["address"]]
        mids = []
        for _ in range(buffers):
            mids.append(start("buffer", {**common, "to": to}))
            procs.append(mids[-1])
        if mids:
            to = [first_line(p)["address"] for p in mids]
        for i in range(actors):
            procs.append(start("actor", {**common, "to": to, "index": i, "run_s": run_s}))
        got = json.loads(trainer.stdout.readline() or "{}")
        buffer_rows = [json.loads(p.stdout.readline() or "{}") for p in mids]
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        if shared:  # the terminated children's rings
            from srljax.comm.shm import remove_dead_rings

            remove_dead_rings(TRIAL)
    if "error" in got or not got:
        raise SystemExit(f"{actors} actors, {buffers} buffers: {got.get('error', 'the trainer said nothing')}")
    steps = got["columns"] * setup["t"]
    drops = {k: v for k, v in got.get("counters", {}).items() if k.startswith("drop.")}
    row = {"actors": actors, "buffers": buffers, "shm": shared, "trainer_drops": drops, "trainer_gbps": got["bytes"] / got["wall_s"] / 1e9,
           "trainer_env_steps_per_s": steps / got["wall_s"], "trainer_cores": got["cpu_s"] / got["wall_s"],
           "trainer_gbps_per_core": got["bytes"] / max(got["cpu_s"], 1e-9) / 1e9, "batches": got["batches"],
           "batch_columns": batch, "trainer_messages_per_s": got["messages"] / got["wall_s"],
           "trainer_faults_per_mb": got["faults"] / max(got["bytes"] / 1e6, 1e-9)}
    if buffer_rows:  # a buffer that said nothing (its window never started before the trainer's ended) is left out
        row["buffers_silent"] = sum("bytes" not in b for b in buffer_rows)
        buffer_rows = [b for b in buffer_rows if "bytes" in b]
        row["buffer_gbps"] = [b["bytes"] / b["wall_s"] / 1e9 for b in buffer_rows]
        row["buffer_gbps_per_core"] = [b["bytes"] / max(b["cpu_s"], 1e-9) / 1e9 for b in buffer_rows]
    return row


def setup_of(config: str, overrides: list[str]) -> dict[str, Any]:
    import algos
    import envs
    from srljax.comm.codec import encode
    from srljax.config import apply_overrides, load_file

    cfg = apply_overrides(load_file(config), overrides)
    env = envs.make(dataclasses.replace(cfg.env, num_envs=1, batch_size=0), seed=0)
    spec = env.spec
    env.close()
    extras = algos.make(cfg, spec).extras_spec
    t, b = cfg.algo.num_steps, cfg.env.num_envs
    frames = encode("sample", TRIAL, _segment(spec, extras, t, b, 0), version=0, meta={"actor": 0})
    nbytes = sum(len(memoryview(f)) for f in frames)
    return {"spec": dataclasses.asdict(spec), "extras": {k: [list(s), d] for k, (s, d) in extras.items()}, "t": t,
            "b": b, "segment_bytes": nbytes,
            "bytes_per_step": nbytes / (t * b)}


def table(costs_path: str, cores: int, ingest_gbps_per_core: float, buffer_gbps_per_core: float,
          bytes_per_step: float) -> list[str]:
    """Every tier's measured capacity and the count of each role ``cores`` cores of actors keep fed."""
    from srljax.sizing import BUFFER_FAN_IN, Costs

    costs = Costs.from_dict(json.loads(Path(costs_path).read_text()))
    e = max(costs.actor, key=lambda n: n / max(costs.actor[n].cpu_s, 1e-12))  # the env count cheapest per step
    actor = costs.actor[e]
    actor_per_core = e / max(actor.cpu_s + costs.ingest_send_cpu_s * e, 1e-12)  # env steps/s of one core of actors
    actor_per_process = e / max(actor.wall_s, actor.cpu_s)
    env_per_core = e / max(costs.env[e].cpu_s, 1e-12)
    n = max(u for u, _ in costs.update)
    update = costs.update_cost(n)
    trainer_update = n / update.wall_s
    trainer_ingest = ingest_gbps_per_core * 1e9 / bytes_per_step
    buffer_rate = buffer_gbps_per_core * 1e9 / bytes_per_step
    target = cores * actor_per_core
    actors = math.ceil(target / actor_per_process)
    rows = [("env step (random actions)", f"{e} envs, {costs.env[e].cpu_s * 1e3:.2f} ms CPU per batch step",
             env_per_core, "env steps/s per core", "-"),
            ("actor (env + inline act + segment + send)", f"{e} envs, {actor.cpu_s * 1e3:.2f} ms CPU / "
             f"{actor.wall_s * 1e3:.2f} ms wall per batch step", actor_per_core, "env steps/s per core",
             f"{actors:,} actors of {e} envs ({cores:,} cores)"),
            ("trainer update (CPU, this machine)", f"{n:,} samples in {update.wall_s:.2f} s", trainer_update,
             "env steps/s per trainer", f"{math.ceil(target / trainer_update):,} trainers"),
            ("trainer ingest (this bench)", f"{ingest_gbps_per_core:.2f} GB/s per core, {bytes_per_step:,.0f} B "
             "per env step", trainer_ingest, "env steps/s per trainer core",
             f"{math.ceil(target / trainer_ingest):,} trainer cores of ingest"),
            ("buffer worker (this bench)", f"{buffer_gbps_per_core:.2f} GB/s per core", buffer_rate,
             "env steps/s per buffer", f"{max(math.ceil(target / buffer_rate), math.ceil(actors / BUFFER_FAN_IN)):,} "
             f"buffers (>= {actors:,} / {BUFFER_FAN_IN} actors each)")]
    out = [f"the {cores:,}-core table (unit costs {costs_path}, measured on {costs.device}; "
           f"{cores:,} cores of actors make {target:,.0f} env steps/s):",
           "| tier | unit measured | capacity | per | count for that rate |", "|---|---|---:|---|---|"]
    out += [f"| {a} | {b} | {c:,.0f} | {d} | {f} |" for a, b, c, d, f in rows]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)
    parser.add_argument("child_args", nargs="?", help=argparse.SUPPRESS)
    parser.add_argument("--config", default="configs/atari_ppo.py")
    parser.add_argument("--actors", type=int, nargs="+", default=[1, 2, 4], help="actor counts sending directly")
    parser.add_argument("--buffers", type=int, nargs="+", default=[1, 2],
                        help="buffer counts between --through actors and the trainer (0: none)")
    parser.add_argument("--through", type=int, default=4, help="actors in the rows with buffers")
    parser.add_argument("--seconds", type=float, default=5.0, help="measured window per row")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds after the first segment left out")
    parser.add_argument("--batch", type=int, default=0,
                        help="trainer batch in segments (default: one per actor, as a planned layout's batch_envs)")
    parser.add_argument("--join", choices=("pool", "fresh"), default="pool",
                        help="joins into reused arrays (JoinPool, as the buffer and trainer do) or into new ones (before)")
    parser.add_argument("--put", action="store_true",
                        help="the trainer also puts each batch on its jax device (as Learner.put) and waits for it")
    parser.add_argument("--memory", choices=("keep", "fresh"), default="keep",
                        help="the trainer and buffers keep freed memory for the next frames (comm.sockets."
                             "keep_freed_memory, as a worker serving samples does) or glibc's defaults (before)")
    parser.add_argument("--buffer-messages", choices=("capped", "batch"), default="capped",
                        help="a buffer's messages: one trainer batch, no frame above 32 MB (as BufferWorker), or "
                             "one trainer batch whatever its size (before)")
    parser.add_argument("--transport", choices=("tcp", "ipc"), default="tcp",
                        help="loopback TCP, or unix sockets (what layout.transport=ipc binds on one host)")
    parser.add_argument("--shared-memory", choices=("off", "on", "both"), default="off",
                        help="samples through rings in /dev/shm (layout.shared_memory: only a descriptor on the "
                             "socket), or over it; both: each row both ways, back to back")
    parser.add_argument("--costs", default="", help="launch.plan --measure's unit costs of --config: print the table")
    parser.add_argument("--cores", type=int, default=10_000, help="the table's cluster: cores of actors")
    parser.add_argument("--set", action="append", default=[], help="config override key=value (repeatable)")
    opts = parser.parse_args()
    if opts.child:
        {"actor": child_actor, "buffer": child_buffer, "trainer": child_trainer}[opts.child](json.loads(opts.child_args))
        return 0
    from machine import describe  # bench/machine.py

    print(describe(), flush=True)
    setup = setup_of(opts.config, opts.set)
    copy = memcpy_gbps()
    print(f"transport: {opts.transport}; memory: {opts.memory}; buffer messages: {opts.buffer_messages}; "
          f"joins: {opts.join}{', device_put' if opts.put else ''}; {opts.config}: segments of {setup['t'] + 1} x {setup['b']} x {setup['spec']['obs_shape']} "
          f"{setup['spec']['obs_dtype']}, {setup['segment_bytes'] / 1e6:.2f} MB ({setup['bytes_per_step']:,.0f} B per "
          f"env step); memcpy {copy:.2f} GB/s (one thread)", flush=True)
    rows = []
    plan = [(a, 0) for a in opts.actors] + [(opts.through, k) for k in opts.buffers if k > 0]
    modes = {"off": [False], "on": [True], "both": [False, True]}[opts.shared_memory]
    for (actors, buffers), shared in [(p, m) for p in plan for m in modes]:
        row = one_row(setup, actors, buffers, opts, shared)
        row["memcpy_gbps"] = copy
        rows.append(row)
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}), flush=True)
    print("\n| actors | buffers | samples | trainer GB/s | / memcpy | trainer env steps/s | trainer cores | trainer GB/s per core "
          "| trainer faults per MB | per buffer: GB/s, GB/s per core |\n|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        per_buffer = ", ".join(f"{g:.2f} / {c:.2f}" for g, c in zip(r.get("buffer_gbps", []),
                                                                   r.get("buffer_gbps_per_core", []))) or "-"
        print(f"| {r['actors']} | {r['buffers']} | {'shared memory' if r['shm'] else opts.transport} | {r['trainer_gbps']:.2f} | {r['trainer_gbps'] / copy:.2f} | "
              f"{r['trainer_env_steps_per_s']:,.0f} | {r['trainer_cores']:.2f} | {r['trainer_gbps_per_core']:.2f} | "
              f"{r['trainer_faults_per_mb']:.1f} | {per_buffer} |")
    if opts.costs:
        direct = [r for r in rows if not r["buffers"] and r["shm"] == modes[-1]]
        buffered = [g for r in rows if r["shm"] == modes[-1] for g in r.get("buffer_gbps_per_core", [])]
        ingest = max(r["trainer_gbps_per_core"] for r in direct) if direct else 0.0
        print("\n" + "\n".join(table(opts.costs, opts.cores, ingest, min(buffered) if buffered else ingest,
                                     setup["bytes_per_step"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
