"""Name resolution: both backends, TTL, wait, and cross-process visibility of DirectoryNames."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from srljax.comm.names import DirectoryNames, MemoryNames, NameExists, NameNotFound, NameResolver, worker_key

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(params=["memory", "directory"])
def names(request: pytest.FixtureRequest, tmp_path: Path) -> NameResolver:
    return MemoryNames() if request.param == "memory" else DirectoryNames(tmp_path / "names")


def test_add_get_list_delete_clear(names: NameResolver) -> None:
    key = worker_key("exp", "t0", "actor", 0)
    assert key == "exp/t0/actor/0"
    names.add(key, "tcp://127.0.0.1:1")
    names.add("exp/t0/actor/1", "tcp://127.0.0.1:2")
    names.add("exp/t0/policy/0", "ipc:///tmp/p.sock")
    names.add("exp/t1/actor/0", "tcp://127.0.0.1:9")
    names.add("exp/t0/actor", "a prefix of other keys is a key too")
    assert names.get(key) == "tcp://127.0.0.1:1"
    assert names.list("exp/t0/actor/") == {"exp/t0/actor/0": "tcp://127.0.0.1:1", "exp/t0/actor/1": "tcp://127.0.0.1:2"}
    names.add(key, "tcp://127.0.0.1:3")  # replace is the default
    assert names.get(key) == "tcp://127.0.0.1:3"
    with pytest.raises(NameExists):
        names.add(key, "x", replace=False)
    names.delete(key)
    names.delete(key)  # deleting a missing key is fine
    with pytest.raises(NameNotFound):
        names.get(key)
    names.clear("exp/t0/")
    assert names.list("exp/") == {"exp/t1/actor/0": "tcp://127.0.0.1:9"}


def test_ttl_expiry(names: NameResolver) -> None:
    names.add("e/t/actor/0", "short", ttl=0.2)
    names.add("e/t/actor/1", "forever")
    assert names.get("e/t/actor/0") == "short"
    time.sleep(0.3)
    with pytest.raises(NameNotFound):
        names.get("e/t/actor/0")
    assert names.list("e/t/") == {"e/t/actor/1": "forever"}
    names.add("e/t/actor/0", "again", ttl=10, replace=False)  # an expired entry does not block
    assert names.get("e/t/actor/0") == "again"


def test_wait_polls_until_added_or_times_out(names: NameResolver) -> None:
    timer = threading.Timer(0.2, names.add, args=("e/t/trainer/0", "tcp://h:5"))
    timer.start()
    try:
        assert names.wait("e/t/trainer/0", timeout=5) == "tcp://h:5"
    finally:
        timer.join()
    start = time.monotonic()
    with pytest.raises(NameNotFound):
        names.wait("e/t/never/0", timeout=0.2)
    assert 0.15 < time.monotonic() - start < 2


@pytest.mark.parametrize("key", ["", "a//b", "/a", "a/", "a/../b", "a/./b", "a/\nb", "x" * 300])
def test_bad_keys_rejected(names: NameResolver, key: str) -> None:
    with pytest.raises(ValueError):
        names.add(key, "v")


def test_directory_names_ignores_strays_and_temp_files(tmp_path: Path) -> None:
    names = DirectoryNames(tmp_path)
    names.add("e/t/a/0", "v")
    (tmp_path / "junk.json").write_text("not json")
    (tmp_path / "x.json.abc.tmp").write_text("{}")
    (tmp_path / "%2E%2E.json").write_text('{"value": "v", "expires": null}')
    assert names.list() == {"e/t/a/0": "v"}


def _run(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def test_directory_names_across_processes(tmp_path: Path) -> None:
    names = DirectoryNames(tmp_path / "names")
    # a child waits for our entry, then answers with its own
    child = _run("""
        import sys
        from srljax.comm.names import DirectoryNames
        names = DirectoryNames(sys.argv[1])
        got = names.wait("e/t/controller/0", timeout=20)
        names.add("e/t/actor/7", "seen " + got, ttl=60)
        names.add("e/t/actor/8", "dies", ttl=0.3)
    """, str(tmp_path / "names"))
    names.add("e/t/controller/0", "tcp://10.0.0.1:5555")
    try:
        assert names.wait("e/t/actor/7", timeout=20) == "seen tcp://10.0.0.1:5555"
        out, err = child.communicate(timeout=20)
        assert child.returncode == 0, err
    finally:
        child.kill()
    time.sleep(0.35)  # the child's TTL is honoured by another process
    assert names.list("e/t/actor/") == {"e/t/actor/7": "seen tcp://10.0.0.1:5555"}
