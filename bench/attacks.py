"""Attacks on live trials (issue 43): hostile neighbours, broken disks, two launches of one trial, bad values.

    python bench/attacks.py                    # every attack, one row each: attack, expected, observed, pass/fail
    python bench/attacks.py --only flood,disk  # the rows whose name holds "flood" or "disk"
    python bench/attacks.py --list             # the rows' names

Every row runs the real launcher (``python -m launch.local``: local processes, or one process for a single-process
config) or, where it says ``threads``, the threads backend (``launch.threads.run_threads`` in a process of its own),
on small CartPole trials in a fresh run root, and reads what a user would: the exit code, the launcher's output,
``metrics.jsonl``, the run folder and ``/proc``. Rows that need a filesystem of their own (a read-only or full
disk) mount a tmpfs and say ``skipped`` where this user cannot mount. The table goes to stdout (markdown); exit 1
when a row fails.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.attack_kit import (  # noqa: E402 - after the path insert above
    DIST,
    FD_LIMIT,
    FLOOD,
    LIVE_S,
    PY,
    QUIET,
    SINGLE,
    address,
    continuous,
    dist,
    fill_disk,
    finish,
    flood,
    launch,
    metrics,
    mount_tmpfs,
    no_traceback_exit2,
    rss_mib,
    run,
    single,
    wait_for,
    worker_pid,
)

ROWS: list[tuple[str, str, Callable[[Path], tuple[str, bool]]]] = []


def row(name: str, expected: str):
    def add(fn: Callable[[Path], tuple[str, bool]]) -> Callable[[Path], tuple[str, bool]]:
        ROWS.append((name, expected, fn))
        return fn
    return add


# -- hostile neighbours -----------------------------------------------------------------------------------------
def _flooded_processes(root: Path, floods: int) -> tuple[int, str, list[int], Path]:
    folder = root / "cartpole_ppo_distributed" / "flood"
    # 100 updates: on a quiet box the trial must outlive both floods (24 updates ended during the first one)
    proc = launch(dist(root, "flood", "total_env_steps=102400"), fd_limit=FD_LIMIT)
    opened = []
    for _ in range(floods):
        target = wait_for(lambda: len(metrics(folder)) >= 2 + 2 * len(opened) and address(folder, "trainer",
                                                                                          "samples"), LIVE_S)
        if not target or proc.poll() is not None:
            break
        opened.append(flood(target))
    code, out = finish(proc)
    return code, out, opened, folder


@row("idle-connection flood, local processes", f"{FLOOD} idle connections to the trainer's samples port, twice, "
     f"under ulimit -n {FD_LIMIT}: rc 0, every update once, no restart")
def flood_processes(root: Path) -> tuple[str, bool]:
    code, out, opened, folder = _flooded_processes(root, 2)
    ups = metrics(folder)
    restarts = out.count("restarting worker")
    ok = code == 0 and len(opened) == 2 and continuous(ups) and restarts == 0
    return f"rc {code}, floods opened {opened}, updates 1-{max(ups, default=0)} continuous={continuous(ups)}, " \
           f"restarts {restarts}", ok


THREADS_FLOOD = """
import json, resource, sys, threading, time
sys.path.insert(0, {root!r})
from bench.attacks import flood, metrics
from launch.threads import run_threads
from srljax.comm import MemoryNames
from srljax.config import apply_overrides, load_file
from pathlib import Path
cfg = apply_overrides(load_file({config!r}), {overrides!r})
names, opened = MemoryNames(), []
def attack():
    folder = Path(cfg.run_dir)
    for _ in range(2):
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and len(metrics(folder)) < 2 + 3 * len(opened):
            time.sleep(0.5)
        found = [v for k, v in names.list("").items() if k.endswith("trainer/0/samples")]
        if not found:
            return
        import subprocess
        out = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, {root!r}); "
                              "from bench.attacks import flood; print(flood(sys.argv[1]))", found[0]],
                             capture_output=True, text=True)
        opened.append(int(out.stdout.strip() or 0))
threading.Thread(target=attack, daemon=True).start()
result = run_threads(cfg, names=names)
print(json.dumps({{"code": result.exit_code, "reason": result.reason, "opened": opened,
                  "restarts": int(result.restarts.get("total", 0)), "message": result.message[:300]}}))
