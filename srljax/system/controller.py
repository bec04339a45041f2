"""Controller: registers every worker of a layout, configures and starts them, watches, ends the trial.

    controller = Controller(cfg, names, exited=backend_exit_codes, log_tail=backend_log_tail)
    result = controller.run()          # TrialResult(exit_code, reason, message)

1. binds a ControlServer and registers it as ``<exp>/<trial>/controller/0``;
2. waits until every worker of ``build_layout(cfg)`` has said ``register`` (pid, role);
3. sends ``configure`` group by group in dependency order (trainer, buffer, policy, actor:
   servers bind and register before their clients look them up), each group waiting for
   ``status ready``; then ``start`` to all;
4. watches: the trainer's ``done`` ends the trial with exit code 0, so does ``timeout_seconds``;
   a worker that reports an error, whose process ended (``exited``, from the backend) or that
   sent no heartbeat for ``layout.heartbeat_timeout_seconds`` ends it with exit code 1 and a
   message naming the worker, its pid and its last log lines;
5. sends ``stop`` (actors first, trainer last) and waits for each worker to report ``stopped``.

Control messages only ever travel on the ROUTER/DEALER control channel: never on PUB, which
drops silently at its high-water mark.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq

from srljax.comm import ControlServer, NameResolver, worker_key
from srljax.config import Experiment
from srljax.layout import CONFIGURE_ORDER, Layout, build_layout
from srljax.system.common import CONTROLLER, bind_address, trial_name

REGISTER_TIMEOUT_S = 300.0  # imports and jax start-up of many processes on few cores
CONFIGURE_TIMEOUT_S = 600.0  # envpool (Atari ROM load), network init
STARTUP_SILENCE_S = 30.0  # heartbeat silence allowed before the trial starts
STOP_GRACE_S = 30.0  # the trainer writes its final checkpoint while stopping


@dataclass(frozen=True)
class TrialResult:
    exit_code: int  # 0: done or timeout; 1: a worker failed or was lost; 130: interrupted
    reason: str  # done | timeout | lost | error | startup | interrupted
    message: str


class TrialEnded(Exception):
    def __init__(self, result: TrialResult):
        super().__init__(result.message)
        self.result = result


class Controller:
    def __init__(self, cfg: Experiment, names: NameResolver, layout: Layout | None = None, *,
                 ctx: zmq.Context | None = None, exited: Callable[[], dict[str, int]] | None = None,
                 log_tail: Callable[[str], str] | None = None, verbose: bool = True):
        self.cfg, self.names = cfg, names
        self.layout = layout or build_layout(cfg)
        self.server = ControlServer(bind_address(cfg), trial_name(cfg), ctx=ctx)
        names.add(worker_key(cfg.name, cfg.trial, CONTROLLER, 0), self.server.address)
        self.expected = {worker_key(cfg.name, cfg.trial, role, i): f"{role}/{i}" for role, i in self.layout.workers()}
        self.info: dict[str, dict[str, Any]] = {}  # worker key -> its register payload (pid, role, ...)
        self.states: dict[str, str] = {}
        self.beats: dict[str, dict[str, Any]] = {}  # worker key -> its last heartbeat
        self.done: dict[str, Any] | None = None
        self._exited = exited or (lambda: {})
        self._log_tail = log_tail or (lambda name: "")
        self._verbose = verbose
        self._lost_timeout = cfg.layout.heartbeat_timeout_seconds
        self._started = False
        self._last_tick = time.monotonic()
        self._silence_grace_until = 0.0

    def say(self, text: str) -> None:
        if self._verbose:
            print(f"[controller] {text}", flush=True)

    # -- the trial ----------------------------------------------------------------------------------
    def run(self) -> TrialResult:
        """Run the trial to its end; always stops the workers before returning."""
        try:
            result = self._run()
        except TrialEnded as ended:
            result = ended.result
        except KeyboardInterrupt:
            result = TrialResult(130, "interrupted", "interrupted (Ctrl-C or SIGTERM)")
        self.say(f"ending the trial: {result.message}")
        self.stop_all()
        return result

    def _run(self) -> TrialResult:
        self._wait_until(list(self.expected), lambda k: k in self.info, REGISTER_TIMEOUT_S, "register")
        self.say(f"all {len(self.expected)} workers registered: "
                 + ", ".join(f"{self.expected[k]} (pid {self.info[k].get('pid')})" for k in self.expected))
        for role in CONFIGURE_ORDER:
            group = [k for k in self.expected if self.expected[k].split("/")[0] == role]
            if group:
                self._send(group, "configure")
                self._wait_until(group, lambda k: self.states.get(k) == "ready", CONFIGURE_TIMEOUT_S, f"configure {role}")
        self._send(list(self.expected), "start")
        self._started = True
        self.say("all workers started")
        deadline = time.monotonic() + self.cfg.timeout_seconds
        while self.done is None:
            self._tick(100)
            if time.monotonic() > deadline:
                return TrialResult(0, "timeout", f"timeout_seconds={self.cfg.timeout_seconds:g} reached")
        return TrialResult(0, "done", f"done: {self.done}")

    def _wait_until(self, keys: list[str], ready: Callable[[str], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while missing := [k for k in keys if not ready(k)]:
            if time.monotonic() > deadline:
                raise TrialEnded(TrialResult(1, "startup", f"{what} did not finish within {timeout:g} s; waiting for: "
                                             + ", ".join(self.expected[k] for k in missing)))
            self._tick(100)

    def _send(self, keys: list[str], kind: str) -> None:
        for key in keys:
            if not self.server.send(key, kind):
                raise TrialEnded(self._lost(key, f"cannot deliver '{kind}' to it"))

    # -- one tick: messages in, liveness checks --------------------------------------------------------
    def _tick(self, timeout_ms: int) -> None:
        now = time.monotonic()
        if now - self._last_tick > 1.0:  # we were not scheduled: heartbeats may still be in the sockets
            self._silence_grace_until = now + 2.0
        self._last_tick = now
        for msg in self.server.poll(timeout_ms=timeout_ms):
            if msg.worker not in self.expected:
                self.server.counts["unknown_worker"] += 1  # e.g. a stale worker of an earlier run of this trial
                continue
            if msg.kind == "register":
                self.info[msg.worker] = msg.payload
            elif msg.kind in ("heartbeat", "status") and isinstance(msg.payload.get("state"), str):
                if msg.kind == "heartbeat":
                    self.beats[msg.worker] = msg.payload
                self.states[msg.worker] = msg.payload["state"]
                if msg.payload["state"] == "error":
                    raise TrialEnded(self._failed(msg.worker, str(msg.payload.get("error", ""))))
                if msg.payload["state"] == "stopped":  # nobody asked it to: a signal, its launcher gone
                    raise TrialEnded(self._lost(msg.worker, "it stopped on its own"))
            elif msg.kind == "done":
                self.done = msg.payload
        self._check_liveness()

    def _check_liveness(self) -> None:
        names = {name: key for key, name in self.expected.items()}
        for name, code in self._exited().items():
            key = names.get(name)
            if key is not None and self.states.get(key) not in ("stopped", "error"):
                raise TrialEnded(self._lost(key, f"its process exited with code {code}"))
        now = time.monotonic()
        if now < self._silence_grace_until:
            return
        # before start a worker may be deep in setup on a crowded machine; a crash is still seen
        # at once through ``exited``, a hang through the configure timeout
        allowed = self._lost_timeout if self._started else max(self._lost_timeout, STARTUP_SILENCE_S)
        for key in self.info:
            silent = now - self.server.last_seen.get(key, now)
            if silent > allowed and self.states.get(key) not in ("stopped", "error"):
                raise TrialEnded(self._lost(key, f"no heartbeat for {silent:.1f} s "
                                                 f"(allowed {allowed:g} s; "
                                                 f"last heartbeat: {self.beats.get(key)})"))

    def _who(self, key: str) -> str:
        return f"worker {self.expected[key]} (pid {self.info.get(key, {}).get('pid', '?')})"

    def _with_log(self, key: str, text: str) -> str:
        tail = self._log_tail(self.expected[key]).rstrip()
        return text + (f"; last log lines:\n{tail}" if tail else "")

    def _lost(self, key: str, why: str) -> TrialResult:
        self.states[key] = "lost"
        return TrialResult(1, "lost", self._with_log(key, f"{self._who(key)} lost: {why}"))

    def _failed(self, key: str, error: str) -> TrialResult:
        return TrialResult(1, "error", f"{self._who(key)} failed:\n{error.rstrip()}")

    # -- stopping ----------------------------------------------------------------------------------------
    def stop_all(self, grace_s: float = STOP_GRACE_S) -> list[str]:
        """Send ``stop`` to every live worker, actors first; return the names that did not stop in time."""
        order = [k for role in reversed(CONFIGURE_ORDER) for k in self.expected if self.expected[k].startswith(role + "/")]
        live = [k for k in order if self.states.get(k) not in ("lost", "stopped", "error") and k in self.info]
        for key in live:
            self.server.send(key, "stop")
        deadline = time.monotonic() + grace_s
        exited = set()
        while time.monotonic() < deadline:
            exited = set(self._exited())
            waiting = [k for k in live if self.states.get(k) not in ("stopped", "error") and self.expected[k] not in exited]
            if not waiting:
                break
            try:
                for msg in self.server.poll(timeout_ms=100):
                    if msg.worker in self.expected and msg.kind in ("status", "heartbeat"):
                        state = msg.payload.get("state")
                        if isinstance(state, str) and self.states.get(msg.worker) != "stopped":
                            self.states[msg.worker] = state
            except KeyboardInterrupt:
                break  # a second Ctrl-C: give up waiting, the backend kills what is left
        late = [self.expected[k] for k in live if self.states.get(k) not in ("stopped", "error")
                and self.expected[k] not in exited]
        if late:
            self.say(f"did not stop within {grace_s:g} s: {', '.join(late)}")
        return late

    def close(self) -> None:
        self.names.delete(worker_key(self.cfg.name, self.cfg.trial, CONTROLLER, 0))
        self.server.close()
