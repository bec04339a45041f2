"""PSRO as a worker graph (issue 41): the layout, the refusals, the version schedule, and the graph itself on Kuhn
poker in the threads backend (the population manager's meta-game, one trainer training the best responses in turn,
two actors drawing opponents from the meta-strategy)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from srljax.config import apply_overrides, load_file, problems
from srljax.config.psro import GraphSchedule, last_params_version
from srljax.layout import ACTOR, DIRECTIVES, PARAMS, POPULATION, TRAINER, build_layout, plan_of, worker_class

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "kuhn_psro.py"
LEDUC = ROOT / "configs" / "leduc_psro_distributed.py"
GRAPH = ["layout.mode=distributed", "layout.num_actors=2"]
# three best responses of 6 updates of 16 x 32 env steps each
TINY = [*GRAPH, "psro.iterations=3", "total_env_steps=9216", "log.wandb=disabled", "log.progress=lines", "log.log_every=1",
        "layout.stall_seconds=300"]


def graph(*overrides: str):
    return apply_overrides(load_file(CONFIG), [*GRAPH, *overrides])


def test_the_psro_graph_is_a_manager_a_trainer_and_actors():
    cfg = graph()
    assert not problems(cfg)
    layout = build_layout(cfg)
    assert (layout.count(TRAINER), layout.count(POPULATION), layout.count(ACTOR)) == (1, 1, 2)
    kinds = {(s.kind, s.src, s.dst) for s in layout.streams}
    assert {(PARAMS, TRAINER, POPULATION), (DIRECTIVES, POPULATION, TRAINER), (PARAMS, TRAINER, ACTOR)} <= kinds
    assert worker_class(cfg, POPULATION).__name__ == "PSROManager"
    assert plan_of(cfg).psro and plan_of(cfg).loop == "psro"
    assert not plan_of(apply_overrides(load_file(CONFIG), [])).psro  # one process: the loop, no graph
    from types import SimpleNamespace

    from srljax.system.training.parts import trainer_parts

    parts = trainer_parts(SimpleNamespace(plan=plan_of(cfg), index=0, cfg=cfg))
    assert (type(parts.learning).__name__, type(parts.publisher).__name__) == ("PSROLearning", "PSROPublisher")


def test_the_graph_numbers_each_best_responses_versions_after_a_fresh_start():
    cfg = graph()  # 320,000 env steps over 16 best responses: 20,000 each, 39 updates of 512
    s = GraphSchedule.of(cfg)
    assert (s.iterations, s.updates) == (16, 39)
    assert [(s.start(k), s.end(k)) for k in (0, 1, 2)] == [(0, 39), (40, 79), (80, 119)]
    assert s.last == last_params_version(cfg) == 16 * 40 - 1
    assert [s.response(v) for v in (0, 39, 40, 79, 80, s.last)] == [0, 0, 1, 1, 2, 15]
    assert last_params_version(apply_overrides(load_file(CONFIG), [])) == 625  # one process: num_updates


def test_what_the_graph_cannot_host_gets_one_clear_message_each():
    remote = problems(graph("layout.inference=remote", "layout.num_policy_workers=1"))
    assert any("layout.inference=remote" in p and "set layout.inference=inline" in p for p in remote), remote
    buffers = problems(graph("layout.num_buffer_workers=1"))
    assert any("set layout.num_buffer_workers=0" in p for p in buffers), buffers
    hosts = problems(graph("trainer.num_hosts=2"))
    assert any("trainer.num_hosts=2" in p and "set trainer.num_hosts=1" in p for p in hosts), hosts
    lockstep = problems(graph("layout.deterministic=true"))
    assert any("set layout.deterministic=false" in p for p in lockstep), lockstep


def test_resuming_psro_in_the_graph_is_refused(tmp_path):
    from srljax.storage.run_dir import problems as run_dir_problems

    found = run_dir_problems(graph(f"log.run_root={tmp_path}", "trial=t"), resume=True)
    assert len(found) == 1 and "resuming PSRO is not built" in found[0], found


def test_the_progress_line_and_the_trials_end_count_the_graphs_fresh_start_versions():
    """Best response k's versions are k (U + 1) .. k (U + 1) + U: the trainer's last metrics line is update
    ``GraphSchedule.last`` (20 here, 3 x 6 updates + 2 fresh starts), not ``num_updates`` (18), and its env steps
    (the samples stepped, the dropped ones too) pass ``total_env_steps`` long before it."""
    from srljax.config.psro import ended_by_metrics
    from srljax.telemetry.progress import progress_line

    cfg = graph(*TINY[len(GRAPH):])
    assert (cfg.num_updates, last_params_version(cfg)) == (18, 20)
    line = progress_line({"update": 14, "env_steps": 11_264, "iteration": 3.0, "episode_return": 0.25}, cfg)
    assert line.startswith("update 14/20, best response 3/3, env steps 11,264, return 0.2"), line
    assert not ended_by_metrics(cfg, 14, 11_264) and ended_by_metrics(cfg, 20, 12_000)  # 11,264 > 9,216: not the end
    one = apply_overrides(load_file(CONFIG), TINY[len(GRAPH):])  # one process: as before
    assert progress_line({"update": 3, "env_steps": 1536}, one).startswith("update 3/18, env steps 1,536/9,216")
    assert ended_by_metrics(one, 18, 9216) and ended_by_metrics(one, 3, 9216) and not ended_by_metrics(one, 17, 9000)


def test_psro_runs_as_a_worker_graph_on_kuhn_poker(tmp_path, capsys):
    """Three best responses of 6 updates through the graph (threads backend; about a minute on the loaded 2-core
    box): psro.jsonl as the single-process loop writes it, the exploitability down from the untrained network's,
    each best response started fresh by the trainer on the manager's word, the actors' opponents drawn from the
    population's files."""
    from launch.threads import run_threads
    from srljax.population.psro import read_lines

    cfg = graph(*TINY[len(GRAPH):], f"log.run_root={tmp_path}", "trial=t")
    result = run_threads(cfg, verbose=True)  # the controller's console lines too
    assert result.exit_code == 0, result.message
    shown = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[progress] update")]
    assert shown, "the controller printed no progress line"
    for line in shown:  # the controller's console line: versions of 20, never "update 14/18"
        done, total = (int(x) for x in line.split()[2].rstrip(",").split("/"))
        assert total == 20 and done <= total, line
    run = Path(cfg.run_dir)
    lines = read_lines(run)
    assert [x["iteration"] for x in lines] == [0, 1, 2, 3] and [x["policies"] for x in lines] == [1, 2, 3, 4]
    assert [x["updates"] for x in lines] == [0, 6, 12, 18] and [x["env_steps"] for x in lines] == [0, 3072, 6144, 9216]
    assert [x["version"] for x in lines] == [0, 6, 13, 20]  # a version of its own for each fresh start
    assert lines[0]["exploitability"] == pytest.approx(0.458, abs=0.01)  # the untrained network: near uniform
    assert min(x["exploitability"] for x in lines[1:]) < lines[0]["exploitability"] - 0.05, lines
    for x in lines:
        payoff = np.array(x["payoff"])
        assert payoff.shape == (x["policies"],) * 2
        np.testing.assert_allclose(payoff, -payoff.T, atol=1e-5)
        assert len(x["meta_strategy"]) == x["policies"] and sum(x["meta_strategy"]) == pytest.approx(1, abs=1e-4)
    assert all(-3 <= x["br_score"] <= 3 for x in lines[1:])
    assert sorted(p.name for p in (run / "psro" / "policies").iterdir()) == [f"p{i}.msgpack" for i in range(4)]
    assert (run / "psro" / "exploitability.png").exists()
    metrics = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert {int(m["iteration"]) for m in metrics} == {1, 2, 3} and metrics[-1]["update"] == 20
    assert all(0 < m["br_update"] <= 6 for m in metrics)
    assert metrics[-1]["dropped_stale_columns"] > 0  # what the actors acted before a best response's fresh start
    for i in (0, 1):  # each actor drew population policies as opponents and read every table
        last = json.loads((run / "workers" / f"actor-{i}.jsonl").read_text().splitlines()[-1])
        assert last["psro/policy_loads"] >= 2 and last["psro/table_reads"] >= 3 and last["psro/games"] > 100, last


