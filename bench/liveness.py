"""Chaos harness for the data path (issue 22): real workers, random delays and kills, a grid of layouts.

    python bench/liveness.py --trials 200 --backend threads   # the grid, sampled; prints a table
    python bench/liveness.py --trials 200 --algo apex  # only the Ape-X draws of the same grid
    python bench/liveness.py --trials 5 --algo muzero  # the MuZero graph's draws: a buffer killed during reanalyse
    python bench/liveness.py --trials 10 --seed 3      # a sample (the default test run takes ~6, tests/test_liveness_chaos.py)
    python bench/liveness.py --one '{"algo": "ppo", "actors": 3, ...}'   # one trial, its JSON result on the last line

Each trial is its own process (a crashed or abandoned thread cannot leak into the next; an abort inside libzmq
ends only that trial, and is reported as its exit status). It runs a small CartPole trial with the threads
backend (``--backend threads``, the only one: the chaos is patched into the one process that holds every worker;
real workers, real ZeroMQ sockets, real envpool envs) drawn from
the grid: PPO (on-policy) or Ape-X DQN (replay, 1 or 4 updates per compiled call); actors 1-8; buffer workers 0-3 (replay: 1-3 shards);
``trainer.publish_every`` 1-4; ``trainer.max_policy_lag`` 1-8; inline or remote inference (1-2 policy
workers); ``layout.ring_size`` 1-2. Into every worker it injects:

* delays: each turn of a worker's loop sleeps up to ``--max-delay`` s with probability ``--p-delay``, and
  each send on any socket up to a tenth of that, with the same probability;
* kills: 0-2 workers of any role (trainer included) raise once, either in ``setup`` (start-up) or after a
  random number of loop turns; the controller restarts them (``layout.max_restarts``).

MuZero's graph has its own draws (``--algo muzero``; not part of the grid above, whose draws stay as they were):
actors 1-3 (inline or remote search, 1-2 policy workers), 1-2 buffer workers reanalysing half of each batch,
and always one buffer worker killed inside its reanalyse (its ``_reanalyse`` raises at its 2nd-8th batch), plus
0-1 kills of any role as above.

A trial passes when the launcher's result is ``done`` (exit 0) at its update count, ``metrics.jsonl`` has
every update exactly once and in order, and (on-policy) no trained column was older than
``trainer.max_policy_lag`` (the ``lag/max`` of every line). The table gives trials, passed, p50/p99 of the
time to the last update, the largest lag seen, restarts, and each failure's draw (rerun it with ``--one``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

UPDATES = {"ppo": 8, "apex": 20, "muzero": 16}  # per trial: enough updates for kills and version changes to matter
TRIAL_TIMEOUT_S = 420.0
TRIAL_TIMEOUT_S_OF = {"muzero": 1200.0}  # MuZero's trials compile three searches (actor or policy worker, buffer)


def draw(rng: random.Random, index: int) -> dict[str, Any]:
    """One point of the grid, with its chaos (seeded by ``index``)."""
    algo = "apex" if rng.random() < 0.25 else "ppo"
    actors = rng.randint(1, 8)
    trial: dict[str, Any] = {
        "index": index, "algo": algo, "actors": actors, "seed": rng.randrange(10**6),
        "buffers": min(actors, rng.randint(1, 3)) if algo == "apex" else rng.randint(0, 3),
        "publish_every": rng.randint(1, 4), "max_policy_lag": rng.randint(1, 8),
        "inference": "inline" if algo == "apex" else rng.choice(["inline", "remote"]),
        "policy_workers": rng.randint(1, 2), "ring_size": rng.randint(1, 2),
    }
    if trial["publish_every"] > trial["max_policy_lag"]:  # refused by validation: lag would exceed its bound
        trial["publish_every"] = trial["max_policy_lag"]
    roles = ["trainer", "actor"] + (["buffer"] if trial["buffers"] else []) + (
        ["policy"] if trial["inference"] == "remote" else [])
    counts = {"trainer": 1, "actor": actors, "buffer": trial["buffers"], "policy": trial["policy_workers"]}
    kills: dict[tuple[str, int], dict[str, Any]] = {}
    for _ in range(rng.choice([0, 1, 1, 2])):
        role = rng.choice(roles)
        index = rng.randrange(counts[role])
        kills[(role, index)] = {"role": role, "index": index,
                                "when": "setup" if rng.random() < 0.3 else rng.randint(5, 150)}
    trial["kills"] = list(kills.values())
    if algo == "apex":  # its own stream, so adding this draw left every earlier draw of a seed as it was
        trial["updates_per_call"] = random.Random(f"updates_per_call{index}").choice([1, 4])
    return trial


def draw_muzero(index: int) -> dict[str, Any]:
    """One draw of the MuZero graph (seeded by ``index`` on its own stream)."""
    rng = random.Random(f"muzero{index}")
    actors, buffers = rng.randint(1, 3), rng.randint(1, 2)
    trial: dict[str, Any] = {
        "index": index, "algo": "muzero", "actors": actors, "seed": rng.randrange(10**6), "buffers": buffers,
        "publish_every": 1, "max_policy_lag": 1000, "inference": rng.choice(["inline", "remote"]),
        "policy_workers": rng.randint(1, 2), "ring_size": 1,
    }
    victim = rng.randrange(buffers)
    kills = {("buffer", victim): {"role": "buffer", "index": victim, "when": "reanalyse", "at": rng.randint(2, 8)}}
    roles = ["trainer", "actor", "buffer"] + (["policy"] if trial["inference"] == "remote" else [])
    counts = {"trainer": 1, "actor": actors, "buffer": buffers, "policy": trial["policy_workers"]}
    for _ in range(rng.choice([0, 1])):
        role = rng.choice(roles)
        key = (role, rng.randrange(counts[role]))
        kills.setdefault(key, {"role": role, "index": key[1],
                               "when": "setup" if rng.random() < 0.3 else rng.randint(5, 150)})
    trial["kills"] = list(kills.values())
    return trial


def overrides(trial: dict[str, Any], run_root: str) -> tuple[str, list[str]]:
    """The config file and overrides of ``trial`` (CartPole, small updates)."""
    common = [f"log.run_root={run_root}", "log.wandb=disabled", "log.progress=lines", "log.log_every=1",
              f"trial=chaos{trial['index']}",
              f"seed={trial['seed'] % 1000}", f"layout.num_actors={trial['actors']}",
              f"layout.num_buffer_workers={trial['buffers']}", "layout.restart_backoff_seconds=0.2",
              "layout.max_restarts=3", f"layout.ring_size={trial['ring_size']}", "layout.stall_seconds=120",
              f"trainer.publish_every={trial['publish_every']}", f"trainer.max_policy_lag={trial['max_policy_lag']}"]
    if trial["algo"] == "ppo":
        envs = 4
        return "configs/cartpole_ppo_distributed.py", [
            *common, f"env.num_envs={envs}", f"trainer.batch_envs={8}", "algo.num_steps=16",
            "trainer.num_minibatches=2", "trainer.update_epochs=1", f"total_env_steps={8 * 16 * UPDATES['ppo']}",
            f"layout.inference={trial['inference']}", f"layout.num_policy_workers={trial['policy_workers']}"]
    if trial["algo"] == "muzero":  # small nets; one update per 8 x 32 env steps, half of each batch reanalysed
        return "configs/cartpole_muzero_distributed.py", [
            *common, "env.num_envs=8", "trainer.batch_envs=8", "algo.num_steps=32", "algo.batch_size=32",
            "trainer.num_minibatches=1",  # the draws as they were before the config went to 8
            "algo.hidden_sizes=[32]", "algo.state_size=16", "algo.num_simulations=2", "algo.reanalyse_ratio=0.5",
            f"total_env_steps={8 * 32 * UPDATES['muzero']}", f"layout.inference={trial['inference']}",
            f"layout.num_policy_workers={trial['policy_workers']}",
            # every worker of the trial is a thread of one process, and tracing a search holds the GIL for seconds
            # (a restarted worker compiles again): 5 s of silence lost workers to it on a loaded box (draw 4)
            "layout.heartbeat_timeout_seconds=30"]
    # Ape-X: the replay ratio paces the updates; learning starts after 512 inserted rows
    return "configs/cartpole_apex_distributed.py", [
        *common, "env.num_envs=8", "algo.learning_starts=512", "algo.batch_size=32", "eval.every_updates=0",
        f"total_env_steps={512 + UPDATES['apex'] * 32 * 10}", "algo.replay_ratio=0.1",
        f"algo.updates_per_call={trial.get('updates_per_call', 1)}"]


def install_chaos(trial: dict[str, Any], p_delay: float, max_delay: float) -> None:
    """Patch every worker class's loop and every socket's send (this process only)."""
    from srljax.comm import sockets
    from srljax.system.shell.worker import Worker

    rng = random.Random(trial["seed"])
    lock = threading.Lock()
    pending = {(k["role"], k["index"]): k["when"] for k in trial["kills"]}
    reanalyses = {(k["role"], k["index"]): k["at"] for k in trial["kills"] if k["when"] == "reanalyse"}
    turns: dict[tuple[str, int], int] = {}

    def maybe_sleep(scale: float) -> None:
        with lock:
            nap = rng.random() < p_delay and rng.uniform(0, max_delay * scale)
        if nap:
            time.sleep(nap)

    def kill_due(worker: Worker, where: str) -> bool:
        key = (worker.role, worker.index)
        with lock:
            when = pending.get(key)
            if when is None:
                return False
            if where == "setup":
                due = when == "setup"
            else:
                turns[key] = turns.get(key, 0) + 1
                due = isinstance(when, int) and turns[key] >= when
            if due:
                del pending[key]
            return due

    send = sockets.Endpoint._send
    inside = threading.local()  # a subclass's setup/poll calls its parent's: chaos once per outermost call

    def wrap(fn: Any, where: str) -> Any:
        def chaotic(self: Worker) -> None:
            if getattr(inside, "depth", 0):
                return fn(self)
            inside.depth = 1
            try:
                maybe_sleep(5.0 if where == "setup" else 1.0)
                if kill_due(self, where):
                    raise RuntimeError(f"chaos: {self.name} killed in {where}")
                return fn(self)
            finally:
                inside.depth = 0

        return chaotic

    def chaotic_send(self: Any, frames: list[Any], timeout_ms: int | None, *args: Any, **kwargs: Any) -> bool:
        maybe_sleep(0.1)
        return send(self, frames, timeout_ms, *args, **kwargs)  # ``track`` and what else Endpoint._send takes

    from srljax.system.acting.actor import ActorWorker
    from srljax.system.acting.apex_actor import ApexActorWorker
    from srljax.system.acting.policy import PolicyWorker
    from srljax.system.managers.eval_manager import EvalManager
    from srljax.system.staging.buffer import BufferWorker
    from srljax.system.staging.replay_buffer import ReplayBufferWorker
    from srljax.system.training.trainer import TrainerWorker

    if reanalyses:  # MuZero: a buffer worker raises inside its reanalyse, once
        from srljax.system.staging.search_buffer import SearchBufferWorker

        reanalyse = SearchBufferWorker._reanalyse
        calls: dict[tuple[str, int], int] = {}

        def dying_reanalyse(self: Any, *args: Any) -> Any:
            key = (self.role, self.index)
            with lock:
                calls[key] = calls.get(key, 0) + 1
                due = reanalyses.get(key) == calls[key] and self.follower is not None and self.follower.params is not None
                if due:
                    del reanalyses[key]
            if due:
                raise RuntimeError(f"chaos: {self.name} killed during reanalyse (batch {calls[key]})")
            return reanalyse(self, *args)

        SearchBufferWorker._reanalyse = dying_reanalyse
        extra: tuple[type, ...] = (SearchBufferWorker,)
    else:
        extra = ()
    for cls in (ActorWorker, ApexActorWorker, BufferWorker, EvalManager, PolicyWorker, ReplayBufferWorker,
                TrainerWorker, *extra):
        for where in ("setup", "poll"):
            if where in cls.__dict__:
                setattr(cls, where, wrap(cls.__dict__[where], where))
    sockets.Endpoint._send = chaotic_send


def run_one(trial: dict[str, Any], p_delay: float, max_delay: float) -> dict[str, Any]:
    """Run ``trial`` in this process; its verdict and figures."""
    from launch.threads import read_jsonl, run_threads
    from srljax.config import apply_overrides, load_file

    install_chaos(trial, p_delay, max_delay)
    with tempfile.TemporaryDirectory(prefix="srljax-chaos-") as root:
        config, extra = overrides(trial, root)
        cfg = apply_overrides(load_file(ROOT / config), extra)
        started = time.monotonic()
        result = run_threads(cfg)
        wall = time.monotonic() - started
        lines = read_jsonl(Path(cfg.run_dir) / "metrics.jsonl")
    updates = [int(r["update"]) for r in lines]
    lags = [int(r["lag/max"]) for r in lines if "lag/max" in r]
    problems = []
    events = result.restarts.get("events", [])
    unkilled = [k for k in trial["kills"] if k["when"] == "reanalyse" and not any(
        e["worker"] == f"buffer/{k['index']}" and "killed during reanalyse" in e["reason"] for e in events)]
    if unkilled:
        problems.append(f"the kill during reanalyse never happened ({unkilled})")
    if result.exit_code != 0 or result.reason != "done":
        problems.append(f"ended {result.reason} ({result.exit_code}): {result.message.splitlines()[0][:300]}")
    if updates != list(range(1, cfg.num_updates + 1)):
        problems.append(f"metrics.jsonl updates {updates[:5]}...{updates[-5:]} (want 1..{cfg.num_updates})")
    if lags and max(lags) > cfg.trainer.max_policy_lag:
        problems.append(f"lag {max(lags)} > trainer.max_policy_lag={cfg.trainer.max_policy_lag}")
    return {"trial": trial, "passed": not problems, "problems": problems, "wall_s": round(wall, 1),
            "max_lag": max(lags, default=0), "restarts": int(result.restarts.get("total", 0)),
            "updates": len(updates)}


def run_trials(trials: list[dict[str, Any]], p_delay: float, max_delay: float, jobs: int = 1,
               echo: bool = True, logs: Path | None = None) -> list[dict[str, Any]]:
    """Each trial in its own ``--one`` process, ``jobs`` at a time; the results in order. A failed trial's
    whole output goes to ``logs/trial-<index>.log`` (with the Python stack of every thread if it aborted:
    the trial processes run with ``PYTHONFAULTHANDLER``)."""
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    results: list[dict[str, Any] | None] = [None] * len(trials)
    queue = list(enumerate(trials))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                if not queue:
                    return
                i, trial = queue.pop(0)
            cmd = [sys.executable, str(Path(__file__).resolve()), "--one", json.dumps(trial),
                   "--p-delay", str(p_delay), "--max-delay", str(max_delay)]
            try:
                timeout = TRIAL_TIMEOUT_S_OF.get(trial["algo"], TRIAL_TIMEOUT_S)
                done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)
                out, err = done.stdout, done.stderr
                last = out.strip().splitlines()[-1] if out.strip() else ""
                result = json.loads(last) if last.startswith("{") else {
                    "trial": trial, "passed": False, "wall_s": None, "max_lag": None, "restarts": None, "updates": 0,
                    "problems": [f"exit {done.returncode}: {abort_line(err) or (err or out)[-400:]}"]}
            except subprocess.TimeoutExpired as expired:
                out, err = (x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                            for x in (expired.stdout, expired.stderr))
                result = {"trial": trial, "passed": False, "wall_s": timeout, "max_lag": None,
                          "restarts": None, "updates": 0, "problems": [f"no result within {timeout:g} s"]}
            if not result["passed"] and logs is not None:
                logs.mkdir(parents=True, exist_ok=True)
                (logs / f"trial-{trial['index']}.log").write_text(
                    f"--one '{json.dumps(trial)}'\n--- stdout\n{out}\n--- stderr\n{err}")
            results[i] = result
            if echo:
                t = trial
                print(f"  trial {t['index']:>3} {t['algo']:<4} actors={t['actors']} buffers={t['buffers']} "
                      f"{t['inference']}{'' if t['inference'] == 'inline' else 'x' + str(t['policy_workers'])} "
                      f"ring={t['ring_size']} publish_every={t['publish_every']} lag<={t['max_policy_lag']} "
                      + (f"updates/call={t['updates_per_call']} " if "updates_per_call" in t else "")
                      + f"kills={[(k['role'], k['index'], k['when']) for k in t['kills']]}: "
                      f"{'pass' if result['passed'] else 'FAIL ' + '; '.join(result['problems'])} "
                      f"({result['wall_s']} s, lag {result['max_lag']}, restarts {result['restarts']})", flush=True)

    threads = [threading.Thread(target=worker) for _ in range(max(1, jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


def abort_line(stderr: str) -> str:
    """A libzmq assertion's line in a trial's stderr ("" if none): the faulthandler's stacks follow it."""
    return next((line.strip() for line in stderr.splitlines() if line.startswith("Assertion failed")), "")


