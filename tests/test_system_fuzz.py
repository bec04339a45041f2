"""Fuzz a live run: 1,000 bad messages to each kind of socket the workers listen on, and it still finishes.

The sockets: the controller's ROUTER, the policy worker's ROUTER, the trainer's PULL and the
params SUB of the policy worker (a rogue publisher registered under the params prefix, so the
subscriber connects to it as to any publisher). Bad means random bytes, truncated or mangled
headers, foreign trials and schemas, wrong kinds, missing or extra frames, and - for the data
streams - well-formed messages whose contents do not fit (wrong shapes, dtypes, fields). Every
one must be dropped and counted, by the socket (``drop.<reason>``) or by the worker (``*_invalid``).
With ``layout.auth=on`` the fuzzer holds the trial's keys (an insider: the actor's to connect, the
trainer's to publish), so the same checks are tested behind the CURVE handshake.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgpack
import numpy as np
import pytest
import zmq

from launch.threads import run_threads
from srljax.comm import MemoryNames
from srljax.comm.codec import SCHEMA_VERSION, encode
from srljax.comm.security import KeyRing
from srljax.config import apply_overrides, load_file
from srljax.layout import CONTROLLER, POLICY, TRAINER
from srljax.system.shell import auth
from srljax.system.shell.common import stream_key, trial_name
from srljax.system.training.params import ParamsFollower
from srljax.system.training.sources import SegmentSource

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "cartpole_ppo_distributed.py"
N_BAD = 1000


def rehead(frames: list[bytes], **changes) -> list[bytes]:
    header = msgpack.unpackb(frames[0])
    header.update(changes)
    return [msgpack.packb(header), *frames[1:]]


def codec_garbage(rng: np.random.Generator, good: list[bytes]) -> list[bytes]:
    """A message the codec must refuse, derived from a valid one."""
    choice = int(rng.integers(8))
    if choice == 0:
        return [rng.bytes(int(rng.integers(0, 200))) for _ in range(int(rng.integers(1, 4)))]
    if choice == 1:
        return [good[0][: int(rng.integers(0, len(good[0])))], *good[1:]]  # truncated header
    if choice == 2:
        return rehead(good, trial=["other/t0", "", "x" * 300][int(rng.integers(3))])  # foreign trial
    if choice == 3:
        return rehead(good, schema=SCHEMA_VERSION + 1)
    if choice == 4:
        return rehead(good, kind="pickle")
    if choice == 5:
        return [*good, b"extra"]
    if choice == 6 and len(good) > 1:
        return good[:-1]  # a frame missing
    return [msgpack.packb([1, 2, 3]), *good[1:]]


def fits_not(rng: np.random.Generator, kind: str, trial: str, meta: dict) -> list[bytes]:
    """A well-formed message of the right kind and trial whose tree the worker must refuse."""
    trees = [{"obs": np.zeros((3, 7), np.float32)}, {"obs": np.zeros((2, 4), np.float64)}, [np.zeros(3)],
             {"nope": 1}, None, {"obs": "text"}]
    return [bytes(f) for f in encode(kind, trial, trees[int(rng.integers(len(trees)))], version=0, meta=meta)]


def blast(sock: zmq.Socket, make: Callable[[int], list[bytes]], pace_every: int = 0) -> None:
    for i in range(N_BAD):
        sock.send_multipart(make(i))
        if pace_every and i % pace_every == pace_every - 1:
            time.sleep(0.02)  # PUB drops at its high-water mark: let the subscriber keep up


def curve(sock: zmq.Socket, keys: KeyRing | None, me: str, server: str | None = None) -> zmq.Socket:
    """Give a raw socket ``me``'s key pair: as a server (``server`` None) or a client pinning ``server``."""
    if keys is not None:
        sock.curve_secretkey = keys.secret(me)
        if server is None:
            sock.curve_server = True
        else:
            sock.curve_publickey, sock.curve_serverkey = keys.public(me), keys.public(server)
    return sock


