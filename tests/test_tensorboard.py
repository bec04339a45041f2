"""``log.tensorboard=true``: event files TensorBoard's own reader reads back with metrics.jsonl's values (issue 44);
the console's progress lines off a terminal, at most one every ``log.progress_every_s``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from srljax.config import EnvConfig, Experiment, LogConfig, PPOConfig, apply_overrides, problems
from srljax.config.eval import EvalConfig
from srljax.evaluation.evaluator import read_evals
from srljax.telemetry.metrics import MetricsLogger
from srljax.telemetry.tensorboard import EventWriter, crc32c, number

event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator",
                                        reason="the test extra installs tensorboard: pip install -e '.[test]'")


def read_board(folder: Path):
    acc = event_accumulator.EventAccumulator(str(folder), size_guidance={event_accumulator.SCALARS: 0,
                                                                         event_accumulator.TENSORS: 0})
    acc.Reload()
    return acc


def test_crc32c_is_castagnolis():
    assert crc32c(b"123456789") == 0xE3069283  # the standard check value
    assert crc32c(b"") == 0


def test_a_single_process_run_writes_every_metrics_line_eval_and_the_config(tmp_path):
    from srljax.loops.train import train

    cfg = Experiment(name="tb", trial="t", total_env_steps=6 * 4 * 32, env=EnvConfig(id="CartPole-v1", num_envs=4),
                     algo=PPOConfig(num_steps=32), eval=EvalConfig(every_updates=3, episodes=2, num_envs=2),
                     log=LogConfig(run_root=str(tmp_path), wandb="disabled", progress="lines", tensorboard=True,
                                   prometheus_port=-1))
    train(cfg)
    run = Path(cfg.run_dir)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    board = read_board(run / "tensorboard")
    keys = {k for row in rows for k, v in row.items() if number(v) is not None}
    assert {"episode_return", "sps", "update", "env_steps"} <= keys and set(board.Tags()["scalars"]) == keys
    for key in keys:
        logged = [(r["env_steps"], float(r[key])) for r in rows if number(r.get(key)) is not None]
        events = [(e.step, e.value) for e in board.Scalars(key)]
        assert [s for s, _ in events] == [s for s, _ in logged], key
        assert [v for _, v in events] == pytest.approx([v for _, v in logged], rel=1e-6), key  # float32 there
    config = board.Tensors("config")[0].tensor_proto.string_val[0].decode()
    assert json.loads(config)["env"]["id"] == "CartPole-v1"
    evals = read_evals(run)
    board = read_board(run / "tensorboard" / "eval")
    assert len(evals) >= 2 and [e.value for e in board.Scalars("eval/mean")] == pytest.approx([e["mean"] for e in evals])
    assert [e.value for e in board.Scalars("eval/version")] == [e["version"] for e in evals]


def test_a_populations_members_get_a_run_each_and_a_resumed_logger_a_new_file(tmp_path):
    cfg = Experiment(name="tb", trial="pop", log=LogConfig(run_root=str(tmp_path), wandb="disabled", progress="lines",
                                                           tensorboard=True, prometheus_port=-1))
    for _ in range(2):  # a resume: the second logger writes a file of its own beside the first
        logger = MetricsLogger(cfg, total=100)
        for step in (10, 20):
            for member in (0, 1):
                logger.write({"env_steps": step, "episode_return": 100.0 * member + step, "member": member})
        logger.close()
    board = Path(cfg.run_dir) / "tensorboard"
    assert len(list(board.glob("events.out.tfevents*"))) == 2  # the config, once per launch
    for member in (0, 1):
        assert len(list((board / f"member-{member}").glob("events.out.tfevents*"))) == 2
        returns = [(e.step, e.value) for e in read_board(board / f"member-{member}").Scalars("episode_return")]
        assert returns[-2:] == [(10, 100.0 * member + 10), (20, 100.0 * member + 20)]


def test_a_killed_writer_leaves_every_event_written_so_far(tmp_path):
    writer = EventWriter(tmp_path)
    writer.scalars({"x": 1.0, "name": "not a number", "loss": "nan"}, step=3)
    # not closed: each event is flushed as it is written
    board = read_board(tmp_path)
    assert [(e.step, e.value) for e in board.Scalars("x")] == [(3, 1.0)]
    assert set(board.Tags()["scalars"]) == {"x", "loss"}


def test_progress_lines_off_a_terminal_come_every_few_seconds_and_metrics_keep_every_update(tmp_path, capsys):
    for every, printed in ((3600.0, 2), (0.0, 50)):  # the first and the last; or every line
        cfg = Experiment(name="p", trial=f"t{every:g}", log=LogConfig(run_root=str(tmp_path), wandb="disabled",
                                                                     progress="lines", progress_every_s=every,
                                                                     prometheus_port=-1))
        logger = MetricsLogger(cfg, total=50 * 128)
        for update in range(1, 51):
            logger.write({"update": update, "env_steps": 128 * update, "sps": 1000.0})
        logger.close()
        lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith(f"[p/t{every:g}]")]
        assert len(lines) == printed, lines
        assert lines[0].startswith(f"[p/t{every:g}] 128/6,400 steps") and "6,400/6,400 steps" in lines[-1]
        assert len((Path(cfg.run_dir) / "metrics.jsonl").read_text().splitlines()) == 50


def test_progress_every_s_is_checked():
    cfg = apply_overrides(Experiment(), ["log.progress_every_s=-1"])
    assert any("log.progress_every_s=-1" in p for p in problems(cfg))
