"""Smoke tests of the throw-away Slurm test cluster (tests/slurm/cluster.sh).

Run with the cluster up:
    bash tests/slurm/cluster.sh up
    .venv/bin/pytest -m slurm tests/slurm -q
    bash tests/slurm/cluster.sh down

Skipped when the cluster is down, unless SLURM_TEST_REQUIRED=1 (then they fail instead).
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

CLUSTER = Path(__file__).resolve().parent / "cluster.sh"
TIMEOUT = 180

pytestmark = pytest.mark.slurm


def _cluster_up() -> tuple[bool, str]:
    try:
        r = subprocess.run(["bash", str(CLUSTER), "status"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"cluster.sh status failed: {e}"
    return r.returncode == 0, (r.stdout + r.stderr).strip()


@pytest.fixture(scope="module", autouse=True)
def _require_cluster():
    ok, out = _cluster_up()
    if not ok:
        last = out.splitlines()[-1] if out else ""
        msg = f"Slurm test cluster is not up (start it with: bash tests/slurm/cluster.sh up) [{last}]"
        if os.environ.get("SLURM_TEST_REQUIRED") == "1":
            pytest.fail(msg)
        pytest.skip(msg)


def sx(*cmd: str, check: bool = True, timeout: float = TIMEOUT) -> subprocess.CompletedProcess:
    """Run a command inside the cluster's network namespace."""
    r = subprocess.run(["bash", str(CLUSTER), "exec", *cmd], capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{cmd} exited {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}")
    return r


def _read(path: Path, log: Path | None = None) -> str:
    assert path.exists(), f"{path} missing; job log:\n{log.read_text() if log and log.exists() else '(none)'}"
    return path.read_text()


def test_sbatch_wrap(tmp_path: Path):
    out, log = tmp_path / "out.txt", tmp_path / "job.log"
    sx(
        "sbatch", "--wait", "--job-name=wrap", f"--chdir={tmp_path}", f"--output={log}",
        # options the launcher uses must be accepted: long time limit, pre-timeout signal, several CPUs per task
        "--time=3-00:00:00", "--signal=B:USR1@60", "--cpus-per-task=4", "--ntasks=1",
        "--wrap", f'echo "$(hostname) $SLURMD_NODENAME $SLURM_NODEID $SLURM_JOB_ID" > {out}',
    )
    host, node, nodeid, jobid = _read(out, log).split()
    assert node.startswith("n") and nodeid == "0" and jobid.isdigit()


def test_srun_two_nodes():
    r = sx("srun", "-N2", "-n2", "--time=5", "bash", "-c", 'echo "$SLURMD_NODENAME $SLURM_PROCID"')
    lines = [ln.split() for ln in r.stdout.strip().splitlines()]
    assert len(lines) == 2, r.stdout
    assert len({node for node, _ in lines}) == 2, f"expected 2 distinct nodes: {r.stdout}"
    assert sorted(rank for _, rank in lines) == ["0", "1"]


def test_sbatch_srun_inside_job(tmp_path: Path):
    out, log = tmp_path / "out.txt", tmp_path / "job.log"
    sx(
        "sbatch", "--wait", "-N2", "-n2", f"--chdir={tmp_path}", f"--output={log}",
        "--wrap", f'srun bash -c \'echo "$SLURMD_NODENAME"\' > {out}',
    )
    assert len(set(_read(out, log).split())) == 2


def test_heterogeneous_job(tmp_path: Path):
    log = tmp_path / "het.log"
    script = tmp_path / "het.sh"
    script.write_text(
        f"""#!/bin/bash
#SBATCH --job-name=het
#SBATCH --output={log}
#SBATCH --time=3-00:00:00
#SBATCH --signal=B:USR1@60
#SBATCH --ntasks=1 --cpus-per-task=2
#SBATCH hetjob
#SBATCH --ntasks=2 --cpus-per-task=1
set -e
echo "het size $SLURM_HET_SIZE"
srun --het-group=0 bash -c 'echo "g0 $SLURMD_NODENAME $SLURM_PROCID"' > {tmp_path}/g0.txt &
srun --het-group=1 bash -c 'echo "g1 $SLURMD_NODENAME $SLURM_PROCID"' > {tmp_path}/g1.txt &
wait
"""
    )
    sx("sbatch", "--wait", f"--chdir={tmp_path}", str(script))
    g0 = _read(tmp_path / "g0.txt", log).split("\n")
    g1 = _read(tmp_path / "g1.txt", log).split("\n")
    assert [ln.split()[0] for ln in g0 if ln] == ["g0"]
    assert [ln.split()[0] for ln in g1 if ln] == ["g1", "g1"]
    assert "het size 2" in log.read_text()


def _queue_ids() -> list[str]:
    return sx("squeue", "-h", "-o", "%i").stdout.split()


def test_scancel(tmp_path: Path):
    jobid = sx(
        "sbatch", "--parsable", f"--chdir={tmp_path}", f"--output={tmp_path}/sleep.log", "--wrap", "sleep 600"
    ).stdout.strip().split(";")[0]
    deadline = time.time() + 60
    while sx("squeue", "-h", "-j", jobid, "-o", "%T", check=False).stdout.strip() != "RUNNING":
        assert time.time() < deadline, "job never started"
        time.sleep(0.2)
    sx("scancel", jobid)
    deadline = time.time() + 60
    while jobid in _queue_ids():
        assert time.time() < deadline, "cancelled job still in squeue"
        time.sleep(0.2)
    assert "JobState=CANCELLED" in sx("scontrol", "show", "job", jobid).stdout
