"""CURVE authentication and receive bounds (``srljax/comm/security.py``, ``srljax/system/shell/auth.py``).

Every socket type refuses (and counts) a client holding another trial's keys or none; only the
trainer's key can serve params and only the controller's can command; a worker's messages must
come from its role's key; an oversized frame costs the sender its connection before the receiver
allocates it; a params version from the future does not freeze a follower; NaN samples are refused.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import zmq

from srljax.comm import (
    ControlClient,
    ControlServer,
    InferenceClient,
    InferenceServer,
    ParamsPublisher,
    ParamsSubscriber,
    SampleReceiver,
    SampleSender,
)
from srljax.comm.codec import PACK_ALIGN, PACK_MAX_PARTS
from srljax.comm.security import MIN_HWM, AuthError, KeyRing, WireContext, WireRules
from srljax.config import apply_overrides, load_file
from srljax.system.shell import auth
from srljax.system.shell.common import checked_trajectory
from srljax.system.training import params
from srljax.system.training.params import ParamsFollower
from srljax.telemetry.stats import WorkerStats
from srljax.types import EnvSpec, Trajectory

TRIAL = "exp/t0"
IDENTITIES = ["controller", "trainer", "actor", "policy"]
PINNED = {"control": "controller", "params": "trainer"}
CONFIG = Path(__file__).resolve().parents[1] / "configs" / "cartpole_ppo_distributed.py"


@pytest.fixture
def keys() -> KeyRing:
    return KeyRing.generate(IDENTITIES)


@pytest.fixture
def contexts() -> Iterator[Callable[..., WireContext]]:
    made: list[WireContext] = []

    def make(keys: KeyRing | None, identity: str, **rules: Any) -> WireContext:
        made.append(WireContext(WireRules(keys=keys, identity=identity, pinned=dict(PINNED), **rules)))
        return made[-1]

    yield make
    for ctx in made:
        ctx.close()


def _until(check: Callable[[], bool], timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_keys_are_owner_only_on_disk_and_an_open_folder_is_refused(tmp_path: Path, keys: KeyRing) -> None:
    folder = keys.write(tmp_path / "keys")
    assert folder.stat().st_mode & 0o777 == 0o700
    assert {p.name for p in folder.iterdir()} == {f"{n}.key{s}" for n in IDENTITIES for s in ("", "_secret")}
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in folder.iterdir())
    assert KeyRing.load(folder) == keys
    (folder / "actor.key_secret").chmod(0o644)
    with pytest.raises(AuthError, match="readable by others.*chmod -R go-rwx"):
        KeyRing.load(folder)
    with pytest.raises(AuthError, match="no key folder"):
        KeyRing.load(tmp_path / "missing")


def test_auth_values_by_backend() -> None:
    cfg = load_file(CONFIG)
    assert cfg.layout.auth == "auto"
    assert auth.auth_on(cfg, slurm=False) and auth.auth_on(cfg, slurm=True)  # closed by default, loopback too
    assert auth.resolved(cfg, slurm=False).layout.auth == "on"
    assert not auth.auth_on(apply_overrides(cfg, ["layout.auth=off"]), slurm=False)
    assert not auth.auth_on(apply_overrides(cfg, ["layout.auth=off"]), slurm=True)
    assert auth.resolved(cfg, slurm=True).layout.auth == "on"
    assert auth.identities(cfg) == ["controller", "trainer", "policy", "actor", "relay"]


# -- every socket type: a client with foreign keys, or none, is refused and counted ---------------------
def _server_and_client(kind: str, ctx: zmq.Context, cctx: zmq.Context) -> tuple[Any, Any, Callable[[], Any]]:
    """(server endpoint, connected client endpoint, send one message and return what the server got)."""
    if kind == "control":
        server = ControlServer("tcp://127.0.0.1:*", TRIAL, ctx=ctx)
        client = ControlClient(server.address, TRIAL, "exp/t0/actor/0", ctx=cctx)
        return server, client, lambda: (client.send("heartbeat", {"n": 1}, timeout_ms=0), server.poll(100))[1]
    if kind == "samples":
        server = SampleReceiver("tcp://127.0.0.1:*", TRIAL, ctx=ctx)
        cctx.rules.peer_roles[server.address] = ctx.rules.identity
        client = SampleSender(server.address, TRIAL, ctx=cctx)
        return server, client, lambda: (client.send({"x": np.ones(3)}, timeout_ms=0), server.recv(100))[1]
    if kind == "inference":
        server = InferenceServer("tcp://127.0.0.1:*", TRIAL, ctx=ctx)
        cctx.rules.peer_roles[server.address] = ctx.rules.identity
        client = InferenceClient(server.address, TRIAL, ctx=cctx)
        return server, client, lambda: (client.send(1, {"obs": np.ones(3)}, timeout_ms=0), server.poll_requests(100))[1]
    server = ParamsPublisher("tcp://127.0.0.1:*", TRIAL, ctx=ctx)  # params: the subscriber is the client
    client = ParamsSubscriber(server.address, TRIAL, ctx=cctx)
    return server, client, lambda: (server.publish(3, [np.ones(3)]), client.poll_newest(100))[1]


SERVERS = {"control": "controller", "samples": "trainer", "inference": "policy", "params": "trainer"}


@pytest.mark.parametrize("kind", list(SERVERS))
def test_a_client_of_another_trial_is_refused_and_counted(kind: str, keys: KeyRing, contexts) -> None:
    server_ctx = contexts(keys, SERVERS[kind])
    foreign = KeyRing.generate(IDENTITIES)  # another trial: same identities, other keys
    # the foreign client knows our server's public key (it is in our run folder): the ZAP handler still says no
    foreign = KeyRing({**foreign.pairs, SERVERS[kind]: (keys.public(SERVERS[kind]), None)})
    server, client, exchange = _server_and_client(kind, server_ctx, contexts(foreign, "actor"))
    for _ in range(3):
        assert not exchange(), f"{kind}: a foreign client got through"
    assert _until(lambda: server.counters().get("auth_refused", 0) >= 1), server.counters()
    assert _until(lambda: client.counters().get("auth_refused", 0) >= 1), client.counters()
    assert server_ctx.zap.refused[kind] >= 1 and not server_ctx.zap.admitted[kind]

    # and the same exchange between two holders of this trial's keys works
    server2, client2, exchange2 = _server_and_client(kind, server_ctx, contexts(keys, "actor"))
    assert _until(lambda: bool(exchange2())), f"{kind}: a client with the trial's keys was not let in"
    assert server_ctx.zap.admitted[kind] >= 1
    for endpoint in (server, client, server2, client2):
        endpoint.close()


@pytest.mark.parametrize("kind", list(SERVERS))
def test_a_client_without_keys_is_refused(kind: str, keys: KeyRing, contexts) -> None:
    server, client, exchange = _server_and_client(kind, contexts(keys, SERVERS[kind]), contexts(None, "actor"))
    for _ in range(3):
        assert not exchange(), f"{kind}: a plain (NULL) client got through"
    assert _until(lambda: server.counters().get("handshake_failed", 0) >= 1), server.counters()
    server.close()
    client.close()


def test_only_the_trainer_key_can_serve_params(keys: KeyRing, contexts) -> None:
    follower_ctx = contexts(keys, "policy")
    sub = ParamsSubscriber(None, TRIAL, ctx=follower_ctx)
    impostor = ParamsPublisher("tcp://127.0.0.1:*", TRIAL, ctx=contexts(keys, "actor"))  # a trial member, not the trainer
    sub.connect(impostor.address)
    for _ in range(20):
        impostor.publish(7, [np.zeros(3)])
        assert sub.poll_newest(50) is None
    assert _until(lambda: sub.counters().get("handshake_failed", 0) >= 1), sub.counters()
    trainer = ParamsPublisher("tcp://127.0.0.1:*", TRIAL, ctx=contexts(keys, "trainer"))
    sub.connect(trainer.address)
    assert _until(lambda: (trainer.publish(8, [np.zeros(3)]), sub.poll_newest(50))[1] is not None)
    for endpoint in (sub, impostor, trainer):
        endpoint.close()


def test_only_the_controller_key_can_command_and_roles_cannot_speak_for_each_other(keys: KeyRing, contexts) -> None:
    rogue = ControlServer("tcp://127.0.0.1:*", TRIAL, ctx=contexts(keys, "trainer"))  # not the controller's key
    worker = ControlClient(rogue.address, TRIAL, "exp/t0/actor/0", ctx=contexts(keys, "actor"))
    worker.send("register", {}, timeout_ms=0)
    assert not rogue.poll(500)
    assert _until(lambda: worker.counters().get("handshake_failed", 0) >= 1), worker.counters()

    controller = ControlServer("tcp://127.0.0.1:*", TRIAL, ctx=contexts(keys, "controller"))
    actor = ControlClient(controller.address, TRIAL, "exp/t0/actor/0", ctx=contexts(keys, "actor"))
    liar = ControlClient(controller.address, TRIAL, "exp/t0/trainer/0", ctx=contexts(keys, "actor"))
    liar.send("done", {"env_steps": 1})
    actor.send("heartbeat", {"state": "running"})
    got: list[Any] = []
    assert _until(lambda: bool(got.extend(controller.poll(50))) or len(got) >= 1)
    time.sleep(0.2)
    got += controller.poll(100)
    assert [(m.kind, m.worker) for m in got] == [("heartbeat", "exp/t0/actor/0")]
    assert controller.counters()["drop.sender"] == 1
    for endpoint in (rogue, worker, controller, actor, liar):
        endpoint.close()


# -- bounds ----------------------------------------------------------------------------------------------
def _zmtp_null_push(port: int) -> socket.socket:
    """A raw TCP peer speaking ZMTP 3.0 (NULL mechanism) as a PUSH socket, greeting and READY done."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    raw.sendall(b"\xff" + b"\x00" * 8 + b"\x7f" + b"\x03\x00" + b"NULL".ljust(20, b"\x00") + b"\x00" + b"\x00" * 31)
    ready = b"\x05READY" + b"\x0bSocket-Type" + struct.pack(">I", 4) + b"PUSH"
    raw.sendall(b"\x04" + bytes([len(ready)]) + ready)
    return raw


