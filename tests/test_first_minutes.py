"""The first minutes after the README's first command (issue 44): a CartPole run without evaluation, then
``launch.play RUN_DIR`` (its newest checkpoint, saying so) and ``launch.status RUN_DIR`` (finished, with its
result line), and ``launch.status`` of the experiment's folder."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from launch import local, play, status
from launch.cli import run_cli
from srljax.config import Experiment, to_dict


def test_play_and_status_take_the_run_folder_of_a_run_without_evaluation(tmp_path, capsys):
    handler = signal.getsignal(signal.SIGTERM)
    try:  # the README's command, shortened: python -m launch.local configs/cartpole_ppo.py
        rc = run_cli(local.main, ["configs/cartpole_ppo.py", "-f", "first", "total_env_steps=2048",
                                  f"log.run_root={tmp_path}", "log.progress=lines", "log.prometheus_port=-1"],
                     "python -m launch.local", "")
    finally:
        signal.signal(signal.SIGTERM, handler)
    assert rc == 0
    run_dir = tmp_path / "cartpole_ppo" / "first"
    assert not (run_dir / "best").exists()  # no evaluation in the default config
    capsys.readouterr()
    assert play.main([str(run_dir), "--episodes", "2"]) == 0
    out = capsys.readouterr().out
    assert "no best checkpoint" in out and "playing the newest checkpoint instead" in out, out
    assert "version 2 (latest), 2 episodes of CartPole-v1" in out and "returns: " in out, out  # 2048 / (8 x 128)
    assert play.main([str(run_dir), "--checkpoint", "best"]) == 2  # asked for by name: still refused, saying why
    assert "play --checkpoint latest instead" in capsys.readouterr().err

    assert status.main([str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("cartpole_ppo/first: ended, finished (done, exit code 0)") and "last metrics line: 2 updates, 2,0" \
        in out and "recent mean episode return" in out, out
    assert json.loads((run_dir / "status.json").read_text())["reason"] == "done"
    assert status.main([str(run_dir.parent)]) == 0  # the experiment's folder: a line per trial
    assert capsys.readouterr().out.startswith("first: ended, finished (done")
    assert status.main(["-e", "cartpole_ppo", "--run-root", str(tmp_path)]) == 0
    assert "running or stopped without a status" not in capsys.readouterr().out


def test_a_trial_without_status_whose_metrics_reached_the_end_reads_as_finished(tmp_path, capsys):
    cfg = Experiment(name="nb", trial="t", total_env_steps=4096)  # e.g. srljax.train(cfg) in a notebook
    run_dir = tmp_path / "nb" / "t"
    run_dir.mkdir(parents=True)
    (run_dir / "config.json").write_text(json.dumps(to_dict(cfg)))
    (run_dir / "metrics.jsonl").write_text(json.dumps({"update": cfg.num_updates - 1, "env_steps": 2048}) + "\n")
    assert status.main(["-e", "nb", "--run-root", str(tmp_path)]) == 0
    assert "running or stopped without a status" in capsys.readouterr().out  # not there yet
    with (run_dir / "metrics.jsonl").open("a") as f:
        f.write(json.dumps({"update": cfg.num_updates, "env_steps": 4096, "episode_return": 42.0}) + "\n")
    assert status.main([str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "ended, finished (its metrics reached the last update" in out and "return 42.0" in out, out


def test_status_says_what_to_give_it(tmp_path, capsys):
    assert status.main([str(tmp_path / "nowhere")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    try:
        status.main([])
    except SystemExit as stop:
        assert stop.code == 2
    assert "give a run folder" in capsys.readouterr().err
    assert Path(tmp_path).is_dir()