"""


@row("idle-connection flood, threads backend", f"the same floods at a threads-backend trial under ulimit -n {FD_LIMIT}: "
     "rc 0, every update once, no restart")
def flood_threads(root: Path) -> tuple[str, bool]:
    overrides = [f"log.run_root={root}", "trial=tflood", "total_env_steps=307200", "checkpoint.every_updates=4",
                 *QUIET]
    script = THREADS_FLOOD.format(root=str(ROOT), config=str(ROOT / DIST), overrides=overrides)
    code, out = run(["-c", script], fd_limit=FD_LIMIT)
    last = out.strip().splitlines()[-1] if out.strip() else ""
    try:
        got = json.loads(last)
    except ValueError:
        return f"rc {code}: {last[:200]}", False
    ups = metrics(root / "cartpole_ppo_distributed" / "tflood")
    ok = code == 0 and got["code"] == 0 and len(got["opened"]) == 2 and continuous(ups) and got["restarts"] == 0
    return f"rc {got['code']} ({got['reason']}), floods opened {got['opened']}, updates 1-{max(ups, default=0)} " \
           f"continuous={continuous(ups)}, restarts {got['restarts']}", ok


BIG_MESSAGE = """
import sys, time, zmq
sys.path.insert(0, {root!r})
from srljax.comm.security import KeyRing
keys = KeyRing.load({keys!r})
ctx = zmq.Context()
s = ctx.socket(zmq.PUSH)
s.setsockopt(zmq.CURVE_PUBLICKEY, keys.public("actor"))
s.setsockopt(zmq.CURVE_SECRETKEY, keys.secret("actor"))
s.setsockopt(zmq.CURVE_SERVERKEY, keys.public("trainer"))
s.setsockopt(zmq.LINGER, 60000)
s.connect({address!r})
frame = b"x" * (57 << 10)
for _ in range({count}):
    s.send_multipart([frame] * {frames})
