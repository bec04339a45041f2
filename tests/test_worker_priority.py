"""srljax.system.shell.worker.lower_priority: what an actor process runs at (layout.actor_nice)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="nice values and autogroups: Linux")

PROBE = """
import os, sys
from srljax.system.shell.worker import lower_priority
lower_priority(12)
try:  # "/autogroup-N nice K"; empty or absent where the kernel has no autogroups (CI's)
    group = open("/proc/self/autogroup").read().split() or ["-"]
except OSError:
    group = ["-"]
print(os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0) == os.SCHED_BATCH, group[-1])
"""


def probe(new_session: bool) -> list[str]:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parents[1], start_new_session=new_session)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_an_actor_leading_its_own_session_also_nices_its_autogroup():
    nice, batch, group_nice = probe(new_session=True)  # as launch/processes.py starts every worker
    assert (nice, batch) == ("12", "True")
    autogroups = Path("/proc/sys/kernel/sched_autogroup_enabled")
    if autogroups.exists() and autogroups.read_text().strip() == "1":
        # CPU is shared between autogroups before nice values count: without this, 64 actors at nice 10 took
        # 64/65 of the cores from the trainer (bench/RESULTS.md)
        assert group_nice == "12"


def autogroup_nice() -> str:
    try:
        return (Path("/proc/self/autogroup").read_text().split() or ["-"])[-1]
    except OSError:
        return "-"


def test_a_process_in_the_launchers_session_leaves_that_autogroup_alone():
    before = autogroup_nice()
    nice, batch, group_nice = probe(new_session=False)
    assert (nice, batch, group_nice) == ("12", "True", before)
