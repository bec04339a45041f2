"""Trial folders are never mixed: a used run folder is refused everywhere, default trial names never collide.

    .venv/bin/python -m pytest tests/test_run_dir.py -q
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from launch import processes
from launch.cli import parse
from launch.threads import run_threads
from srljax.config import ConfigError, apply_overrides, load_file
from srljax.loops.train import train
from srljax.storage import run_dir
from srljax.storage.run_dir import RunFolderInUse

ROOT = Path(__file__).resolve().parents[1]
TINY = ["configs/cartpole_ppo.py", "total_env_steps=2048", "log.wandb=disabled", "log.progress=lines"]


def local(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "launch.local", *TINY, f"log.run_root={tmp_path}", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_a_second_launch_of_a_trial_is_refused_and_leaves_the_first_run_alone(tmp_path: Path) -> None:
    first = local(tmp_path, "-f", "same")
    assert first.returncode == 0, first.stdout + first.stderr[-3000:]
    folder = tmp_path / "cartpole_ppo" / "same"
    before = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert {Path("metrics.jsonl"), Path("config.json")} <= set(before)

    second = local(tmp_path, "-f", "same", "seed=2")
    assert second.returncode == 2, second.stdout + second.stderr
    assert f"run folder {folder} is not empty" in second.stderr and "-f" in second.stderr, second.stderr
    assert "invalid config" not in second.stderr  # nothing is wrong with the config itself
    assert "run folder:" not in second.stdout  # refused before the launcher started anything
    after = {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert after == before  # metrics.jsonl, config.json, checkpoints: byte for byte


def test_default_trial_names_differ_within_one_second(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(run_dir.time, "strftime", lambda fmt: "20250101-120000")
    names = {parse([*TINY, f"log.run_root={tmp_path}"]).trial for _ in range(20)}
    assert len(names) == 20
    assert all(re.fullmatch(r"20250101-120000-[0-9a-f]{6}", name) for name in names), names


def test_an_existing_empty_folder_is_accepted(tmp_path: Path) -> None:
    folder = tmp_path / "cartpole_ppo" / "empty"
    folder.mkdir(parents=True)
    cfg = parse([*TINY, "-f", "empty", f"log.run_root={tmp_path}"])
    assert run_dir.problems(cfg) == [] and run_dir.claim(cfg) == folder


def test_resolve_lists_a_used_folder_with_the_config_problems(tmp_path: Path) -> None:
    folder = tmp_path / "cartpole_ppo" / "used"
    (folder / "checkpoints").mkdir(parents=True)
    with pytest.raises(RunFolderInUse, match=r"is not empty \(checkpoints\)"):
        parse([*TINY, "-f", "used", f"log.run_root={tmp_path}"])
    with pytest.raises(ConfigError) as err:
        parse([*TINY, "-f", "used", f"log.run_root={tmp_path}", "trainer.num_minibatches=3"])
    assert "trainer.num_minibatches=3" in str(err.value) and f"run folder {folder} is not empty" in str(err.value)


def test_every_entry_point_refuses_a_used_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    single = parse([*TINY, "-f", "used", f"log.run_root={tmp_path}"])
    distributed = apply_overrides(load_file(ROOT / "configs" / "cartpole_ppo_distributed.py"),
                                  [f"log.run_root={tmp_path}", "trial=used", "log.wandb=disabled"])
    for cfg in (single, distributed):
        folder = Path(cfg.run_dir)
        folder.mkdir(parents=True)
        (folder / "metrics.jsonl").write_text('{"update": 1}\n')
    with pytest.raises(RunFolderInUse, match=f"run folder {re.escape(str(single.run_dir))} is not empty"):
        train(single)
    with pytest.raises(RunFolderInUse, match="Pick another trial name with -f"):
        run_threads(distributed)
    assert processes.run_distributed(distributed) == 2
    assert f"run folder {distributed.run_dir} is not empty (metrics.jsonl)" in capsys.readouterr().err
    for cfg in (single, distributed):  # nothing written beside the earlier run
        assert [p.name for p in Path(cfg.run_dir).iterdir()] == ["metrics.jsonl"]
        assert (Path(cfg.run_dir) / "metrics.jsonl").read_text() == '{"update": 1}\n'


def test_a_key_added_since_the_checkpoint_blocks_resume_only_when_set():
    """A checkpoint written before a config key existed resumes when the key keeps its default."""
    import dataclasses

    from srljax.config import Experiment, to_dict
    from srljax.config.policies import PoliciesConfig, PolicyConfig
    from srljax.storage.run_dir import config_differences

    saved = to_dict(Experiment())
    del saved["policies"]  # as written before the section existed
    assert config_differences(saved, Experiment()) == []
    two = dataclasses.replace(Experiment(), policies=PoliciesConfig(named=(PolicyConfig("a"),), agents=("a",)))
    assert [d.split(":")[0] for d in config_differences(saved, two)] == ["policies.agents", "policies.named"]
    saved["trainer"]["lr"] = 1.0  # a key the checkpoint has still counts
    assert any(d.startswith("trainer.lr:") for d in config_differences(saved, Experiment()))
