"""The Slurm commands ``launch.slurm`` runs (sbatch, squeue, scontrol, scancel, sinfo), as small functions.

    job_id = sbatch(Path("runs/exp/t0/slurm/job.sh"))      # "1234"; SlurmError with sbatch's own message
    queue(job_id)           # [Queued("1234+0", "RUNNING", "n1", "None"), Queued("1234+1", ...)]
    final_state(job_id)     # "COMPLETED" (scontrol remembers ended jobs for MinJobAge), "" if forgotten
    jobs_named("exp/t0")    # ids of this user's queued jobs with that name
    scancel(job_id, signal="INT", batch=True)               # only the batch shell: a clean stop

Every call has a timeout, and a missing command is reported as "not a Slurm node" rather than a
traceback.
"""

from __future__ import annotations

import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

TIMEOUT_S = 60.0


class SlurmError(RuntimeError):
    """A Slurm command failed; the message carries its own error text."""


@dataclass(frozen=True)
class Queued:
    """One ``squeue`` row: for a het job, one per component (``1234+0``, ``1234+1``)."""

    id: str
    state: str
    nodes: str
    reason: str
    name: str = ""

    @property
    def component(self) -> int:
        return int(self.id.split("+")[1]) if "+" in self.id else 0


def run(args: list[str], timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(args, check=False, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise SlurmError(f"{args[0]} not found: run this on a Slurm login node (or inside the test cluster: "
                         "bash tests/slurm/cluster.sh exec ...)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"{' '.join(args)} did not answer within {timeout:g} s: is slurmctld up?") from None


def sbatch(script: Path) -> str:
    """Submit ``script``; the job id (the het job's leader id)."""
    done = run(["sbatch", "--parsable", str(script)])
    if done.returncode != 0:
        raise SlurmError(f"sbatch refused the job (exit {done.returncode}):\n{_text(done)}")
    return done.stdout.strip().split(";")[0]


def queue(job_id: str, name: str = "") -> list[Queued]:
    """The job's rows in ``squeue``, one per component; [] once it has left the queue. With ``name``,
    only if the job has that name (job ids restart when a cluster is rebuilt)."""
    done = run(["squeue", "-h", "-j", job_id, "-o", "%i|%T|%N|%r|%j"])
    if done.returncode != 0:
        if "Invalid job id" in done.stderr:
            return []
        raise SlurmError(f"squeue -j {job_id} failed:\n{_text(done)}")
    rows = [Queued(*line.split("|", 4)) for line in done.stdout.splitlines() if line.count("|") >= 4]
    return sorted([r for r in rows if not name or r.name == name], key=lambda r: r.component)


def final_state(job_id: str, name: str = "") -> str:
    """``JobState`` from ``scontrol show job`` (kept a while after the job ends); "" when unknown
    (or, with ``name``, when that id now belongs to a job of another name)."""
    words = run(["scontrol", "show", "job", job_id]).stdout.split()
    if name and f"JobName={name}" not in words:
        return ""
    return next((w.split("=", 1)[1] for w in words if w.startswith("JobState=")), "")


def jobs_named(name: str) -> list[str]:
    """Ids of this user's jobs named ``name`` still in the queue (pending, running or completing)."""
    done = run(["squeue", "-h", "--me", f"--name={name}", "-o", "%i"])
    if done.returncode != 0:
        raise SlurmError(f"squeue --name={name} failed:\n{_text(done)}")
    return sorted({line.split("+")[0] for line in done.stdout.split()})


def scancel(job_id: str, signal: str = "", batch: bool = False) -> None:
    args = ["scancel", *([f"--signal={signal}"] if signal else []), *(["--batch"] if batch else []), job_id]
    done = run(args)
    if done.returncode != 0:
        raise SlurmError(f"{' '.join(args)} failed:\n{_text(done)}")


def partition_nodes() -> tuple[dict[str, int], str]:
    """``({partition: node count}, default partition)`` from ``sinfo``; ({}, "") if it cannot say."""
    try:
        done = run(["sinfo", "-h", "-o", "%P %D"])
    except SlurmError:
        return {}, ""
    counts: Counter[str] = Counter()
    default = ""
    for line in done.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            name = parts[0].rstrip("*")
            default = name if parts[0].endswith("*") else default
            counts[name] += int(parts[1])
    return dict(counts), default


def _text(done: subprocess.CompletedProcess[str]) -> str:
    return "\n".join(f"  {line}" for line in (done.stderr.strip() or done.stdout.strip() or "(no output)").splitlines())