def table(results: list[dict[str, Any]]) -> str:
    import numpy as np

    walls = np.array([r["wall_s"] for r in results if r["passed"]] or [float("nan")])
    rows = ["| trials | passed | p50 / p99 time to the last update | max lag seen | restarts | kills drawn |",
            "| --- | --- | --- | --- | --- | --- |"]
    rows.append(f"| {len(results)} | {sum(r['passed'] for r in results)} | "
                f"{np.percentile(walls, 50):.1f} / {np.percentile(walls, 99):.1f} s | "
                f"{max((r['max_lag'] or 0) for r in results)} | {sum((r['restarts'] or 0) for r in results)} | "
                f"{sum(len(r['trial']['kills']) for r in results)} |")
    for algo in ("ppo", "apex", "muzero"):
        some = [r for r in results if r["trial"]["algo"] == algo]
        if some:
            rows.append(f"| {algo}: {len(some)} | {sum(r['passed'] for r in some)} | | | | |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=1, help="trials at once (each is several threads)")
    parser.add_argument("--p-delay", type=float, default=0.02)
    parser.add_argument("--max-delay", type=float, default=0.2)
    parser.add_argument("--backend", choices=["threads"], default="threads",
                        help="how each trial runs its workers: threads in the trial's process (launch.threads), where "
                        "a stop is cooperative (Worker.request_stop; nothing is raised into a thread)")
    parser.add_argument("--one", help="run one drawn trial (JSON) in this process")
    parser.add_argument("--logs", type=Path, default=Path(tempfile.gettempdir()) / "srljax-liveness",
                        help="where a failed trial's whole output goes (trial-<index>.log)")
    parser.add_argument("--algo", choices=["ppo", "apex", "muzero"], help="run only the draws of this algorithm (the "
                        "same draws as the whole grid's: a rerun of one family after a change to it; muzero: the "
                        "MuZero graph's own draws, a buffer worker killed during reanalyse in each)")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(json.loads(args.one), args.p_delay, args.max_delay)), flush=True)
        return 0
    from bench.machine import describe

    print(describe(), flush=True)
    rng = random.Random(args.seed)
    if args.algo == "muzero":
        trials = [draw_muzero(i) for i in range(args.trials)]
    else:
        trials = [t for t in (draw(rng, i) for i in range(args.trials)) if args.algo in (None, t["algo"])]
    started = time.monotonic()
    results = run_trials(trials, args.p_delay, args.max_delay, args.jobs, logs=args.logs)
    aborted = [r for r in results if any("exit -6" in p or "Assertion" in p for p in r["problems"])]
    print(f"\n{len(results)} trials in {time.monotonic() - started:.0f} s (backend {args.backend}, seed {args.seed}"
          f"{', ' + args.algo + ' draws only' if args.algo else ''}, p_delay {args.p_delay}, "
          f"max_delay {args.max_delay} s, jobs {args.jobs})")
    print(table(results))
    print(f"aborted processes (SIGABRT, a libzmq assertion): {len(aborted)}")
    failed = [r for r in results if not r["passed"]]
    for r in failed:
        print(f"FAILED: --one '{json.dumps(r['trial'])}': {'; '.join(r['problems'])} "
              f"(its output: {args.logs / ('trial-' + str(r['trial']['index']) + '.log')})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