@pytest.mark.parametrize("auth_mode", ["off", "on"])
def test_fuzzed_sockets_drop_and_count_and_the_run_completes(tmp_path, monkeypatch, auth_mode):
    cfg = apply_overrides(load_file(CONFIG), [
        f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines", "trial=fuzz",
        "algo.num_steps=32", "trainer.num_minibatches=2", "trainer.update_epochs=1", f"total_env_steps={8 * 32 * 25}",
        f"layout.auth={auth_mode}",
    ])
    trial = trial_name(cfg)
    names = MemoryNames()
    keys = KeyRing.generate(auth.identities(cfg)) if auth_mode == "on" else None
    ctx = zmq.Context()
    # XPUB: a PUB that hears its subscribers, so the blast waits for the policy worker's subscription
    rogue = curve(ctx.socket(zmq.XPUB), keys, TRAINER)  # with auth on, subscribers only follow the trainer's key
    rogue.setsockopt(zmq.SNDHWM, 10_000)
    rogue_address = f"tcp://127.0.0.1:{rogue.bind_to_random_port('tcp://127.0.0.1')}"
    original_follower = ParamsFollower.__init__

    def follow_the_rogue_too(self, trial, addresses, *args, **kwargs):  # as if it were a second trainer
        original_follower(self, trial, [*addresses, rogue_address], *args, **kwargs)

    monkeypatch.setattr(ParamsFollower, "__init__", follow_the_rogue_too)
    rng = np.random.default_rng(7)
    done = threading.Event()
    done_at: list[float] = []
    original_cut = SegmentSource.cut

    def last_update_after_the_fuzz(self):  # on a loaded machine the run could end before the blasts are read
        trainer = self.worker
        last = trainer.learner.version + (trainer.running is not None) + 1 >= trainer.cfg.num_updates
        if last and not (done_at and time.monotonic() - done_at[0] > 2.0):
            return None
        return original_cut(self)

    monkeypatch.setattr(SegmentSource, "cut", last_update_after_the_fuzz)
    errors: list[BaseException] = []

    def fuzz() -> None:
        try:
            control = names.wait(f"{cfg.name}/{cfg.trial}/{CONTROLLER}/0", timeout=120)
            inference = names.wait(stream_key(cfg, "policy", 0, "inference"), timeout=120)
            samples = names.wait(stream_key(cfg, "trainer", 0, "samples"), timeout=120)
            good = {
                "control": [bytes(f) for f in encode("heartbeat", trial, None,
                                                    meta={"worker": "stranger/0", "payload": {"state": "running"}})],
                "inference": [bytes(f) for f in encode("infer_req", trial, {"obs": np.zeros((2, 4), np.float32)},
                                                      meta={"rid": 1})],
                "samples": [bytes(f) for f in encode("sample", trial, {"x": np.zeros(5, np.float32)})],
                "params": [bytes(f) for f in encode("params", trial, [np.zeros(3, np.float32)], version=10**9)],
            }
            time.sleep(1.0)  # the subscriber connects during the policy worker's setup
            for name, address, kind, meta, server in [("control", control, zmq.DEALER, None, CONTROLLER),
                                                      ("inference", inference, zmq.DEALER, {"rid": 5}, POLICY),
                                                      ("samples", samples, zmq.PUSH, {}, TRAINER)]:
                sock = curve(ctx.socket(kind), keys, "actor", server)
                sock.connect(address)
                if meta is None:  # control: only codec garbage; a well-formed message from a stranger is ignored
                    blast(sock, lambda i, g=good[name]: codec_garbage(rng, g))
                else:
                    kind_name = "infer_req" if name == "inference" else "sample"
                    blast(sock, lambda i, g=good[name], k=kind_name, m=meta:
                          codec_garbage(rng, g) if i % 2 else fits_not(rng, k, trial, m))
                sock.close(linger=5000)
            assert rogue.poll(120_000), "the policy worker never subscribed to the rogue publisher"
            rogue.recv()
            blast(rogue, lambda i: codec_garbage(rng, good["params"]), pace_every=25)
        except BaseException as err:  # surfaced by the assertion below
            errors.append(err)
        finally:
            done_at.append(time.monotonic())
            done.set()

    fuzzer = threading.Thread(target=fuzz, daemon=True)
    fuzzer.start()
    result = run_threads(cfg, names=names, keys=keys)
    fuzzer.join(timeout=30)
    rogue.close(linger=0)
    ctx.term()
    assert not errors, errors
    assert done.is_set()
    assert result.exit_code == 0 and result.reason == "done", result.message

    def dropped(counters: dict, prefix: str, invalid: str = "") -> int:
        return sum(v for k, v in counters.items() if k.startswith(prefix + "drop.")) + counters.get(invalid, 0)

    controller = result.controller_counters
    assert dropped(controller, "") == N_BAD, controller
    policy = result.worker_metrics("policy", 0)[-1]
    assert dropped(policy, "inference/", "requests_invalid") == N_BAD, policy
    assert dropped(policy, "params/", "params_invalid") == N_BAD, policy
    trainer = result.worker_metrics("trainer", 0)[-1]
    assert dropped(trainer, "samples/", "samples_invalid") == N_BAD, trainer
    assert trainer["updates"] == cfg.num_updates
