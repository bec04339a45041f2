"""``launch.status``: figures from two scrapes, and the sentence naming the bound, on synthetic metrics."""

from __future__ import annotations

import dataclasses

import pytest

from launch import status
from launch.status import ENV, INFERENCE, PARAMS, SAMPLES, UPDATE, diagnose, summarise

DT = 10.0


def worker(role: str, phases: dict[str, float] | None = None, rates: dict[str, float] | None = None,
           gauges: dict[str, float] | None = None) -> tuple[str, dict[str, float], dict[str, float], float]:
    """One worker's values at two scrapes DT apart, as ``srljax.telemetry.prometheus.values`` flattens them:
    ``phases`` as shares of wall time, ``rates`` per second, ``gauges`` as they are at the second scrape."""
    before = {"srljax_env_steps_total": 1e6, 'srljax_time_seconds_total{phase="wait/env"}': 500.0}
    after = dict(before)
    for phase, share in (phases or {}).items():
        key = f'srljax_time_seconds_total{{phase="{phase}"}}'
        after[key] = before.get(key, 0.0) + share * DT
    for counter, rate in (rates or {}).items():
        key = f"srljax_{counter}_total"
        after[key] = before.get(key, 0.0) + rate * DT
    after.update(gauges or {})
    return role, before, after, DT


def trial(actor: dict[str, float], trainer_update: float, policy_act: float | None = None,
          buffer: dict[str, float] | None = None):
    scrapes = [worker("actor", actor, {"env_steps": 400.0, "segments": 2.0}) for _ in range(2)]
    scrapes.append(worker("trainer", {"compute/update": trainer_update, "wait/samples_or_update": 1 - trainer_update},
                          {"updates": 0.5, "env_steps": 800.0},
                          {"srljax_queue_pending_columns": 3.0, 'srljax_time_update_s{stat="p50"}': 1.9}))
    if policy_act is not None:
        scrapes.append(worker("policy", {"compute/act": policy_act, "wait/requests": 1 - policy_act}, {"rows": 800.0},
                              {'srljax_batch_fill{stat="mean"}': 0.5}))
    if buffer is not None:
        scrapes.append(worker("buffer", buffer, {"segments": 4.0}))
    return summarise(scrapes)


CASES = {
    UPDATE: (trial({"wait/lag_limit": 0.55, "wait/push": 0.2, "wait/env": 0.15}, trainer_update=0.93), "93%"),
    ENV: (trial({"wait/env": 0.8, "wait/inference": 0.1}, trainer_update=0.3, policy_act=0.2), "80%"),
    INFERENCE: (trial({"wait/inference": 0.7, "wait/env": 0.2}, trainer_update=0.3, policy_act=0.4), "70%"),
    SAMPLES: (trial({"wait/push": 0.6, "wait/env": 0.2}, trainer_update=0.2, buffer={"wait/push": 0.7}), "60%"),
    PARAMS: (trial({"wait/lag_limit": 0.6, "wait/env": 0.3}, trainer_update=0.2), "60%"),
}


@pytest.mark.parametrize("cause", list(CASES))
def test_the_sentence_names_the_bound_with_its_figures(cause):
    roles, figure = CASES[cause]
    diagnosis = diagnose(roles)
    assert diagnosis.cause == cause, diagnosis.sentence
    assert diagnosis.sentence.startswith(f"Bound by {cause}: ")
    assert figure in diagnosis.sentence, diagnosis.sentence


def test_saturated_policy_workers_are_inference_even_when_actors_wait_on_envs():
    roles = trial({"wait/env": 0.5, "wait/inference": 0.4}, trainer_update=0.3, policy_act=0.9)
    diagnosis = diagnose(roles)
    assert diagnosis.cause == INFERENCE and "90%" in diagnosis.sentence, diagnosis.sentence


def test_inline_actors_that_spend_their_time_acting_are_inference_bound():
    roles = trial({"compute/act": 0.6, "wait/env": 0.3}, trainer_update=0.3)
    assert diagnose(roles).cause == INFERENCE


