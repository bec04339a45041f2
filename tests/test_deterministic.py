"""layout.deterministic: two distributed runs with one seed write the same metrics.jsonl (time and speed aside)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from configs import cartpole_ppo_distributed
from srljax.config import apply_overrides
from srljax.config.experiment import deterministic_inference, problems

ROOT = Path(__file__).resolve().parents[1]
TIMING = ("time", "sps")  # the fields that measure the machine, not the run


def run(tmp_path: Path, trial: str, *extra: str) -> tuple[list[dict], str]:
    cmd = [sys.executable, "-m", "launch.local", "configs/cartpole_ppo_distributed.py", "-e", "det", "-f", trial,
           f"log.run_root={tmp_path}", "log.wandb=disabled", "layout.deterministic=true", "seed=3",
           "total_env_steps=12288", "checkpoint.final=false", *extra]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    lines = [json.loads(x) for x in (tmp_path / "det" / trial / "metrics.jsonl").read_text().splitlines()]
    return lines, out.stdout


def without_timing(line: dict) -> dict:
    return {k: v for k, v in line.items() if k not in TIMING}


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    return run(tmp_path_factory.mktemp("det"), "a")


def test_two_runs_with_one_seed_write_the_same_metrics(tmp_path, first):
    a, said = first
    b, _ = run(tmp_path, "b", "layout.transport=ipc")  # other sockets, other timing
    assert "actors act inline" in said  # the config file's remote inference was set aside, and the user told
    assert len(a) == len(b) == 12
    assert [without_timing(x) for x in a] == [without_timing(x) for x in b]
    returns = [x["episode_return"] for x in a if x.get("episode_return") is not None]
    assert len(set(returns)) > 3  # the runs learned something, not a constant
    assert max(x["lag/max"] for x in a) == 0  # every segment acted with the version its update trains


def test_samples_through_shared_memory_train_on_the_same_bits(tmp_path, first):
    """layout.shared_memory: the same metrics as over the socket, every segment through a ring, no ring left."""
    from srljax.comm import shm

    c, _ = run(tmp_path, "c", "layout.shared_memory=true")
    assert [without_timing(x) for x in c] == [without_timing(x) for x in first[0]]
    trainer = json.loads((tmp_path / "det" / "c" / "workers" / "trainer-0.jsonl").read_text().splitlines()[-1])
    assert trainer["samples/shm.received"] == trainer["samples/received"] == 24  # 12 updates x 2 actors
    assert not any(k.startswith("samples/drop.") for k in trainer)
    assert not [f for f in os.listdir(shm.DIR) if f.startswith(f"srljax-{shm.trial_tag('det/c')}-")]


@pytest.mark.slow  # ~1 minute; the contrast that makes the test above meaningful, run with -m slow
def test_the_asynchronous_default_is_not_reproducible_and_says_why_not_in_its_doc(tmp_path):
    """The comparison that makes the test above mean something: without lockstep, which segments make a batch
    depends on timing, and the losses of two runs part ways."""
    a, _ = run(tmp_path, "c", "layout.deterministic=false", "layout.inference=inline")
    b, _ = run(tmp_path, "d", "layout.deterministic=false", "layout.inference=inline", "layout.transport=ipc")
    assert [without_timing(x) for x in a] != [without_timing(x) for x in b]


@pytest.mark.parametrize("override, needs", [
    ("layout.ring_size=2", "layout.ring_size=1"),
    ("layout.num_buffer_workers=1", "layout.num_buffer_workers=0"),
    ("trainer.batch_envs=4", "trainer.batch_envs=8"),
    ("trainer.publish_every=2", "trainer.publish_every=1"),
])
def test_what_lockstep_needs_is_named(override, needs):
    cfg = apply_overrides(cartpole_ppo_distributed.experiment(), ["layout.deterministic=true", override])
    cfg, notes = deterministic_inference(cfg)
    assert cfg.layout.inference == "inline" and notes
    found = [p for p in problems(cfg) if p.startswith("layout.deterministic=true needs")]
    assert len(found) == 1 and needs in found[0], found
