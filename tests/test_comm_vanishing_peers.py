"""Servers that vanish under clients still reading: the inference stream never aborts the process.

libzmq 4.3.5 aborts the whole process (``Assertion failed: !_more (src/fq.cpp:80)`` in a client's receive, or
``Resource temporarily unavailable (src/session_base.cpp:233)`` on its I/O thread) when a peer goes away while
a multipart message is between it and a DEALER: a plain pyzmq script of ``churn``'s shape (IMMEDIATE DEALER,
three-frame replies, ipc) aborted in 4 of 7 runs of 100-150 rounds, and two of 200 threads-backend chaos trials
aborted so at their end; ``churn`` itself with multipart messages passed the one time it was run.
The inference stream sends each message as one packed frame (``codec.pack``); this runs the same churn
through the real ``InferenceServer`` / ``InferenceClient`` in a child process and wants it to exit 0.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zmq

from srljax.comm import InferenceClient, InferenceServer

ROOT = Path(__file__).resolve().parents[1]
TRIAL = "exp/t0"


def churn(rounds: int, seconds: float = 0.3) -> int:
    """``rounds`` times: two servers answer a client's stream of requests with three replies each, then close
    while the client keeps sending and reading; the replies the client took."""
    tree = {"obs": np.zeros((4, 750), np.float32), "mask": np.ones((4, 50), np.uint8)}
    taken = 0
    for r in range(rounds):
        ctx_s, ctx_c, stop = zmq.Context(), zmq.Context(), threading.Event()
        servers = [InferenceServer(f"ipc://{tempfile.gettempdir()}/srljax-churn-{os.getpid()}-{r}-{i}.sock", TRIAL,
                                   ctx=ctx_s) for i in range(2)]

        def serve(server: InferenceServer) -> None:
            while not stop.is_set():
                for request in server.poll_requests(timeout_ms=5):
                    for _ in range(3):
                        server.reply(request, tree)
            server.close()

        threads = [threading.Thread(target=serve, args=(s,)) for s in servers]
        client = InferenceClient(None, TRIAL, ctx=ctx_c)
        for server in servers:
            client.connect(server.address)
        for t in threads:
            t.start()
        end = time.monotonic() + seconds  # serving
        while time.monotonic() < end:
            client.send(r, {"q": np.zeros(25, np.float32)}, timeout_ms=0)
            while client.recv(timeout_ms=0) is not None:
                taken += 1
        stop.set()  # the servers close while the client goes on sending and reading
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            client.send(r, {"q": np.zeros(25, np.float32)}, timeout_ms=0)
            taken += client.recv(timeout_ms=0) is not None
        for t in threads:
            t.join()
        client.close()
        ctx_c.term()
        ctx_s.term()
    return taken


@pytest.mark.slow
def test_servers_closing_under_a_reading_client_never_abort() -> None:
    code = f"from tests.test_comm_vanishing_peers import churn; print('replies', churn({150}))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert int(done.stdout.split()[-1]) > 150  # the servers did answer in every round