def test_summarise_turns_two_scrapes_into_rates_shares_and_busy_fractions():
    roles = trial({"wait/env": 0.6, "wait/inference": 0.3}, trainer_update=0.8, policy_act=0.25)
    actor, trainer, policy = roles["actor"], roles["trainer"], roles["policy"]
    assert actor.count == 2
    assert actor.throughput["env_steps"] == pytest.approx(800.0)  # summed over the two actors
    assert actor.shares["wait/inference"] == pytest.approx(0.3)  # a mean share, not a sum
    assert actor.shares["wait/env"] == pytest.approx(0.6)  # counted from the first scrape, not since the start
    assert actor.busy == pytest.approx(0.7)  # not waiting on another worker (env stepping is its work)
    assert trainer.busy == pytest.approx(0.8) and trainer.throughput["updates"] == pytest.approx(0.5)
    assert trainer.queues == {"pending_columns": 3.0} and trainer.figures["update s p50"] == 1.9
    assert policy.busy == pytest.approx(0.25) and policy.figures["batch fill"] == 0.5


def test_the_command_says_why_when_a_trial_has_no_targets_file(tmp_path, capsys):
    assert status.main(["-e", "exp", "-f", "t0", "--run-root", str(tmp_path)]) == 1
    assert "prometheus_targets.json" in capsys.readouterr().err


