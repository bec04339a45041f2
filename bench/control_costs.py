"""What ``bench/control_plane.py`` measures beside the trial: the name service alone, and CPU costs in isolation.

    from control_costs import isolated_costs, names_latency   # bench/ on sys.path
    names_latency(10_000, folder)     # get p50/p99 (µs) and one list (ms), MemoryNames and DirectoryNames
    isolated_costs()                  # CPU µs per heartbeat through ControlServer.poll and per connection
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import zmq  # noqa: E402

from srljax.comm.codec import encode  # noqa: E402
from srljax.comm.names import DirectoryNames, MemoryNames, NameResolver  # noqa: E402
from srljax.comm.security import WireRules  # noqa: E402
from srljax.comm.sockets import make_socket  # noqa: E402
from srljax.layout import CONTROLLER  # noqa: E402


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


# -- the name service alone -------------------------------------------------------------------------
def names_latency(workers: int, folder: Path, samples: int = 2000) -> dict[str, dict[str, float]]:
    """``get`` p50/p99 (µs) and one ``list`` of the policy role (ms) with one entry per worker."""
    keys = [f"control_plane/n{workers}/{role}/{index}/control" for role, index in
            [("trainer", 0)] + [("policy", i) for i in range(max(1, workers // 100))] +
            [("actor", i) for i in range(workers - 1 - max(1, workers // 100))]]
    out = {}
    backends: list[tuple[str, NameResolver]] = [("memory", MemoryNames()), ("directory", DirectoryNames(folder))]
    for label, names in backends:
        for key in keys:
            names.add(key, "tcp://127.0.0.1:5555")
        picks = random.Random(1).choices(keys, k=samples)
        times = []
        for key in picks:
            t = time.perf_counter()
            names.get(key)
            times.append(time.perf_counter() - t)
        t = time.perf_counter()
        listed = names.list(f"control_plane/n{workers}/policy/")
        list_ms = (time.perf_counter() - t) * 1e3
        assert len(listed) == max(1, workers // 100)
        out[label] = {"get_p50_us": percentile(times, 50) * 1e6, "get_p99_us": percentile(times, 99) * 1e6,
                      "list_ms": list_ms}
    return out


# -- CPU costs in isolation (what the crowded box does not distort) -------------------------------------
def isolated_costs(connections: int = 500, messages: int = 20_000) -> dict[str, float]:
    """CPU µs (all threads of this process) per heartbeat through ``ControlServer.poll`` and per
    connection handshake (both ends, here in one process), with CURVE and without."""
    from srljax.comm import ControlClient, ControlServer
    from srljax.comm.security import KeyRing, WireContext

    out = {}
    for label in ("off", "on"):
        keys = KeyRing.generate([CONTROLLER, "actor"]) if label == "on" else None
        server_ctx = WireContext(WireRules(keys=keys, identity=CONTROLLER, limits={"control": 256 << 10}))
        client_ctx = WireContext(WireRules(keys=keys, identity="actor", pinned={"control": CONTROLLER}))
        client_ctx.set(zmq.MAX_SOCKETS, connections + 64)
        server = ControlServer("tcp://127.0.0.1:*", "bench/t0", ctx=server_ctx)
        one = ControlClient(server.address, "bench/t0", "bench/t0/actor/0", ctx=client_ctx)
        for seq in range(messages):
            one.send("heartbeat", {"state": "running", "seq": seq, "gap_s": 1.0, "loop_age_s": 0.0, "progress": 0,
                                   "waiting": "", "sent": time.monotonic(), "incarnation": "0123456789ab"}, timeout_ms=None)
        time.sleep(2.0)  # all sent and queued at the server
        began, got = time.process_time(), 0
        while got < messages:
            got += len(server.poll(timeout_ms=1000, limit=1000))
        out[f"poll_us_auth_{label}"] = (time.process_time() - began) / messages * 1e6
        began = time.process_time()
        socks = []
        for _ in range(connections):  # the same rules a worker's socket gets, without the monitor
            sock = make_socket(client_ctx, zmq.DEALER)
            client_ctx.rules.secure_client(sock, "control", server.address)
            sock.connect(server.address)
            sock.send_multipart(encode("register", "bench/t0", None, meta={"worker": "bench/t0/actor/1", "payload": {}}))
            socks.append(sock)
        got = 0
        while got < connections and server.sock.poll(60_000):
            server.sock.recv_multipart()
            got += 1
        out[f"handshake_us_auth_{label}"] = (time.process_time() - began) / connections * 1e6
        for sock in socks:
            sock.close(linger=0)
        one.close()
        server.close()
        server_ctx.close()
        client_ctx.close()
    return out