def test_the_leduc_graph_config_launches_and_its_manager_records_exploitability(tmp_path):
    """configs/leduc_psro_distributed.py shrunk to two best responses of 2 updates (8 envs per actor; threads
    backend): the manager's lines from the untrained network's 2.38 on, Leduc's payoff matrices, its gauge."""
    from launch.threads import run_threads
    from srljax.population.psro import read_lines

    cfg = load_file(LEDUC)
    assert not problems(cfg) and GraphSchedule.of(cfg) == GraphSchedule(19, 48) and cfg.env_steps_per_update == 1024
    assert plan_of(cfg).psro and build_layout(cfg).count(ACTOR) == 2
    cfg = apply_overrides(cfg, ["psro.iterations=2", "env.num_envs=8", "total_env_steps=1024", "log.wandb=disabled",
                                "log.progress=lines", "log.log_every=1", "layout.stall_seconds=300",
                                f"log.run_root={tmp_path}", "trial=t"])
    assert GraphSchedule.of(cfg) == GraphSchedule(2, 2)
    result = run_threads(cfg)
    assert result.exit_code == 0, result.message
    run = Path(cfg.run_dir)
    lines = read_lines(run)
    assert [x["iteration"] for x in lines] == [0, 1, 2] and [x["version"] for x in lines] == [0, 2, 5]
    assert lines[0]["exploitability"] == pytest.approx(2.38, abs=0.02)  # the untrained network: near uniform
    for x in lines:
        assert 0 < x["exploitability"] < 5
        payoff = np.array(x["payoff"])
        assert payoff.shape == (x["policies"],) * 2
        np.testing.assert_allclose(payoff, -payoff.T, atol=1e-5)
    manager = json.loads((run / "workers" / "population-0.jsonl").read_text().splitlines()[-1])
    assert manager["exploitability"] == pytest.approx(lines[-1]["exploitability"]) and manager["best_responses"] == 2
