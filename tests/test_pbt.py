"""Population-based training (issue 15 part 2): exploit/explore, the learning rate in the train state, bad input,
and (slow) a CartPole population where PBT rescues two members that start with lr 1e-6."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jax
import numpy as np
import pytest

import algos
from algos.testing import random_trajectory
from srljax.config import (
    EnvConfig,
    Experiment,
    LayoutConfig,
    PPOConfig,
    TrainerConfig,
    apply_overrides,
    load_file,
    problems,
)
from srljax.config.pbt import PBTConfig
from srljax.population.pbt import exploit_plan, explore, lr_scale, with_lr_scale
from srljax.types import EnvSpec

ROOT = Path(__file__).resolve().parents[1]
SPEC = EnvSpec(id="probe", obs_shape=(4,), obs_dtype="float32", action_kind="discrete", num_actions=2, num_envs=4,
               batch_size=4)


def population(**pbt) -> Experiment:
    return Experiment(env=EnvConfig(num_envs=4), algo=PPOConfig(num_steps=8),
                      trainer=TrainerConfig(num_minibatches=2, update_epochs=1, anneal_lr=False),
                      pbt=PBTConfig(**{"population": 4, **pbt}))


def test_learning_rate_lives_in_the_state_and_a_change_does_not_recompile():
    cfg = population()
    algo = algos.make(cfg, SPEC)
    update = jax.jit(algo.update)
    state = algo.init(jax.random.PRNGKey(0))
    assert lr_scale(state) == 1.0
    traj = random_trajectory(SPEC, 8, 4)
    frozen, _ = update(with_lr_scale(state, 0.0), traj)
    for before, after in zip(jax.tree.leaves(state.params), jax.tree.leaves(frozen.params)):
        np.testing.assert_array_equal(np.asarray(before), np.asarray(after))  # lr x 0: no step
    moved, _ = update(with_lr_scale(algo.init(jax.random.PRNGKey(0)), 2.0), traj)
    assert any(not np.allclose(a, b) for a, b in zip(jax.tree.leaves(state.params), jax.tree.leaves(moved.params)))
    assert update._cache_size() == 1  # both scales ran the one compiled program


def test_exploit_copies_strictly_better_top_members_and_explore_stays_in_range():
    rng = np.random.default_rng(0)
    plan = exploit_plan([10.0, 500.0, 20.0, 480.0], 1, rng)
    assert plan == [(0, 1)]  # the worst copies the best (the only top member when n = 1)
    pairs = exploit_plan([10.0, 500.0, 20.0, 480.0, 30.0, 490.0, 5.0, 470.0], 2, np.random.default_rng(1))
    assert {i for i, _ in pairs} == {6, 0} and all(j in (1, 5) for _, j in pairs)
    assert exploit_plan([500.0, 500.0, 500.0, 500.0], 1, rng) == []  # a tie at the cap copies nothing
    cfg = population(perturb_factors=(0.5, 2.0), lr_range=(1e-4, 1e-2))
    got = {explore(1e-3, np.random.default_rng(s), cfg) for s in range(20)}
    assert got == {5e-4, 2e-3}
    assert explore(8e-3, np.random.default_rng(3), cfg) in (4e-3, 1e-2)  # 1.6e-2 clipped to the range
    resampled = [explore(1e-3, np.random.default_rng(s), dataclasses.replace(cfg, pbt=dataclasses.replace(
        cfg.pbt, resample_probability=1.0))) for s in range(50)]
    assert all(1e-4 <= x <= 1e-2 for x in resampled) and len(set(resampled)) == 50


def test_bad_population_settings_get_one_clear_message_each():
    nobody = problems(population(quantile=0.1))
    assert any("pbt.quantile=0.1 of pbt.population=4 selects nobody" in p for p in nobody), nobody
    overlap = problems(population(quantile=0.75))
    assert any("use pbt.quantile <= 0.5" in p for p in overlap), overlap
    too_big = problems(dataclasses.replace(population(), layout=LayoutConfig(mode="distributed", num_actors=2)))
    assert any("layout.num_actors=2" in p and "set layout.num_actors=4" in p for p in too_big), too_big
    lrs = problems(population(member_lr=(1e-3, 1e-3)))
    assert any("pbt.member_lr has 2 learning rates for pbt.population=4" in p for p in lrs), lrs
    ignored = problems(dataclasses.replace(population(), checkpoint=dataclasses.replace(
        population().checkpoint, every_updates=5)))
    assert any("checkpoint.every_updates=5: a population writes only" in p for p in ignored), ignored
    assert not problems(population())
    assert not problems(load_file(ROOT / "configs" / "cartpole_pbt.py"))


@pytest.mark.slow
def test_pbt_rescues_members_that_start_with_a_tiny_learning_rate(tmp_path, capsys):
    """The issue's acceptance: with PBT every member ends >= 450; without, the two lr=1e-6 members stay < 200.
    The console names each line's member and says when one copies another."""
    from srljax.loops.train import train

    base = apply_overrides(load_file(ROOT / "configs" / "cartpole_pbt.py"),
                           [f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines", "log.log_every=10",
                            "log.progress_every_s=0"])  # every line: each member is named
    on = train(apply_overrides(base, ["trial=pbt"]))
    printed = capsys.readouterr().out
    assert all(f"member {i}  " in printed for i in range(4)), printed[-2000:]
    assert re.search(r"pbt at update \d+: member [01] \(score [\d.]+\) copies member [23]", printed), printed[-2000:]
    assert min(on.final_scores) >= 450, on.final_scores
    copies = [x for x in on.lineage if "copied" in x]
    assert {x["member"] for x in copies} >= {0, 1}  # both slow members were exploited
    lineage = [json.loads(x) for x in (on.run_dir / "pbt" / "lineage.jsonl").read_text().splitlines()]
    assert [x for x in lineage if "copied" in x] == copies
    assert (on.run_dir / "pbt" / "lineage.png").stat().st_size > 10_000
    off = train(apply_overrides(base, ["trial=control", "pbt.ready_updates=0"]))
    assert max(off.final_scores[:2]) < 200 and min(off.final_scores[2:]) >= 450, off.final_scores
    assert not off.lineage
