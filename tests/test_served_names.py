"""Names served by the controller (``layout.names=controller``, ``srljax/comm/served_names.py``).

The served resolver keeps the ``NameResolver`` contract of the folder and memory backends; only the
controller's address is read from the folder; the controller answers ``names`` on its control
socket (CURVE and the sender check included); a request nobody answers is named with the fix.
Whole trials with it, threads and processes: ``-m slow`` below.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from srljax.comm import ControlClient
from srljax.comm.names import MemoryNames, NameExists, NameNotFound, worker_key
from srljax.comm.served_names import NameServiceError, ServedNames, answer
from srljax.system.shell import auth
from srljax.system.shell.common import stream_key, trial_name
from srljax.system.shell.controller import Controller
from srljax.system.shell.names_service import worker_names
from srljax.system.shell.worker import Worker
from srljax.types import EnvSpec
from tests.test_system_threads import check_finished, small_config

SPEC = EnvSpec("CartPole-v1", (4,), "float32", "discrete", num_actions=2, num_envs=4, batch_size=4)
ROOT = Path(__file__).resolve().parents[1]
CONTROLLER_KEY = "exp/t0/controller/0"


def test_served_names_keep_the_resolver_contract() -> None:
    store, boot = MemoryNames(), MemoryNames()
    asked: list[str] = []

    def ask(request: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        asked.append(request["op"])
        return answer(store, {**request, "id": 1})

    names = ServedNames(boot, direct={CONTROLLER_KEY}, ask=ask)
    names.add(CONTROLLER_KEY, "tcp://127.0.0.1:5")  # the one name read from the folder: needed before asking
    assert boot.get(CONTROLLER_KEY) == names.get(CONTROLLER_KEY) == "tcp://127.0.0.1:5" and not asked
    names.add("exp/t0/actor/0", "tcp://127.0.0.1:1")
    names.add("exp/t0/actor/1", "tcp://127.0.0.1:2")
    names.add("exp/t1/actor/0", "tcp://127.0.0.1:9")
    assert store.get("exp/t0/actor/1") == "tcp://127.0.0.1:2" and set(boot.list("")) == {CONTROLLER_KEY}
    assert names.get("exp/t0/actor/0") == "tcp://127.0.0.1:1"
    assert names.list("exp/t0/actor/") == {"exp/t0/actor/0": "tcp://127.0.0.1:1", "exp/t0/actor/1": "tcp://127.0.0.1:2"}
    with pytest.raises(NameExists):
        names.add("exp/t0/actor/0", "x", replace=False)
    names.delete("exp/t0/actor/0")
    with pytest.raises(NameNotFound):
        names.get("exp/t0/actor/0")
    with pytest.raises(ValueError):
        names.add("exp//bad", "v")
    names.clear("exp/t0/actor/")
    assert names.list("exp/") == {"exp/t1/actor/0": "tcp://127.0.0.1:9"}
    names.add("exp/t0/short/0", "v", ttl=0.2)
    time.sleep(0.3)
    with pytest.raises(NameNotFound):
        names.get("exp/t0/short/0")
    timer = threading.Timer(0.2, store.add, args=("exp/t0/trainer/0", "tcp://h:5"))
    timer.start()
    try:
        assert names.wait("exp/t0/trainer/0", timeout=5) == "tcp://h:5"
    finally:
        timer.join()


@pytest.mark.parametrize("request_, detail", [
    ({"op": "drop_table"}, "unknown op"), ({"op": "get", "key": 3}, "bad name key"),
    ({"op": "add", "key": "a/b", "value": "v", "ttl": -1}, "ttl >= 0"), ({"op": "add", "key": "a//b", "value": "v"}, "bad name key"),
    ({"op": "list", "prefix": None}, "str prefix"),
])
def test_a_malformed_request_gets_a_refusal_not_an_exception(request_: dict[str, Any], detail: str) -> None:
    reply = answer(MemoryNames(), {**request_, "id": 4})
    assert reply["id"] == 4 and reply["ok"] is False and reply["error"] == "bad_request" and detail in reply["detail"]


def test_a_resolver_outside_a_worker_or_unanswered_says_why(tmp_path: Path) -> None:
    cfg = small_config(tmp_path, "layout.names=controller")
    names = worker_names(cfg, MemoryNames())
    with pytest.raises(NameServiceError, match="control channel: use the resolver of a Worker"):
        names.get("exp/t0/actor/0")
    worker = Worker(cfg, 0, names)  # never run: nobody carries its requests
    began = time.monotonic()
    with pytest.raises(NameServiceError, match=r"worker/0: the controller did not answer names get 'x/y' within 0.2 s"):
        worker.ask_controller({"op": "get", "key": "x/y"}, 0.2)
    assert time.monotonic() - began < 2.0 and not worker._asked
    worker.ctx.close()


def test_the_controller_answers_names_on_its_control_socket(tmp_path: Path) -> None:
    cfg = auth.resolved(small_config(tmp_path, "layout.names=controller", "layout.auth=on"), slurm=False)
    keys = auth.prepare(cfg)
    boot = MemoryNames()  # the backend's: memory for threads, the run folder for processes and Slurm
    ctl = Controller(cfg, boot, spec=SPEC, keys=keys, verbose=False)
    actor_ctx = auth.worker_context(cfg, keys, "actor")
    me = worker_key(cfg.name, cfg.trial, "actor", 0)
    client = ControlClient(ctl.server.address, trial_name(cfg), me, ctx=actor_ctx)
    try:
        assert set(boot.list("")) == {worker_key(cfg.name, cfg.trial, "controller", 0)}  # one entry, any trial size
        assert client.send("register", {"pid": 1, "incarnation": "a"}, timeout_ms=5000)
        metrics = stream_key(cfg, "actor", 0, "prometheus")
        replies = []
        for request in ({"op": "add", "key": metrics, "value": "127.0.0.1:9100"}, {"op": "get", "key": metrics},
                        {"op": "list", "prefix": f"{cfg.name}/{cfg.trial}/actor/"}):
            assert client.send("names", {**request, "id": len(replies), "incarnation": "a"})
            deadline = time.monotonic() + 10
            while (reply := client.recv(timeout_ms=0)) is None and time.monotonic() < deadline:
                ctl._tick(50)
            assert reply is not None and reply.kind == "names_reply", reply
            replies.append(reply.payload)
        assert [r["id"] for r in replies] == [0, 1, 2] and all(r["ok"] for r in replies)
        assert replies[1]["value"] == "127.0.0.1:9100" and replies[2]["entries"] == {metrics: "127.0.0.1:9100"}
        assert ctl.name_store is not None and set(boot.list("")) == {worker_key(cfg.name, cfg.trial, "controller", 0)}
        assert worker_names(small_config(tmp_path), boot) is boot  # layout.names=folder: the backend's own
    finally:
        client.close()
        ctl.close()
        actor_ctx.close()


@pytest.mark.slow
def test_a_threads_trial_with_served_names_and_auth_completes(tmp_path: Path) -> None:
    from launch.threads import run_threads

    cfg = small_config(tmp_path, "layout.names=controller", "layout.auth=on")
    result = run_threads(cfg)
    check_finished(result, cfg)


@pytest.mark.slow
def test_a_processes_trial_with_served_names_completes(tmp_path: Path) -> None:
    """``launch.local``: every worker process reads one folder entry; the rest goes to the controller."""
    out = subprocess.run([sys.executable, "-m", "launch.local", "configs/cartpole_ppo_distributed.py", "-f", "served",
                          f"log.run_root={tmp_path}", "log.wandb=disabled", "algo.num_steps=32",
                          "trainer.num_minibatches=2", "trainer.update_epochs=1", f"total_env_steps={2 * 4 * 32 * 4}",
                          "layout.names=controller"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "finished: done" in out.stdout + out.stderr
    folders = list(tmp_path.glob("*/served/names"))
    # with layout.names=folder every worker leaves its metrics and stream addresses here; served, none did
    assert len(folders) == 1 and list(folders[0].iterdir()) == []