def _closed_by_peer(raw: socket.socket, within_s: float) -> bool:
    raw.settimeout(within_s)
    try:
        while True:
            data = raw.recv(4096)  # the receiver's greeting and READY, then (if it hangs up) b""
            if not data:
                return True
    except (TimeoutError, socket.timeout):
        return False
    except ConnectionResetError:
        return True


@pytest.mark.parametrize("bounded", [True, False])
def test_an_oversized_frame_is_refused_at_its_header(bounded: bool, contexts) -> None:
    """The peer announces a 1 GiB frame and sends none of it: a bounded receiver hangs up at once (it
    never allocates the frame); an unbounded one waits for the bytes. Then a good sender still gets through."""
    ctx = contexts(None, "trainer", limits={"samples": 1 << 20})
    rx = SampleReceiver("tcp://127.0.0.1:*", TRIAL, ctx=ctx, max_bytes=None if bounded else -1)
    assert rx.sock.getsockopt(zmq.MAXMSGSIZE) == (1 << 20 if bounded else -1)
    raw = _zmtp_null_push(int(rx.address.rsplit(":", 1)[1]))
    raw.sendall(b"\x02" + struct.pack(">Q", 1 << 30))  # a long message frame's header: flags, 8-byte size
    assert _closed_by_peer(raw, 1.0) is bounded
    raw.close()
    tx = SampleSender(rx.address, TRIAL, ctx=contexts(None, "actor"))
    tx.send({"x": np.ones(4)}, timeout_ms=2000)
    assert rx.recv(2000) is not None
    tx.close()
    rx.close()