s.close()
ctx.term()
print("sent", flush=True)
"""


@row("many-frame messages from a keyed peer", "3 messages of 3,000 frames x 57 KB (170 MB each, every frame under "
     "the frame bound) to a live trainer with the trial's actor key: dropped (drop.too_big), the trainer's RSS "
     "back within 100 MB, rc 0")
def big_message(root: Path) -> tuple[str, bool]:
    folder = root / "cartpole_ppo_distributed" / "big"
    proc = launch(dist(root, "big", "total_env_steps=61440"))  # outlives the three messages on a quiet box
    target = wait_for(lambda: len(metrics(folder)) >= 2 and address(folder, "trainer", "samples"), LIVE_S)
    pid = worker_pid(folder, "trainer") if target else None
    if not pid:
        finish(proc)
        return "the trial never reached its second update", False
    before = rss_mib(pid)
    script = BIG_MESSAGE.format(root=str(ROOT), keys=str(folder / "keys"), address=target, count=3, frames=3000)
    sent = subprocess.run([PY, "-c", script], capture_output=True, text=True, timeout=300).stdout.strip()
    time.sleep(3)
    after = rss_mib(pid) if proc.poll() is None else float("nan")
    code, out = finish(proc)
    drops = 0
    for line in (folder / "workers" / "trainer-0.jsonl").read_text().splitlines()[-5:]:
        drops = max(drops, int(json.loads(line).get("samples/drop.too_big", 0) or 0)) if line else drops
    grown = after - before
    ok = sent == "sent" and code == 0 and grown < 100 and continuous(metrics(folder))
    return f"{sent or 'not sent'}; trainer RSS {before:.0f} -> {after:.0f} MiB ({grown:+.0f}); drop.too_big in its " \
           f"metrics: {drops}; rc {code}", ok


@row("Prometheus connection flood", "600 idle connections to a live actor's metrics endpoint: its threads stay "
     "within 8 more, a scrape answers after they time out, rc 0")
def prometheus_flood(root: Path) -> tuple[str, bool]:
    from srljax.telemetry.prometheus import read_targets, scrape

    folder = root / "cartpole_ppo_distributed" / "prom"
    proc = launch(dist(root, "prom", "total_env_steps=61440"))  # outlives the flood on a quiet box
    got = wait_for(lambda: len(metrics(folder)) >= 2 and [t for t in read_targets(folder)
                                                          if t.labels.get("role") == "actor"], LIVE_S)
    pid = worker_pid(folder, "actor") if got else None
    if not pid:
        finish(proc)
        return "no actor endpoint", False
    host, port = got[0].address.rsplit(":", 1)
    def threads() -> int:  # -1 once the actor has exited
        try:
            text = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return -1
        return int(next(line.split()[1] for line in text.splitlines() if line.startswith("Threads:")))
    before = threads()
    conns = []
    for _ in range(600):
        try:
            conns.append(socket.create_connection((host, int(port)), timeout=5))
        except OSError:
            pass
    time.sleep(2)
    during = threads()
    answered = wait_for(lambda: _scrapes(scrape, got[0].address), 30)
    for c in conns:
        c.close()
    code, _ = finish(proc)
    ok = before > 0 and during > 0 and during - before <= 8 and bool(answered) and code == 0
    return f"{len(conns)} opened; actor threads {before} -> {during}; scrape after: " \
           f"{'answered' if answered else 'none'}; rc {code}", ok


def _scrapes(scrape: Any, addr: str) -> bool:
    try:
        return bool(scrape(addr, timeout=2))
    except OSError:
        return False


# -- two launches -----------------------------------------------------------------------------------------------
@row("two launches of a running trial, local processes", "a second launch and a --resume of a running distributed "
     "trial: each rc 2 naming the holder's pid and host; the first rc 0, every update once")
def two_launches_processes(root: Path) -> tuple[str, bool]:
    folder = root / "cartpole_ppo_distributed" / "twice"
    first = launch(dist(root, "twice", "total_env_steps=102400"))  # still running when both refusals come
    started = wait_for(lambda: len(metrics(folder)) >= 1, LIVE_S)
    again, resumed = (-1, ""), (-1, "")
    if started:  # both at once: a refusal that starts slowly on a loaded box still meets a running trial
        second = launch(dist(root, "twice"))
        third = launch(["-m", "launch.local", DIST, "-f", "twice", f"log.run_root={root}", "--resume", *QUIET])
        again, resumed = finish(second, 300), finish(third, 300)
    code, _ = finish(first)
    named = [("locked by pid" in out and "on host" in out) for _, out in (again, resumed)]
    ok = again[0] == 2 and resumed[0] == 2 and all(named) and code == 0 and continuous(metrics(folder))
    unnamed = "; ".join(f"{which} said: {out.strip().splitlines()[-1][:200] if out.strip() else '(nothing)'}"
                        for which, (_, out), ok_ in zip(("second launch", "--resume"), (again, resumed), named)
                        if not ok_)
    return f"second launch rc {again[0]}, --resume rc {resumed[0]}, holder named {named}; first rc {code}, " \
           f"continuous={continuous(metrics(folder))}" + (f"; {unnamed}" if unnamed else ""), ok


THREADS_TWICE = """
import sys
sys.path.insert(0, {root!r})
from launch.threads import run_threads
from srljax.config import ConfigError, apply_overrides, load_file
cfg = apply_overrides(load_file({config!r}), {overrides!r})
try:
    result = run_threads(cfg)
except ConfigError as err:
    print(err)
    sys.exit(2)
