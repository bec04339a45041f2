"""Run state and resume: a stopped single-process run continues exactly; bad resumes are refused.

The exact-resume test stops a run after update 6 where every env has just finished an episode
(``tests/parity_env.py``: fixed-length episodes, history-free resets), which is when the resumed
run must equal the uninterrupted one in every metric and every array of the train state.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import jax
import numpy as np
import pytest

from launch.cli import make_parser, resolve
from srljax.config import CheckpointConfig, EnvConfig, Experiment, LogConfig, PPOConfig, TrainerConfig
from srljax.learning.rollout import SegmentBuilder
from srljax.loops.train import train
from srljax.storage.run_dir import RunFolderInUse, claim, problems
from srljax.telemetry import metrics
from srljax.types import RETURN_ACC, TimeStep

TIMING = ("time", "time_env", "time_act", "time_update", "time_store", "sps")


def parity(root: Path, **changes) -> Experiment:
    # T = 4 rows per segment, episodes of 4 steps (5 rows with the reset row): after update 6 (row 24)
    # every env is on the done row of an episode
    cfg = Experiment(name="resume", trial="t", seed=3, total_env_steps=4 * 4 * 11,
                     env=EnvConfig(factory="tests.parity_env:make_env", num_envs=4, max_episode_steps=4),
                     algo=PPOConfig(num_steps=4, hidden_sizes=(16,), normalize_obs=True, normalize_reward=True),
                     trainer=TrainerConfig(num_minibatches=2, update_epochs=2),
                     log=LogConfig(run_root=str(root), wandb="disabled", progress="lines"),
                     checkpoint=CheckpointConfig(every_updates=3, keep=5))
    return dataclasses.replace(cfg, **changes)


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def without_timing(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def stop_after(update: int):
    """Make the run stop (as Ctrl-C / SIGTERM does) right after logging ``update``."""
    write = metrics.MetricsLogger.write

    def stopping(self, record):
        write(self, record)
        if record["update"] == update:
            raise KeyboardInterrupt

    return stopping


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p): (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One uninterrupted run, and one stopped after update 6 then resumed."""
    root = tmp_path_factory.mktemp("runs")
    full = train(parity(root, trial="full"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(metrics.MetricsLogger, "write", stop_after(6))
        with pytest.raises(KeyboardInterrupt):
            train(parity(root, trial="stopped"))
    stopped = read(root / "resume" / "stopped" / "metrics.jsonl")
    resumed = train(parity(root, trial="stopped"), resume=True)
    return root, full, stopped, resumed


def test_resumed_run_equals_the_uninterrupted_one(runs):
    root, full, stopped, resumed = runs
    assert [r["update"] for r in stopped] == list(range(1, 7))
    got = read(root / "resume" / "stopped" / "metrics.jsonl")
    want = read(root / "resume" / "full" / "metrics.jsonl")
    assert [r["update"] for r in got] == list(range(1, 12))  # one line per update: no gap, no repeat
    assert without_timing(got) == without_timing(want)
    assert int(resumed.state.step) == 11 and got[6]["approx_kl"] > 0  # it trained on after the resume
    same = jax.tree.map(lambda a, b: np.array_equal(np.asarray(a), np.asarray(b)), full.state, resumed.state)
    assert all(jax.tree.leaves(same)), same
    assert resumed.env_steps == full.env_steps == 4 * (1 + 4 * 11)  # each env's first reset row counts too
    assert got[-1]["time"] >= got[5]["time"]  # the clock continues from the checkpoint's


def test_resume_refusals_change_nothing(runs):
    root = runs[0]
    folder = root / "resume" / "full"
    before = snapshot(folder)
    cases = {
        # a finished run, launched again without --resume
        "--resume": (parity(root, trial="full"), False),
        # the finished run cannot grow without a larger total_env_steps
        "already reached total_env_steps": (parity(root, trial="full"), True),
        # a different config: every difference named
        "algo.gamma: 0.99 -> 0.9": (parity(root, trial="full", total_env_steps=400,
                                           algo=PPOConfig(num_steps=4, hidden_sizes=(16,), gamma=0.9,
                                                          normalize_obs=True, normalize_reward=True)), True),
        # nothing to resume from
        "holds no checkpoint": (parity(root, trial="empty"), True),
    }
    (root / "resume" / "empty").mkdir()
    for expected, (cfg, resume) in cases.items():
        found = problems(cfg, resume=resume)
        assert len(found) == 1 and expected in found[0], found
        with pytest.raises(RunFolderInUse):
            claim(cfg, resume=resume)
    assert "algo.normalize_reward" not in problems(cases["algo.gamma: 0.99 -> 0.9"][0], resume=True)[0]
    assert snapshot(folder) == before
    assert list((root / "resume" / "empty").iterdir()) == []
    # the allowed keys may change: a longer run of the finished trial is accepted
    assert problems(parity(root, trial="full", total_env_steps=4 * 4 * 20, timeout_seconds=60.0), resume=True) == []


def test_cli_resume_needs_a_trial_and_names_the_fix(runs, tmp_path):
    parser = make_parser("launch", "")
    with pytest.raises(Exception, match="-f TRIAL"):
        resolve(parser.parse_intermixed_args(["configs/cartpole_ppo.py", "--resume"]))
    args = parser.parse_intermixed_args(["configs/cartpole_ppo.py", "-f", "nothing-here", "--resume",
                                         f"log.run_root={tmp_path}"])
    with pytest.raises(Exception, match="does not exist"):
        resolve(args)
    assert not (tmp_path / "cartpole_ppo").exists()


def test_metrics_after_the_checkpoint_are_moved_aside(tmp_path):
    # a crash after update 5 with checkpoints every 3: lines 4 and 5 would repeat after the resume
    cfg = parity(tmp_path, trial="crash")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(metrics.MetricsLogger, "write", stop_after(5))
        mp.setattr(CheckpointConfig, "final", False)  # the crash writes no final checkpoint
        with pytest.raises(KeyboardInterrupt):
            train(dataclasses.replace(cfg, checkpoint=CheckpointConfig(every_updates=3, final=False)))
    folder = Path(cfg.run_dir)
    assert [r["update"] for r in read(folder / "metrics.jsonl")] == [1, 2, 3, 4, 5]
    cfg = dataclasses.replace(cfg, checkpoint=CheckpointConfig(every_updates=3, final=False))
    with open(folder / "metrics.jsonl", "a") as f:
        f.write('{"update": 6, "env_st')  # torn by the crash
    claim(cfg, resume=True)
    assert [r["update"] for r in read(folder / "metrics.jsonl")] == [1, 2, 3]
    moved = (folder / "metrics.discarded.jsonl").read_text().splitlines()
    assert [json.loads(line)["update"] for line in moved[:2]] == [4, 5] and moved[2].startswith('{"update": 6')


def test_return_accumulator_follows_its_env_in_any_order():
    """Reward normalisation's running return is kept per env, whatever order async batches arrive in."""
    from srljax.types import EnvSpec

    spec = EnvSpec(id="x", obs_shape=(1,), obs_dtype="float32", action_kind="discrete", num_actions=2,
                   num_envs=3, batch_size=2)
    builder = SegmentBuilder(spec, num_steps=8, extras_spec={}, return_gamma=0.5)
    rng = np.random.default_rng(0)
    want, after_done = np.zeros(3), np.ones(3, bool)
    for _ in range(12):
        ids = rng.choice(3, 2, replace=False)
        reward = rng.normal(size=2).astype(np.float32)
        done = rng.random(2) < 0.2
        ts = TimeStep(obs=np.zeros((2, 1), np.float32), reward=reward, terminated=done, truncated=np.zeros(2, bool),
                      env_id=ids.astype(np.int32), episode_return=np.full(2, np.nan, np.float32),
                      episode_length=np.zeros(2, np.int32))
        for i, env in enumerate(ids):
            want[env] = 0.0 if after_done[env] else want[env] * 0.5 + reward[i]
            after_done[env] = done[i]
        builder.add(ts, np.zeros(2, np.int32), {}, 0)
        state = builder.state()
        rows = state["pos"] - 1
        np.testing.assert_allclose(state[f"rows/extras/{RETURN_ACC}"][rows, np.arange(3)][ids], want[ids], rtol=1e-6)


@pytest.mark.skipif(os.environ.get("SRLJAX_SKIP_CARTPOLE") == "1", reason="opt-out")
def test_cartpole_resume_cuts_episodes_and_continues(tmp_path):
    """envpool CartPole stopped mid-episode: the resumed run marks the cut rows truncated, keeps the
    counters and the act key, and trains on."""
    cfg = Experiment(name="cp", trial="t", total_env_steps=8 * 32 * 6, env=EnvConfig(num_envs=8),
                     algo=PPOConfig(num_steps=32), log=LogConfig(run_root=str(tmp_path), wandb="disabled",
                                                                 progress="lines"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(metrics.MetricsLogger, "write", stop_after(3))
        with pytest.raises(KeyboardInterrupt):
            train(cfg)
    resumed = train(cfg, resume=True)
    records = read(Path(cfg.run_dir) / "metrics.jsonl")
    assert [r["update"] for r in records] == [1, 2, 3, 4, 5, 6]
    steps = [r["env_steps"] for r in records]
    # counted on from the checkpoint: 256 rows per update (the first batch also holds the 8 rows
    # each column starts with; after the resume, the recreated envs' reset rows fill their second rows)
    assert steps[0] == 256 + 8 and np.diff(steps).tolist() == [256] * 5
    assert records[3]["episodes"] >= records[2]["episodes"]  # the window and its count carried over
    assert resumed.env_steps == steps[-1]


@pytest.mark.slow
def test_distributed_cartpole_stopped_with_sigterm_resumes_and_learns(tmp_path):
    """The acceptance run: CartPole distributed stopped by SIGTERM at ~40% of its steps, resumed with
    ``--resume``: it reaches >= 475, and every env step is counted once (the counters continue)."""
    import signal
    import subprocess
    import sys
    import time

    cmd = [sys.executable, "-m", "launch.local", "configs/cartpole_ppo_distributed.py", "-f", "t",
           f"log.run_root={tmp_path}", "log.wandb=disabled", "log.progress=lines", "checkpoint.every_updates=10"]
    metrics_path = tmp_path / "cartpole_ppo_distributed" / "t" / "metrics.jsonl"
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        lines = metrics_path.read_text().splitlines() if metrics_path.exists() else []
        if lines and json.loads(lines[-1])["env_steps"] >= 200_000:  # 40% of 500k
            break
        time.sleep(1)
    first.send_signal(signal.SIGTERM)
    out, _ = first.communicate(timeout=120)
    assert first.returncode == 130, out
    stopped = read(metrics_path)
    second = subprocess.run([*cmd, "--resume"], capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    records = read(metrics_path)
    updates = [r["update"] for r in records]
    assert updates == list(range(1, updates[-1] + 1))  # continuous: no gap, no repeat
    resumed_at = max(u for u in updates if u <= stopped[-1]["update"] and u % 10 == 0 or u == stopped[-1]["update"])
    steps = [r["env_steps"] for r in records]
    batch = 8 * 128  # a resumed run counts on from its checkpoint, not from 0 and not twice
    # every update of the budget trained (500k // 1024 = 488, 499,712 steps; a segment that arrives before the last
    # line may add to the count, one that does not is not owed)
    assert updates[-1] == 500_000 // batch and steps == sorted(steps) and steps[-1] >= updates[-1] * batch
    assert steps[resumed_at] - steps[resumed_at - 1] <= 4 * batch, (resumed_at, steps[resumed_at - 2:resumed_at + 2])
    assert records[-1]["episode_return"] >= 475, records[-1]


def test_sigterm_during_an_update_lands_after_its_line_and_checkpoint(tmp_path, monkeypatch):
    """SIGTERM while update 5 runs (launch.local's handler, which raises KeyboardInterrupt): the stop waits
    until 5 is logged and checkpointed (``srljax.loops.signals.held``), so the newest checkpoint is the last
    line and ``--resume`` continues with 6: every update once, in order."""
    import signal

    from launch.local import _interrupt
    from srljax.learning.learner import Learner
    from srljax.storage.steps import steps

    cfg = parity(tmp_path, checkpoint=CheckpointConfig(every_updates=0))  # only the stop's final checkpoint
    step = Learner.step

    def step_then_term(self, batch):
        out = step(self, batch)
        if self.version == 5:
            os.kill(os.getpid(), signal.SIGTERM)  # lands while the update's line and checkpoint are owed
        return out

    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        monkeypatch.setattr(Learner, "step", step_then_term)
        with pytest.raises(KeyboardInterrupt):
            train(cfg)
        monkeypatch.undo()
        run_dir = Path(cfg.run_dir)
        assert [r["update"] for r in read(run_dir / "metrics.jsonl")] == [1, 2, 3, 4, 5]
        assert steps(run_dir / "checkpoints") == [5]
        assert signal.getsignal(signal.SIGTERM) is _interrupt  # the held section put it back
        train(cfg, resume=True)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert [r["update"] for r in read(run_dir / "metrics.jsonl")] == list(range(1, 12))


def test_cli_resume_starts_from_the_trials_own_config(runs, tmp_path, capsys):
    """``--resume`` with only a new ``total_env_steps``: the trial's own settings (here eval.every_updates and
    the PPO sizes its checkpoint was trained with, which the config file does not have) stay, the change is
    printed, and only the resumable keys may be changed."""
    import shutil

    root = tmp_path / "root"
    shutil.copytree(runs[0] / "resume" / "full", root / "resume" / "full")
    config = tmp_path / "resume.py"
    # the file now says another eval interval and timeout: a resume takes neither
    config.write_text("from tests.test_resume import parity\nfrom pathlib import Path\n\n"
                      f"def experiment():\n    return parity(Path({str(root)!r}), timeout_seconds=123.0)\n")
    parser = make_parser("launch", "")

    def cli(*extra):
        return resolve(parser.parse_intermixed_args([str(config), "-e", "resume", "-f", "full", "--resume",
                                                     f"log.run_root={root}", *extra]))

    saved = json.loads((root / "resume" / "full" / "config.json").read_text())
    cfg = cli("total_env_steps=400", "eval.every_updates=5")
    assert cfg.total_env_steps == 400 and cfg.eval.every_updates == 5
    assert cfg.timeout_seconds == saved["timeout_seconds"] != 123.0 and cfg.checkpoint.every_updates == 3
    printed = capsys.readouterr().out
    assert "resume: total_env_steps: 176 -> 400" in printed and "resume: eval.every_updates: 0 -> 5" in printed
    assert printed.count("resume: ") == 2  # only the keys given now
    with pytest.raises(Exception, match="algo.gamma: 0.99 -> 0.9"):
        cli("total_env_steps=400", "algo.gamma=0.9")
    # the resumed trial of the fixture kept the config it started with beside the new one
    stopped = runs[0] / "resume" / "stopped"
    assert json.loads((stopped / "config.1.json").read_text()) == json.loads((stopped / "config.json").read_text())


@pytest.mark.slow  # ~1 minute of two distributed runs; the config logic itself is tested above
def test_a_distributed_trial_resumed_with_only_a_new_budget_keeps_evaluating(tmp_path):
    """The researcher's case on the worker graph: eval.every_updates=2 from the command line, resumed with only
    total_env_steps (the file says no evaluation): the eval worker comes back and evaluates after the resume."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    common = ["configs/cartpole_ppo_distributed.py", "-e", "dres", "-f", "t", f"log.run_root={tmp_path}",
              "algo.num_steps=32", "trainer.num_minibatches=2", "trainer.update_epochs=1"]
    first = subprocess.run([sys.executable, "-m", "launch.local", *common, "log.wandb=disabled", "eval.every_updates=2",
                            "eval.episodes=2", "checkpoint.every_updates=2", "total_env_steps=2048"],
                           cwd=root, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr[-3000:]
    before = len((tmp_path / "dres" / "t" / "eval.jsonl").read_text().splitlines())
    again = subprocess.run([sys.executable, "-m", "launch.local", *common, "--resume", "total_env_steps=12288"],
                           cwd=root, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resume: total_env_steps: 2048 -> 12288" in again.stdout and again.stdout.count("resume: ") == 1, again.stdout
    run_dir = tmp_path / "dres" / "t"
    after = [json.loads(x) for x in (run_dir / "eval.jsonl").read_text().splitlines()][before:]
    # the eval worker came back (eval.every_updates=2 kept): a periodic evaluation after the resume, not only the
    # final one (how many depends on how fast 40 small updates go by against its episodes)
    assert any(not e.get("final") and e["version"] >= 8 for e in after), after
    assert after[-1]["version"] == 48 and after[-1].get("final"), after
    assert [json.loads(x)["update"] for x in (run_dir / "metrics.jsonl").read_text().splitlines()] == list(range(1, 49))