def test_an_ended_trial_is_read_from_its_status_and_e_alone_lists_the_trials(tmp_path, capsys):
    import json
    import os

    exp = tmp_path / "exp"
    done, again, fresh = exp / "done", exp / "again", exp / "fresh"
    for d in (done, again, fresh):
        d.mkdir(parents=True)
    (done / "prometheus_targets.json").write_text("[]")
    status_json = {"exit_code": 0, "reason": "done", "message": "done: {'env_steps': 4096}"}
    (done / "status.json").write_text(json.dumps(status_json))
    (done / "metrics.jsonl").write_text(json.dumps({"update": 16, "env_steps": 4096}) + "\n")
    # a resumed trial running again: its status.json is older than the targets its new start wrote
    (again / "status.json").write_text(json.dumps({**status_json, "exit_code": 1, "reason": "stalled"}))
    (again / "prometheus_targets.json").write_text("[]")
    os.utime(again / "status.json", (1, 1))
    assert status.main(["-e", "exp", "-f", "done", "--run-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "exp/done: ended, finished (done, exit code 0)" in out and "16 updates, 4,096 env steps" in out, out
    assert status.ended_status(again) is None  # scraped as a running trial, not reported as its old end
    assert status.main(["-e", "exp", "--run-root", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == ["again", "done", "fresh"], lines
    assert lines[2] == "fresh: no metrics yet" and lines[1].startswith("done: ended, finished (done")
    assert status.main(["-e", "nope", "--run-root", str(tmp_path)]) == 1


def test_every_bound_names_the_settings_that_move_it():
    from launch.status import CAUSES, FIXES, Diagnosis

    assert set(FIXES) == set(CAUSES)
    assert "layout.num_policy_workers" in Diagnosis(status.INFERENCE, "").fix
    assert "trainer.max_policy_lag" in Diagnosis(status.PARAMS, "").fix


def test_progress_and_summary_lines_read_the_newest_metrics_line(tmp_path):
    """What a distributed launcher prints while its trial runs (every 10 s) and when it ends."""
    import json

    from srljax.config import Experiment
    from srljax.telemetry.progress import last_json_line, progress_line, summary_line

    cfg = Experiment(total_env_steps=10_240, log=dataclasses.replace(Experiment().log, run_root=str(tmp_path)))
    path = tmp_path / "metrics.jsonl"
    assert last_json_line(path) == {} and progress_line({}, cfg) == "no metrics line yet"
    lines = [{"update": u, "env_steps": 1024 * u, "episode_return": 20.0 + u, "sps": 2950.4, "lag/max": 2,
              "worker_restarts": 1 if u == 3 else 0} for u in (1, 2, 3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"update": 4, "env_st')  # torn last line
    record = last_json_line(path)
    assert record == lines[-1]  # a line being written is skipped, not taken for a record
    assert progress_line(record, cfg) == (f"update 3/{cfg.num_updates}, env steps 3,072/10,240, return 23.0, "
                                          "2,950 env steps/s, lag max 2, restarts 1")
    assert progress_line({**record, "episode_return": "nan"}, cfg).count("return") == 0
    assert summary_line(True, "done", record, cfg, 12.3) == (
        f"finished: done, 3,072 env steps, 3 updates, recent mean episode return 23.0, wall 12 s; "
        f"metrics in {cfg.run_dir / 'metrics.jsonl'}")


def test_the_cpu_picture_counts_each_process_once_per_host_and_says_when_a_host_is_full():
    def scrape(pid, cpu_before, cpu_after, cores=2.0):
        before = {"process_cpu_seconds_total": cpu_before, "srljax_process_id": pid, "srljax_host_cpus": cores}
        return before, {**before, "process_cpu_seconds_total": cpu_after}

    scrapes = [("actor", *scrape(11, 0.0, 4.5), 5.0, "10.0.0.2:9001"),
               ("actor", *scrape(12, 0.0, 5.0), 5.0, "10.0.0.2:9002"),
               ("trainer", *scrape(20, 0.0, 2.0, cores=8.0), 5.0, "10.0.0.1:9000"),
               ("policy", *scrape(20, 0.0, 2.0, cores=8.0), 5.0, "10.0.0.1:9003")]  # one process, two workers
    lines = status.cpu_picture(scrapes)
    assert lines[0] == "  cpu on 10.0.0.1: 0.40 of 8 cores used by the trial's processes (policy+trainer 0.40)"
    assert lines[1].startswith("  cpu on 10.0.0.2: 1.90 of 2 cores used by the trial's processes (actor 1.90) - "
                               "the host is full"), lines


def test_a_distributed_population_is_listed_by_its_members_metrics(tmp_path, capsys):
    # a distributed PBT population writes RUN_DIR/members/<i>/metrics.jsonl, no RUN_DIR/metrics.jsonl
    import dataclasses
    import json

    from srljax.config import load_file, write_json

    cfg = load_file("configs/cartpole_pbt_distributed.py")
    cfg = dataclasses.replace(cfg, trial="pop", log=dataclasses.replace(cfg.log, run_root="elsewhere"))
    run_dir = tmp_path / cfg.name / "pop"  # moved since it ran: the folder given counts, not log.run_root
    run_dir.mkdir(parents=True)
    write_json(cfg, run_dir / "config.json")
    for i in range(cfg.pbt.population):
        (run_dir / "members" / str(i)).mkdir(parents=True)
        (run_dir / "members" / str(i) / "metrics.jsonl").write_text(
            json.dumps({"update": 10 + i, "env_steps": 1000 * (i + 1), "episode_return": 100.0}) + "\n")
    (run_dir / "status.json").write_text(json.dumps({"exit_code": 0, "reason": "done", "message": "done"}))
    assert status.main(["-e", cfg.name, "--run-root", str(tmp_path)]) == 0
    total = sum(1000 * (i + 1) for i in range(cfg.pbt.population))
    out = capsys.readouterr().out
    assert f"pop: ended, finished (done, exit code 0): done; last metrics line: 10 updates, {total:,} env steps" in out, out


def test_several_policies_end_with_their_own_metrics_not_zero_steps(tmp_path):
    """A distributed run of several policies writes RUN_DIR/policies/<name>/metrics.jsonl, not RUN_DIR's own."""
    import json

    from srljax.config import load_file
    from srljax.config.tree import apply_overrides
    from srljax.telemetry.progress import trial_record

    cfg = apply_overrides(load_file("configs/lbf_mixed_inference.py"), [f"log.run_root={tmp_path}"])
    assert cfg.layout.mode == "distributed" and len(cfg.policies.training()) == 2
    for name, update, ret in zip(cfg.policies.training(), (7, 6), (0.5, 0.25)):
        folder = cfg.run_dir / "policies" / name
        folder.mkdir(parents=True)
        (folder / "metrics.jsonl").write_text(json.dumps({"update": update, "env_steps": 1000 * update,
                                                          "episode_return": ret}) + "\n")
    assert trial_record(cfg) == {"env_steps": 7000, "update": 6, "episode_return": 0.375}
