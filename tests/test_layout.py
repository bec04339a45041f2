"""The layout graph: groups and streams built from the config, and disconnected graphs refused early."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from srljax.config import ConfigError, apply_overrides, load_file
from srljax.layout import Stream, build_layout, layout_problems
from srljax.prepare import check, problems

ROOT = Path(__file__).resolve().parents[1]
CARTPOLE = ROOT / "configs" / "cartpole_ppo_distributed.py"


def config(*overrides: str):
    return apply_overrides(load_file(CARTPOLE), list(overrides))


def test_remote_inference_graph():
    layout = build_layout(config())
    assert {g.role: g.count for g in layout.groups} == {"trainer": 1, "buffer": 0, "policy": 1, "league": 0, "actor": 2,
                                                       "eval": 0, "population": 0}
    assert set(layout.streams) == {Stream("samples", "actor", "trainer"), Stream("inference", "actor", "policy"),
                                   Stream("params", "trainer", "policy")}
    assert layout.workers() == [("trainer", 0), ("policy", 0), ("actor", 0), ("actor", 1)]  # servers first
    assert layout.sample_sink() == "trainer"


def test_inline_graph_with_a_buffer():
    layout = build_layout(config("layout.inference=inline", "layout.num_buffer_workers=1"))
    assert layout.count("policy") == 0 and layout.count("buffer") == 1
    assert set(layout.streams) == {Stream("samples", "actor", "buffer"), Stream("samples", "buffer", "trainer"),
                                   Stream("params", "trainer", "actor")}
    assert layout.workers()[:2] == [("trainer", 0), ("buffer", 0)]
    assert layout.sample_sink() == "buffer"


def test_the_shipped_distributed_configs_are_valid():
    for name in ("cartpole_ppo_distributed", "atari_ppo_distributed"):
        cfg = load_file(ROOT / "configs" / f"{name}.py")
        assert problems(cfg) == []
        assert cfg.layout.mode == "distributed" and cfg.layout.num_actors == 2 and cfg.layout.inference == "remote"
    assert load_file(ROOT / "configs" / "atari_ppo_distributed.py").layout.ring_size > 1


@pytest.mark.parametrize("overrides, message", [
    (["layout.num_policy_workers=0"], "the inference stream actor -> policy has no server: there are 0 policy workers; "
                                      "set layout.num_policy_workers>=1 or layout.inference=inline"),
    (["layout.num_actors=0"], "the trainer has no sample source"),
    (["layout.ring_size=3"], "env.num_envs=4 is not a multiple of layout.ring_size=3"),
    (["layout.ring_size=2", "env.batch_size=1"], "env.batch_size=1 x layout.ring_size=2 != env.num_envs=4"),
    (["layout.heartbeat_timeout_seconds=0"], "layout.heartbeat_timeout_seconds=0"),
])
def test_disconnected_or_inconsistent_layouts_fail_validation(overrides, message):
    cfg = config(*overrides)
    assert any(message in p for p in problems(cfg)), problems(cfg)
    with pytest.raises(ConfigError, match="invalid config"):
        check(cfg)


def test_single_mode_has_no_layout_problems():
    assert layout_problems(load_file(ROOT / "configs" / "cartpole_ppo.py")) == []


def test_launch_local_refuses_a_disconnected_layout_before_starting(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "launch.local", str(CARTPOLE), f"log.run_root={tmp_path}", "layout.num_policy_workers=0"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 2
    assert "the inference stream actor -> policy has no server" in out.stderr
    assert not any(tmp_path.iterdir())  # nothing was started or written


# which module may import which: tests/test_house.py (floors and circles over the whole tree)


def test_role_names_are_spelled_in_one_module():
    """No module but srljax/layout.py spells a role name as a string literal (tests and docs aside)."""
    import ast

    roles = {"trainer", "buffer", "policy", "actor", "eval"}
    offenders = []
    for folder in ("srljax", "launch", "envs"):  # algos: flax module names like "actor" are not roles
        for path in (ROOT / folder).rglob("*.py"):
            if path.name == "layout.py" and path.parent.name == "srljax":
                continue
            tree = ast.parse(path.read_text())
            docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                          if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                          and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and node.value in roles and id(node) not in docstrings:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}")
    assert not offenders, offenders
