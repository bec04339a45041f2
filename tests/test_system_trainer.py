"""The distributed trainer runs the very update of the single-process path.

A single-process config with 8 envs and a distributed one with 2 actors x 4 envs describe the
same batch (8 columns x T steps), the same seed and the same number of updates. One batch goes
through ``Learner.step`` directly (what ``srljax.loops.train`` does) and, over the wire as two actor
segments, through a ``TrainerWorker``; the params afterwards must be identical.
"""

from __future__ import annotations

import dataclasses
import time

import jax
import numpy as np

import algos
import envs
from srljax.comm import MemoryNames, SampleSender
from srljax.config import EnvConfig, Experiment, LayoutConfig, LogConfig, PPOConfig, TrainerConfig
from srljax.learning.learner import Learner
from srljax.learning.rollout import SegmentBuilder, split_segments
from srljax.system.shell.common import env_spec, trial_name
from srljax.system.training.trainer import TrainerWorker


def configs(tmp_path) -> tuple[Experiment, Experiment]:
    single = Experiment(
        name="same_update", trial="t0", seed=3, total_env_steps=8 * 16 * 5,
        env=EnvConfig(id="CartPole-v1", num_envs=8),
        algo=PPOConfig(num_steps=16),
        trainer=TrainerConfig(num_minibatches=2, update_epochs=2),
        log=LogConfig(run_root=str(tmp_path / "single"), wandb="disabled", progress="lines"),
    )
    distributed = dataclasses.replace(
        single,
        env=dataclasses.replace(single.env, num_envs=4),
        layout=LayoutConfig(mode="distributed", num_actors=2, inference="inline"),
        trainer=dataclasses.replace(single.trainer, batch_envs=8),
        log=dataclasses.replace(single.log, run_root=str(tmp_path / "distributed")),
    )
    assert single.batch_envs == distributed.batch_envs == 8
    assert single.num_updates == distributed.num_updates
    return single, distributed


def rollout(cfg: Experiment) -> tuple:
    """A real batch [T+1, 8] from the env with random actions (what the actors would have sent)."""
    env = envs.make(cfg.env, seed=cfg.seed)
    builder = SegmentBuilder(env.spec, cfg.algo.num_steps, algos.make(cfg, env.spec).extras_spec)
    rng = np.random.default_rng(0)
    ts = env.reset()
    while not builder.ready(cfg.batch_envs):
        action = rng.integers(0, 2, len(ts.env_id)).astype(np.int32)
        extras = {"logp": np.full(len(action), np.log(0.5), np.float32),
                  "value": rng.normal(size=len(action)).astype(np.float32)}
        builder.add(ts, action, extras, version=0)
        ts = env.step(action, ts.env_id)
    env.close()
    return builder.pop(cfg.batch_envs)


def test_trainer_worker_update_equals_single_process_update(tmp_path):
    single, distributed = configs(tmp_path)
    batch = rollout(single)

    reference = Learner(single, env_spec(single), checkpoints=False)  # what srljax.loops.train calls
    initial = jax.device_get(reference.state.params)
    reference.step(batch)
    expected = jax.device_get(reference.state.params)

    trainer = TrainerWorker(distributed, 0, MemoryNames())
    trainer.spec = env_spec(distributed)  # what the controller's configure message carries
    trainer.setup()
    try:
        first, second = split_segments(batch, 4)  # two actors' segments, in order
        with SampleSender(trainer.receiver.address, trial_name(distributed)) as sender:
            for segment in (first, second):
                assert sender.send(segment, timeout_ms=5000, version=0)
            deadline = time.monotonic() + 60
            while trainer.learner.version < 1 and time.monotonic() < deadline:
                trainer.poll()
        assert trainer.learner.version == 1
        got = jax.device_get(trainer.learner.state.params)
    finally:
        trainer.close()

    leaves_expected, leaves_got = jax.tree.leaves(expected), jax.tree.leaves(got)
    assert len(leaves_expected) == len(leaves_got)
    for a, b in zip(leaves_expected, leaves_got):
        np.testing.assert_array_equal(a, b)
    # and the update really moved the params
    assert any(not np.array_equal(a, b) for a, b in zip(jax.tree.leaves(initial), leaves_got))


def test_the_plan_picks_the_trainer_parts():
    """One ``TrainerWorker`` class for every run; ``trainer_parts`` picks its learning, source and publisher from
    the run's plan, and nothing else does."""
    from pathlib import Path
    from types import SimpleNamespace

    from srljax.config import load_file
    from srljax.layout import TRAINER, plan_of, worker_class
    from srljax.system.training.learners import MemberLearning, PolicyLearning, RunLearning
    from srljax.system.training.members import MemberPublisher
    from srljax.system.training.parts import trainer_parts
    from srljax.system.training.publishers import PolicyPublisher, Publisher
    from srljax.system.training.replay_source import ReplaySource
    from srljax.system.training.sources import SegmentSource

    root = Path(__file__).resolve().parent.parent / "configs"
    expected = {
        "cartpole_ppo_distributed.py": (RunLearning, SegmentSource, Publisher, None),
        "cartpole_apex_distributed.py": (RunLearning, ReplaySource, Publisher, None),
        "lbf_two_policies_distributed.py": (PolicyLearning, SegmentSource, PolicyPublisher, False),
        "cartpole_pbt_distributed.py": (MemberLearning, SegmentSource, MemberPublisher, False),
        "connect_four_league.py": (MemberLearning, SegmentSource, MemberPublisher, True),
    }
    for name, (learning, source, publisher, league) in expected.items():
        cfg = load_file(root / name)
        assert worker_class(cfg, TRAINER) is TrainerWorker, name
        parts = trainer_parts(SimpleNamespace(plan=plan_of(cfg), index=1, cfg=cfg, experiment=cfg, stats=None))
        assert (type(parts.learning), type(parts.source), type(parts.publisher)) == (learning, source, publisher), name
        if league is not None:  # several trainers: each adds its done key; a league's trial waits for its manager's
            assert parts.publisher.league == league
        if isinstance(parts.publisher, MemberPublisher):
            assert parts.publisher.pbt == (not league) and parts.publisher.trainers == plan_of(cfg).members
        if isinstance(parts.learning, PolicyLearning):
            assert parts.source.policy == parts.learning.policy == plan_of(cfg).policies[1]
