"""``python -m launch.push RUN_DIR --repo USER/NAME`` (issue 44): a folder with a model card and the checkpoint that
``launch.play`` plays, reproducing the recorded evaluation; nothing uploaded unless asked (no network here)."""

from __future__ import annotations

import json
import signal

from launch import local, play, push
from launch.cli import run_cli
from srljax.evaluation.evaluator import read_evals


def train(tmp_path, *overrides: str):
    handler = signal.getsignal(signal.SIGTERM)
    try:
        assert run_cli(local.main, ["configs/cartpole_ppo.py", "-f", "t", "total_env_steps=4096", "algo.num_steps=64",
                                    f"log.run_root={tmp_path / 'runs'}", "log.progress=lines",
                                    "log.prometheus_port=-1", *overrides], "python -m launch.local", "") == 0
    finally:
        signal.signal(signal.SIGTERM, handler)
    return tmp_path / "runs" / "cartpole_ppo" / "t"


def test_push_to_a_folder_then_play_it_reproduces_the_recorded_evaluation(tmp_path, capsys):
    run_dir = train(tmp_path, "eval.every_updates=4", "eval.episodes=3", "eval.num_envs=3")
    best = max(read_evals(run_dir), key=lambda e: e["mean"])
    out = tmp_path / "shared"
    assert push.main([str(run_dir), "--repo", "me/cartpole-ppo", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "not uploaded (add --upload" in said and f"python -m launch.play {out}" in said, said
    pushed = read_evals(out)
    assert len(pushed) == 1 and pushed[0]["version"] == best["version"] and pushed[0]["returns"] == best["returns"]
    card = (out / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: srljax\n") and "- CartPole-v1\n- ppo\n" in card
    assert f"value: {best['mean']:.2f} +/- {best['std']:.2f}" in card and "reproduced here." in card, card
    assert "python -m launch.play hf:me/cartpole-ppo" in card and "experiment.py" in card
    assert (out / "curve.png").stat().st_size > 1000 and "![episode return against env steps](curve.png)" in card
    video = pushed[0]["video"]  # CartPole renders: the card shows an evaluation episode
    assert (out / video).stat().st_size > 1000 and f"]({video})" in card
    assert json.loads((out / "config.json").read_text()) == json.loads((run_dir / "config.json").read_text())

    assert play.main([str(out)]) == 0  # a downloaded folder plays as a run folder does
    said = capsys.readouterr().out
    assert f"version {best['version']} (best), 3 episodes" in said and "-> reproduced" in said, said

    from srljax.config import load_file  # the card's "train it again": its experiment.py is a config file

    cfg = load_file(out / "experiment.py")
    assert cfg.total_env_steps == 4096 and cfg.eval.every_updates == 4


def test_a_run_without_evaluation_pushes_its_newest_checkpoint_and_bad_input_is_one_message(tmp_path, capsys):
    run_dir = train(tmp_path)
    assert push.main([str(run_dir), "--repo", "cartpole"]) == 2
    assert "give the model repo as USER/NAME" in capsys.readouterr().err
    out = run_dir / "hub" / "cartpole-ppo"
    assert push.main([str(run_dir), "--repo", "me/cartpole-ppo", "--no-video"]) == 0  # default folder: RUN_DIR/hub/NAME
    assert "playing the newest checkpoint instead" in capsys.readouterr().out
    assert read_evals(out)[0]["version"] == 8 and "video" not in read_evals(out)[0]  # 4096 / (8 x 64): its last
    assert push.main([str(run_dir), "--repo", "me/cartpole-ppo"]) == 2  # the folder is not empty now
    assert "is not an empty folder" in capsys.readouterr().err
    assert play.main([str(out), "--episodes", "2"]) == 0
    assert "version 8 (best)" in capsys.readouterr().out


def test_hub_names_are_checked_before_any_download(capsys):
    assert play.main(["hf:justaname"]) == 2
    assert "give the model repo as hf:USER/NAME" in capsys.readouterr().err
