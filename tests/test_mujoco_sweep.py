"""``configs/sweeps/mujoco.py``: every task of CleanRL's table, 3 seeds, with the settings the task files claim.

    .venv/bin/python -m pytest tests/test_mujoco_sweep.py -q

The returns themselves are a 1M-step, multi-hour measurement (bench/RESULTS.md, "MuJoCo PPO on every
task"); this only checks, in a second, that the sweep runs what that section reports.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

import pytest

from configs import mujoco_ppo_all_tasks
from launch.sweep import Sweep
from launch.sweep.spec import load_sweep
from launch.sweep.trials import resolve_trials

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _at_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)


def mujoco_sweep(run_root: Path) -> Sweep:
    """The shipped sweep, its trials' folders under ``run_root`` (a user's runs/mujoco/ must not matter)."""
    sweep = load_sweep("configs/sweeps/mujoco.py")
    return dataclasses.replace(sweep, overrides=[*sweep.overrides, f"log.run_root={run_root}"])


def test_every_reference_task_runs_three_seeds_at_1m_steps(tmp_path: Path) -> None:
    sweep = mujoco_sweep(tmp_path)
    planned = resolve_trials(sweep)  # the launcher's own checks, env ids included
    per_env = Counter(p.cfg.env.id for p in planned)
    assert per_env == {env: 3 for env in sweep.reference.returns}
    assert {p.cfg.total_env_steps for p in planned} == {1_000_000}
    assert all(len({p.cfg.seed for p in planned if p.cfg.env.id == env}) == 3 for env in per_env)


def test_task_files_differ_from_the_common_settings_only_where_listed(tmp_path: Path) -> None:
    common = mujoco_ppo_all_tasks.experiment()
    for p in resolve_trials(mujoco_sweep(tmp_path), check_env=False):
        cfg = p.cfg
        clipped = cfg.env.id in mujoco_ppo_all_tasks.CLEANRL_CLIPPING
        grad_norm = 0.5 if clipped else common.trainer.max_grad_norm
        assert cfg.trainer == dataclasses.replace(common.trainer, max_grad_norm=grad_norm)
        assert cfg.env.num_envs == common.env.num_envs
        expected_std = mujoco_ppo_all_tasks.INIT_LOG_STD.get(cfg.env.id, common.algo.init_log_std)
        assert cfg.algo == dataclasses.replace(common.algo, init_log_std=expected_std,
                                               clip_vloss=clipped or common.algo.clip_vloss)