print("rc", result.exit_code)
sys.exit(result.exit_code)
"""


@row("two launches of a running trial, threads backend", "a second threads-backend launch of a running "
     "threads-backend trial: rc 2 naming the holder; the first rc 0")
def two_launches_threads(root: Path) -> tuple[str, bool]:
    folder = root / "cartpole_ppo_distributed" / "ttwice"
    overrides = [f"log.run_root={root}", "trial=ttwice", "total_env_steps=16384", *QUIET]
    script = THREADS_TWICE.format(root=str(ROOT), config=str(ROOT / DIST), overrides=overrides)
    first = launch(["-c", script])
    started = wait_for(lambda: len(metrics(folder)) >= 1, LIVE_S)
    code2, out2 = run(["-c", script], timeout=120) if started else (-1, "")
    code, _ = finish(first)
    ok = code2 == 2 and "locked by pid" in out2 and code == 0
    return f"second rc {code2} ({'holder named' if 'locked by pid' in out2 else out2.strip()[-120:]}); first rc {code}", ok


@row("two --resume of a single-process trial", "two --resume launched together: one rc 2 naming the holder, the "
     "other rc 0; metrics.jsonl every update once")
def two_resumes(root: Path) -> tuple[str, bool]:
    folder = root / "cartpole_ppo" / "two"
    code, _ = run(single(root, "two"))
    if code != 0:
        return f"first run rc {code}", False
    again = ["-m", "launch.local", SINGLE, "-f", "two", f"log.run_root={root}", "--resume", "total_env_steps=32768",
             *QUIET]
    a, b = launch(again), launch(again)
    (ca, oa), (cb, ob) = finish(a), finish(b)
    ups = metrics(folder)
    ok = sorted([ca, cb]) == [0, 2] and "locked by pid" in (oa if ca == 2 else ob) and continuous(ups) \
        and max(ups) == 32
    return f"rc {ca} and {cb}; updates 1-{max(ups, default=0)} continuous={continuous(ups)}", ok


# -- damaged checkpoints and metrics ----------------------------------------------------------------------------
def _trained(root: Path, trial: str) -> tuple[Path, list[int]]:
    folder = root / "cartpole_ppo" / trial
    code, _ = run(single(root, trial))
    found = sorted(int(p.name) for p in (folder / "checkpoints").iterdir() if p.name.isdigit()) if code == 0 else []
    return folder, found


def _resume(root: Path, trial: str, *extra: str) -> tuple[int, str]:
    return run(["-m", "launch.local", SINGLE, "-f", trial, f"log.run_root={root}", *extra, "total_env_steps=24576",
                *QUIET])


@row("corrupt newest checkpoint (data cut)", "every file over 200 bytes of the newest step cut to 100: --resume "
     "falls back to the previous step, names the skipped one, rc 0, metrics continuous")
def corrupt_newest(root: Path) -> tuple[str, bool]:
    folder, found = _trained(root, "cut")
    if not found:
        return "first run failed", False
    newest = found[-1]
    for f in (folder / "checkpoints" / str(newest)).rglob("*"):
        if f.is_file() and f.stat().st_size > 200:
            os.truncate(f, 100)
    code, out = _resume(root, "cut", "--resume")
    ups = metrics(folder)
    named = f"checkpoint step {newest} is damaged" in out
    ok = code == 0 and named and continuous(ups) and max(ups) == 24
    return f"rc {code}, step {newest} named={named}, kept aside={(folder / 'checkpoints.damaged' / str(newest)).is_dir()}, " \
           f"updates 1-{max(ups, default=0)} continuous={continuous(ups)}", ok


@row("empty newest step folder", "the newest step's files deleted (an empty folder): --resume falls back, rc 0")
def empty_newest(root: Path) -> tuple[str, bool]:
    folder, found = _trained(root, "empty")
    if not found:
        return "first run failed", False
    newest = folder / "checkpoints" / str(found[-1])
    import shutil

    shutil.rmtree(newest)
    newest.mkdir()
    code, out = _resume(root, "empty", "--resume")
    ok = code == 0 and f"checkpoint step {found[-1]} is damaged" in out and continuous(metrics(folder))
    return f"rc {code}, named={f'checkpoint step {found[-1]} is damaged' in out}, " \
           f"continuous={continuous(metrics(folder))}", ok


@row("--resume-from a step that is not there", "rc 2 naming the steps there, nothing changed; --resume-from an older "
     "step: rc 0, the later steps kept in checkpoints.later/")
def resume_from(root: Path) -> tuple[str, bool]:
    folder, found = _trained(root, "from")
    if len(found) < 2:
        return "first run failed", False
    code, out = _resume(root, "from", "--resume-from", "999")
    said = f"the intact steps there: {', '.join(map(str, found))}" in out
    code2, out2 = _resume(root, "from", "--resume-from", str(found[-2]))
    ups = metrics(folder)
    kept = (folder / "checkpoints.later" / str(found[-1])).is_dir()
    ok = code == 2 and said and "Traceback" not in out and code2 == 0 and kept and continuous(ups)
    return f"missing: rc {code}, steps named={said}; step {found[-2]}: rc {code2}, later kept={kept}, " \
           f"continuous={continuous(ups)}", ok


@row("torn and garbage metrics lines, deleted metrics", "--resume says how many lines it moved and why; a deleted "
     "metrics.jsonl is named as missing; rc 0 both")
def metrics_damage(root: Path) -> tuple[str, bool]:
    folder, found = _trained(root, "torn")
    if not found:
        return "first run failed", False
    path = folder / "metrics.jsonl"
    path.write_text(path.read_text() + "garbage line\n" + '{"update": 99, "env_st')
    code, out = _resume(root, "torn", "--resume")
    said = "unreadable line(s)" in out
    path.unlink()
    code2, out2 = run(["-m", "launch.local", SINGLE, "-f", "torn", f"log.run_root={root}", "--resume",
                       "total_env_steps=32768", *QUIET])
    missing = "is missing" in out2
    ok = code == 0 and said and code2 == 0 and missing
    return f"garbage: rc {code}, said={said}; deleted: rc {code2}, named missing={missing}", ok


# -- disks --------------------------------------------------------------------------------------------------------


@row("read-only run root", "rc 2 before launch, one message naming the folder and log.run_root, no traceback")
def read_only(root: Path) -> tuple[str, bool]:
    mnt = root / "ro"
    if why := mount_tmpfs(mnt, "ro,size=1m"):
        return f"skipped: {why}", True
    try:
        code, out = run(single(mnt, "ro"), timeout=120)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
    return no_traceback_exit2(code, out, "read-only file system", "log.run_root")


@row("full disk, local processes", "the run root's disk filled to its last byte while the trial runs (a 32 MB tmpfs): "
     "the trial stops at the first failed save: its FAILED message names the disk in a few lines (no traceback), no "
     "restart, status.json written, rc 1")
def full_disk(root: Path) -> tuple[str, bool]:
    mnt = root / "small"
    if why := mount_tmpfs(mnt, "size=32m"):
        return f"skipped: {why}", True
    folder = mnt / "cartpole_ppo_distributed" / "full"
    try:
        proc = launch(dist(mnt, "full", "total_env_steps=40960", "checkpoint.every_updates=1"))
        filled = 0
        if wait_for(lambda: len(metrics(folder)) >= 2, LIVE_S) and proc.poll() is None:
            filled = fill_disk(mnt / "filler")  # another job's output takes what is left, as on a shared scratch disk
        code, out = finish(proc)
        status = (folder / "status.json").is_file()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]  # the message, then the summary
    ok = bool(filled) and code == 1 and len(failed) == 2 and ("No space left" in out or "is full" in out) and "restarting worker" not in out \
        and "Traceback" not in out and status
    return f"filled {filled >> 20} MiB; rc {code}, FAILED lines {len(failed)}: {failed[0][:140] if failed else ''}; " \
           f"status.json={status}", ok


# -- values ----------------------------------------------------------------------------------------------------
def _config_file(root: Path, name: str, body: str) -> str:
    path = root / f"{name}.py"
    path.write_text(textwrap.dedent(body))
    return str(path)


VALUES = {
    "seed=2147483647": (["seed=2147483647"], "seed=2147483647 is too large"),
    "seed=1e30": (["seed=1e30"], "seed"),
    "trainer.num_minibatches=2.5": (["trainer.num_minibatches=2.5"], "num_minibatches"),
}


def _value_row(label: str, overrides: list[str], said: str) -> None:
    @row(f"bad value {label}", "rc 2, one message naming it, no traceback, nothing created")
    def check(root: Path) -> tuple[str, bool]:
        code, out = run(["-m", "launch.local", DIST, f"log.run_root={root / 'v'}", *overrides, *QUIET], timeout=120)
        observed, ok = no_traceback_exit2(code, out, said)
        return observed, ok and not (root / "v").exists()


for _label, (_overrides, _said) in VALUES.items():
    _value_row(_label, _overrides, _said)


@row("wrong types in a Python config (lr=\"fast\", num_envs=\"8\")", "rc 2, both named in one message, no traceback")
def wrong_types(root: Path) -> tuple[str, bool]:
    path = _config_file(root, "types", f"""
        import dataclasses, sys
        sys.path.insert(0, {str(ROOT)!r})
        from configs.cartpole_ppo import experiment as base
        def experiment():
            cfg = base()
            return dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, num_envs="8"),
                                       trainer=dataclasses.replace(cfg.trainer, lr="fast"))
        """)
    code, out = run(["-m", "launch.local", path, f"log.run_root={root / 'v'}", *QUIET], timeout=120)
    return no_traceback_exit2(code, out, "lr", "num_envs")


@row("a config that calls sys.exit(0)", "rc 2 (an error, not a finished run), no traceback")
def config_exits(root: Path) -> tuple[str, bool]:
    path = _config_file(root, "exits", "import sys\nsys.exit(0)\n")
    code, out = run(["-m", "launch.local", path, f"log.run_root={root / 'v'}", *QUIET], timeout=120)
    return no_traceback_exit2(code, out)


@row("a fixed Prometheus port in use", "rc 2 before the run folder exists; the same command runs once the port is free")
def port_in_use(root: Path) -> tuple[str, bool]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    try:
        code, out = run(single(root, "port", f"log.prometheus_port={port}"), timeout=120)
    finally:
        sock.close()
    observed, ok = no_traceback_exit2(code, out, str(port))
    return observed, ok and not (root / "cartpole_ppo" / "port").exists()


# -- stopping -----------------------------------------------------------------------------------------------------
@row("a launcher started with & from a script, sent SIGINT", "it stops as on Ctrl-C: rc 130, no worker left")
def sigint_background(root: Path) -> tuple[str, bool]:
    folder = root / "cartpole_ppo_distributed" / "bg"
    args = " ".join(dist(root, "bg", "total_env_steps=200000"))
    # the launcher alone is the background job, so $! is its pid (``cd X && python ... &`` backgrounds a subshell,
    # and the SIGINT would go to that shell, which ignores it)
    script = (f"cd {ROOT}; PYTHONPATH={ROOT} {PY} {args} > {root}/bg.log 2>&1 & echo $! > {root}/bg.pid; "
              f"wait $!; echo $? > {root}/bg.rc")
    shell = subprocess.Popen(["bash", "-c", script])
    wait_for(lambda: len(metrics(folder)) >= 1, LIVE_S)
    pid = int((root / "bg.pid").read_text())
    os.kill(pid, signal.SIGINT)
    try:
        shell.wait(timeout=120)
    except subprocess.TimeoutExpired:
        os.kill(pid, signal.SIGKILL)
        shell.wait()
    code = (root / "bg.rc").read_text().strip() if (root / "bg.rc").exists() else "?"
    time.sleep(2)
    left = subprocess.run(["pgrep", "-f", str(folder)], capture_output=True, text=True).stdout.split()
    ok = code == "130" and not left
    return f"rc {code}; workers left {len(left)}", ok


@row("actors leave within the stop grace period", "a finished distributed trial prints no 'killed after the grace "
     "period'")
def grace(root: Path) -> tuple[str, bool]:
    code, out = run(dist(root, "grace"))
    killed = [line for line in out.splitlines() if "killed after the grace period" in line]
    return f"rc {code}; {killed[0] if killed else 'nobody killed'}", code == 0 and not killed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the rows whose name holds this (several: comma-separated)")
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    rows = [r for r in ROWS if not args.only or any(part in r[0] for part in args.only.split(","))]
    if args.list:
        print("\n".join(name for name, _, _ in rows))
        return 0
    from bench.machine import describe

    print(describe(), flush=True)
    table = ["| attack | expected | observed | result |", "| --- | --- | --- | --- |"]
    failed = 0
    began = time.monotonic()
    for name, expected, fn in rows:
        with tempfile.TemporaryDirectory(prefix="srljax-attack-") as tmp:
            started = time.monotonic()
            try:
                observed, ok = fn(Path(tmp))
            except Exception as err:  # noqa: BLE001 - a row that breaks is a failed row, the others still run
                observed, ok = f"the row raised {type(err).__name__}: {err}", False
        verdict = ("skipped" if observed.startswith("skipped") else "pass") if ok else "FAIL"
        failed += not ok
        line = f"| {name} | {expected} | {observed} ({time.monotonic() - started:.0f} s) | {verdict} |"
        print(line, flush=True)
        table.append(line)
    print(f"\n{len(rows)} attacks in {time.monotonic() - began:.0f} s, {failed} failed\n")
    print("\n".join(table))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
