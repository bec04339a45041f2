"""Measure the comm layer on this machine: inference round trips and params broadcast throughput.

    python bench/comm_latency.py                 # defaults: 500 round trips, 30 params blobs
    python bench/comm_latency.py --rounds 2000 --blobs 50

Inference: an actor-like DEALER sends a 1.8 MB uint8 observation batch (64 x 4 x 84 x 84, Atari
frames) to a ROUTER in another process, which answers with 64 int32 actions; p50/p99 round trip.
Params: a PUB sends 10 MB float32 blobs back to back to a SUB in another process; delivered MB/s.
Both over ipc:// and tcp://127.0.0.1. Peers are child processes started with subprocess (no pickle).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import zmq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from machine import describe  # bench/machine.py, next to this script

from srljax.comm import InferenceClient, InferenceServer, ParamsPublisher, ParamsSubscriber  # noqa: E402

TRIAL = "bench/comm"
OBS_SHAPE = (64, 4, 84, 84)  # 1,806,336 bytes
PARAMS_BYTES = 10 * 1024 * 1024
END = 2**31  # params version that tells the subscriber to stop (highest, so poll_newest keeps it)


def serve_inference(pattern: str) -> None:
    """Child: answer every request with actions until a request without observations arrives."""
    server = InferenceServer(pattern, TRIAL)
    print(server.address, flush=True)
    actions = np.zeros(OBS_SHAPE[0], np.int32)
    while True:
        for req in server.poll_requests(timeout_ms=1000):
            server.reply(req, {"action": actions})
            if "obs" not in req.tree:
                server.close()
                return


def serve_params(address: str) -> None:
    """Child: count blobs until END; print when the last one arrived (CLOCK_MONOTONIC is system-wide)."""
    sub = ParamsSubscriber(address, TRIAL, hwm=2)
    while sub.poll_newest(timeout_ms=100) is None:  # the parent publishes markers until we hear one
        pass
    print("ready", flush=True)  # the parent stops the markers
    while sub.poll_newest(timeout_ms=100) is not None:  # drain the ones still on the way
        pass
    sub.counts.clear()
    print("go", flush=True)
    t_last, blobs = 0.0, 0
    while True:
        got = sub.poll_newest(timeout_ms=5000)
        if got is None:
            break
        before = blobs
        blobs = sub.counts["received"]
        if blobs > before:
            t_last = time.monotonic()
        if got.version == END:
            break
    print(json.dumps({"received": blobs, "t_last": t_last}), flush=True)
    sub.close()


def child(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, *args], stdout=subprocess.PIPE, text=True)


def bench_inference(pattern: str, rounds: int) -> dict[str, float]:
    proc = child("--serve-inference", pattern)
    address = proc.stdout.readline().strip()
    client = InferenceClient(address, TRIAL)
    obs = np.random.default_rng(0).integers(0, 255, OBS_SHAPE, dtype=np.uint8)
    times = []
    for i in range(rounds + 20):  # the first 20 warm up connections and allocators
        t0 = time.perf_counter()
        client.send(i, {"obs": obs})
        rep = client.recv(timeout_ms=10_000)
        assert rep is not None and rep.request_id == i
        if i >= 20:
            times.append(time.perf_counter() - t0)
    client.send(-1, {})
    client.recv(timeout_ms=10_000)
    proc.wait(timeout=10)
    client.close()
    ms = np.array(times) * 1e3
    return {"p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
            "mean_ms": float(ms.mean()), "request_MB_per_s": obs.nbytes / 1e6 / (ms.mean() / 1e3)}


def bench_params(pattern: str, blobs: int) -> dict[str, float]:
    pub = ParamsPublisher(pattern, TRIAL, hwm=blobs + 10)  # deep queue: measure the pipe, not drops
    proc = child("--serve-params", pub.address)
    os.set_blocking(proc.stdout.fileno(), False)
    while not (line := proc.stdout.readline()):  # slow joiner: markers until the child hears one
        pub.publish(-1, None)
        time.sleep(0.01)
    assert line.strip() == "ready"
    os.set_blocking(proc.stdout.fileno(), True)
    assert proc.stdout.readline().strip() == "go"
    params = {"w": np.ones(PARAMS_BYTES // 4, np.float32)}
    t0 = time.monotonic()
    for v in range(blobs):
        pub.publish(v, params)  # zero-copy: every queued message shares the same buffer
    pub.publish(END, None)
    result = json.loads(proc.stdout.readline())
    proc.wait(timeout=10)
    pub.close()
    got = result["received"] - 1  # minus END
    seconds = result["t_last"] - t0
    return {"delivered": got, "sent": blobs, "MB_per_s": got * PARAMS_BYTES / 1e6 / seconds,
            "ms_per_blob": seconds / max(got, 1) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--blobs", type=int, default=30)
    parser.add_argument("--serve-inference", metavar="ADDRESS")
    parser.add_argument("--serve-params", metavar="ADDRESS")
    args = parser.parse_args()
    if args.serve_inference:
        return serve_inference(args.serve_inference)
    if args.serve_params:
        return serve_params(args.serve_params)
    print(f"machine: {describe()} | pyzmq {zmq.__version__} libzmq {zmq.zmq_version()} | numpy {np.__version__}")
    for name, pattern in [("ipc", "ipc://*"), ("tcp", "tcp://127.0.0.1:*")]:
        r = bench_inference(pattern, args.rounds)
        print(f"inference {name:3s} DEALER/ROUTER 1.8 MB uint8 request + 256 B reply, {args.rounds} round trips: "
              f"p50 {r['p50_ms']:.3f} ms  p99 {r['p99_ms']:.3f} ms  mean {r['mean_ms']:.3f} ms  "
              f"({r['request_MB_per_s']:.0f} MB/s of requests)")
    for name, pattern in [("ipc", "ipc://*"), ("tcp", "tcp://127.0.0.1:*")]:
        r = bench_params(pattern, args.blobs)
        print(f"params    {name:3s} PUB/SUB 10 MB float32 blob: delivered {r['delivered']}/{r['sent']}  "
              f"{r['MB_per_s']:.0f} MB/s  ({r['ms_per_blob']:.2f} ms per blob)")


if __name__ == "__main__":
    main()