def test_receive_limits_come_from_the_spec_and_the_queue_is_bounded_in_bytes(contexts) -> None:
    ctx = contexts(None, "policy", limits={"requests": 8 << 20, "control": 256 << 10}, queue_bytes=64 << 20)
    server = InferenceServer("tcp://127.0.0.1:*", TRIAL, ctx=ctx)
    # a one-frame stream (codec.pack): the frame is the whole message, its bound the message's (4 frame bounds
    # here) plus the part table; the queue holds 64 MiB of such messages, not the 1,000 asked for
    frame = (4 * 8 << 20) + PACK_MAX_PARTS * (8 + PACK_ALIGN) + 4
    assert server.max_message == 4 * 8 << 20 and server.sock.getsockopt(zmq.MAXMSGSIZE) == frame
    assert server.sock.getsockopt(zmq.RCVHWM) == max(MIN_HWM, (64 << 20) // frame)
    samples = SampleReceiver("tcp://127.0.0.1:*", TRIAL, ctx=contexts(None, "trainer", limits={"samples": 8 << 20}))
    assert samples.sock.getsockopt(zmq.MAXMSGSIZE) == 8 << 20  # a multipart stream: the frame bound
    samples.close()
    control = ControlServer("tcp://127.0.0.1:*", TRIAL, ctx=ctx)
    assert control.sock.getsockopt(zmq.MAXMSGSIZE) == 256 << 10
    server.close()
    control.close()

    from srljax.system.shell.bounds import FLOOR, HEADROOM, stream_limits

    cfg = apply_overrides(load_file(CONFIG), ["algo.num_steps=128"])  # 2 actors x 4 envs, batch 8 columns
    spec = EnvSpec("Pong", (4, 84, 84), "uint8", "discrete", num_actions=6, num_envs=4)
    limits = stream_limits(cfg, spec, {"logp": ((), "float32"), "lstm_c": ((256,), "float32")})
    assert limits["samples"] == FLOOR + HEADROOM * 129 * 8 * 4 * 84 * 84  # the obs leaf of a batch-wide segment
    assert limits["requests"] == FLOOR + HEADROOM * 4 * 4 * 84 * 84
    assert limits["replies"] == FLOOR + HEADROOM * 4 * (4 + 8 + 4 + 1024)


# -- poisoned contents ---------------------------------------------------------------------------------
class _Algo:
    """Just enough of an algorithm for ParamsCodec: one [3] float32 leaf."""

    def init(self, key: Any) -> dict[str, Any]:
        return {"w": np.zeros(3, np.float32)}

    def policy_params(self, state: Any) -> Any:
        return state


def test_a_params_version_from_the_future_does_not_freeze_a_follower(keys: KeyRing, contexts, monkeypatch) -> None:
    monkeypatch.setattr(params, "FOLLOW_DOWN_S", 0.3)
    trainer = ParamsPublisher("tcp://127.0.0.1:*", TRIAL, ctx=contexts(keys, "trainer"), hwm=1000)
    stats = WorkerStats()
    follower = ParamsFollower(TRIAL, [trainer.address], params.ParamsCodec(_Algo()), stats,
                              contexts(keys, "policy", max_params_version=100))
    w = [np.ones(3, np.float32)]

    def publish_until(version: int, accepted: Callable[[], bool]) -> bool:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            trainer.publish(version, w)
            follower.poll(timeout_ms=50)
            if accepted():
                return True
        return False

    assert publish_until(3, lambda: follower.version == 3)
    for n, huge in enumerate((2**62, 101, -5), 1):  # beyond the trial's last update, or negative: refused, counted
        trainer.publish(huge, w)
        assert _until(lambda: (follower.poll(timeout_ms=20), follower.sub.counters()["drop.version"] == n)[1])
        assert follower.version == 3
    assert publish_until(4, lambda: follower.version == 4)  # the next real version is taken
    assert follower.sub.counters()["drop.version"] == 3
    # an in-range version that was not the trainer's (or a restarted trainer): followed back down
    assert publish_until(90, lambda: follower.version == 90)
    assert publish_until(5, lambda: follower.version == 5)
    assert stats.counters["params_version_reset"] == 1
    follower.close()
    trainer.close()


def test_non_finite_or_misshapen_samples_are_refused() -> None:
    spec = EnvSpec("CartPole-v1", (4,), "float32", "discrete", num_actions=2, num_envs=2)
    rows, b = 5, 2

    def traj(**change: Any) -> Trajectory:
        fields = dict(obs=np.zeros((rows, b, 4), np.float32), action=np.zeros((rows, b), np.int32),
                      reward=np.zeros((rows, b), np.float32), terminated=np.zeros((rows, b), bool),
                      truncated=np.zeros((rows, b), bool), extras={"logp": np.zeros((rows, b), np.float32)},
                      policy_version=np.zeros(b, np.int32))
        return Trajectory(**{**fields, **change})

    extras = {"logp": ((), "float32")}
    checked_trajectory(traj(), spec, rows - 1, extras)
    nan_obs = np.zeros((rows, b, 4), np.float32)
    nan_obs[2, 1, 3] = np.nan
    for bad, match in [({"obs": nan_obs}, "obs holds NaN"),
                       ({"reward": np.full((rows, b), np.inf, np.float32)}, "reward holds NaN"),
                       ({"extras": {"logp": np.full((rows, b), np.nan, np.float32)}}, "logp holds NaN"),
                       ({"obs": np.zeros((rows, b, 4), np.float64)}, "obs is float64"),
                       ({"action": np.zeros((rows + 1, b), np.int32)}, "action is int32")]:
        with pytest.raises(ValueError, match=match):
            checked_trajectory(traj(**bad), spec, rows - 1, extras)


def test_a_default_local_trial_is_closed_to_another_local_process(tmp_path: Path) -> None:
    """``layout.auth`` left at ``auto``, local processes: another local process that reads the run folder's
    names (but holds no keys) pushes well-formed forged segments (reward 1e4, episode return 99999) at the
    trainer and subscribes to the params: its handshakes fail, nothing reaches the trainer's checks, and the
    trial trains on its own actors' data only. The run folder is owner-only."""
    import json

    from algos.base import segment_extras_spec
    from algos.factory import make as make_algo
    from envs import make as make_env
    from srljax.comm import DirectoryNames
    from srljax.config import from_dict
    from srljax.learning.rollout import zeros_trajectory
    from srljax.system.shell.common import episode_meta, stream_key, trial_name
    from tests.test_system_processes import Launch

    run = Launch(tmp_path, "closed", f"total_env_steps={2 * 4 * 32 * 40}")
    ctx = zmq.Context()
    try:
        run.wait_for(r"all workers started", timeout=240)
        assert "sockets: CURVE" in run.output, run.output
        assert run.run_dir.stat().st_mode & 0o777 == 0o700
        cfg = from_dict(json.loads((run.run_dir / "config.json").read_text()))
        names = DirectoryNames(run.run_dir / "names")  # what any process that can list the folder reads
        env = make_env(cfg.env, seed=0)
        forged = zeros_trajectory(env.spec, cfg.algo.num_steps, segment_extras_spec(make_algo(cfg, env.spec)), 4)
        env.close()
        forged = forged._replace(reward=np.full_like(forged.reward, 1e4))
        sender = SampleSender(names.wait(stream_key(cfg, "trainer", 0, "samples"), timeout=30), trial_name(cfg), ctx=ctx)
        subscriber = ParamsSubscriber(names.wait(stream_key(cfg, "trainer", 0, "params"), timeout=30), trial_name(cfg),
                                      ctx=ctx)
        for _ in range(20):
            sender.send(forged, timeout_ms=0, meta=episode_meta([99999.0], [10]))
            time.sleep(0.05)
        assert subscriber.poll_newest(3000) is None  # params are published every second: none arrive here

        def trainer_counts() -> dict:  # its metrics line, written every 2 s while it runs
            lines = (run.run_dir / "workers" / "trainer-0.jsonl").read_text().splitlines()
            return json.loads(lines[-1]) if lines else {}

        assert _until(lambda: trainer_counts().get("samples/handshake_failed", 0) >= 1, 20.0), trainer_counts()
        assert run.wait(timeout=300) == 0, run.output
        records = [json.loads(line) for line in (run.run_dir / "metrics.jsonl").read_text().splitlines()]
        assert max(r.get("episode_return") or 0 for r in records) <= 500  # CartPole's cap: no forged episode
        assert trainer_counts().get("samples_invalid", 0) == 0  # refused at the handshake, never decoded
        for endpoint in (sender, subscriber):
            endpoint.close()
    finally:
        ctx.destroy(linger=0)
        if run.proc.poll() is None:
            run.proc.kill()
