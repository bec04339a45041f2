"""The layout planner's arithmetic (srljax/sizing.py) on hand-made unit costs, and launch.plan's command line."""

from __future__ import annotations

import json
import math
import time

import pytest

from launch.plan import main as plan_main
from srljax.config import apply_overrides, load_file
from srljax.prepare import problems
from srljax.sizing import (
    Choice,
    Cluster,
    Costs,
    actors_per_core,
    overrides,
    placement,
    predict,
    rank,
    role_cpu,
)

T = 32


def costs_dict(env_wall=0.001, env_cpu=0.001, act_cpu=0.0002, update_per_sample=1e-6, recv=1e-7, send=1e-7,
               counts=(4, 16, 64), inference=True) -> dict:
    """Unit costs of a made-up config: an env step of E envs costs ``E x env_cpu / 16`` CPU and at least
    ``env_wall`` wall; the act costs ``act_cpu`` plus a little per row."""
    env = {str(e): {"wall_s": max(env_wall, env_cpu * e / 16), "cpu_s": env_cpu * e / 16} for e in counts}
    act = {str(n): {"wall_s": act_cpu + 1e-6 * n, "cpu_s": act_cpu + 1e-6 * n} for n in (*counts, 256, 1024)}
    actor = {k: {"wall_s": env[k]["wall_s"] + act[k]["wall_s"], "cpu_s": env[k]["cpu_s"] + act[k]["cpu_s"]}
             for k in env}
    out = {"num_steps": T, "env": env, "actor": actor, "act": act,
           "update": [{"samples": n, "wall_s": 0.002 + update_per_sample * n, "cpu_s": 0.002 + update_per_sample * n}
                      for n in (1024, 4096)],
           "sample_bytes_per_step": 40.0,
           "ingest": {"recv_cpu_s_per_sample": recv, "send_cpu_s_per_sample": send, "samples_per_s": 1e7}}
    if inference:
        out["inference"] = {str(e): {"rtt_s": 2e-4, "client_cpu_s": 5e-5, "server_cpu_s": 5e-5} for e in counts}
    return out


def test_update_cost_interpolates_and_extends_the_measured_line():
    costs = Costs.from_dict(costs_dict(update_per_sample=1e-6))
    assert costs.update_cost(2048).wall_s == pytest.approx(0.002 + 2048e-6)
    assert costs.update_cost(65536).wall_s == pytest.approx(0.002 + 65536e-6)  # beyond the largest: the same line
    assert costs.update_cost(16).wall_s == pytest.approx(0.002 + 16e-6)


def test_below_the_smallest_measured_batch_an_update_costs_at_least_its_share_of_that_batch():
    """Pong's update measured at 1,024 and 4,096 samples (3.7 s, 16.6 s): the line through them crosses zero at
    ~290 samples, which would make a 512-sample update 1.55 s; it costs at least half of 1,024's."""
    d = costs_dict()
    d["update"] = [{"samples": 1024, "wall_s": 3.7, "cpu_s": 4.9}, {"samples": 4096, "wall_s": 16.6, "cpu_s": 23.5}]
    costs = Costs.from_dict(d)
    assert costs.update_cost(512).wall_s == pytest.approx(3.7 / 2)
    assert costs.update_cost(512).cpu_s == pytest.approx(4.9 / 2)
    assert costs.update_cost(2048).wall_s == pytest.approx(3.7 + 12.9 / 3)  # between the points: the line


def test_actor_bound_layout_predicts_actors_times_envs_over_the_step():
    costs = Costs.from_dict(costs_dict(env_wall=0.010, env_cpu=0.0001))  # a slow env that barely uses the CPU
    choice = Choice(actors=3, envs=16)
    p = predict(costs, choice, Cluster(1, 64))
    step = costs.actor[16].wall_s + 16 * 1e-7  # the loop plus the segment's send
    assert p.bound == "actors"
    assert p.sps == pytest.approx(3 * 16 / step)


def test_trainer_bound_layout_predicts_the_batch_over_update_plus_ingest():
    costs = Costs.from_dict(costs_dict(env_wall=1e-4, env_cpu=1e-5, update_per_sample=1e-4))
    choice = Choice(actors=8, envs=64)
    n = 8 * 64 * T
    p = predict(costs, choice, Cluster(1, 1000))
    assert p.bound == "trainer"
    assert p.sps == pytest.approx(n / (0.002 + 1e-4 * n + 1e-7 * n))


def test_cpu_bound_on_one_node_is_the_cores_over_cpu_per_step():
    costs = Costs.from_dict(costs_dict(env_wall=0.001, env_cpu=0.001))
    choice = Choice(actors=16, envs=16)
    p = predict(costs, choice, Cluster(1, 2))
    per_step = sum(role_cpu(costs, choice).values())
    fixed = (16 + 1 + 1) * costs.worker_cores  # every worker process and the controller, whatever the rate
    assert p.bound == "cpu node 0"
    assert p.sps == pytest.approx((2 - fixed) / per_step)
    assert predict(costs, choice, Cluster(1, 4)).sps == pytest.approx((4 - fixed) / per_step)
    idle = Costs.from_dict({**costs_dict(env_wall=0.001, env_cpu=0.001), "worker_cores": 0.0})
    assert predict(idle, choice, Cluster(1, 4)).sps == pytest.approx(2 * predict(idle, choice, Cluster(1, 2)).sps)


def test_a_slow_env_packs_several_actors_per_core_and_the_plan_uses_them():
    waiting = Costs.from_dict(costs_dict(env_wall=0.020, env_cpu=0.0001))
    busy = Costs.from_dict(costs_dict(env_wall=0.001, env_cpu=0.001))
    assert actors_per_core(waiting, 16) > 10
    assert actors_per_core(busy, 16) == 1
    slow = rank(waiting, Cluster(1, 2))[0]
    assert slow.choice.actors > 2  # more actors than cores: they wait on the env, not on each other
    assert rank(waiting, Cluster(1, 8))[0].prediction.sps > slow.prediction.sps


def test_the_best_layout_is_the_fastest_and_the_rest_follow_in_order():
    costs = Costs.from_dict(costs_dict(env_wall=0.005, env_cpu=0.0005))
    ranked = rank(costs, Cluster(1, 4))
    fastest = max(s.prediction.sps for s in ranked)
    assert ranked[0].prediction.sps >= 0.97 * fastest
    rest = [s.prediction.sps for s in ranked[1:]]
    assert rest == sorted(rest, reverse=True)


def test_remote_inference_wins_when_batching_the_act_saves_most():
    # an act that costs 5 ms whatever the batch (a big network): one policy worker acting for every actor beats
    # every actor acting alone
    d = costs_dict(env_wall=0.001, env_cpu=0.0001, act_cpu=0.005)
    for k in d["actor"]:
        d["actor"][k] = {"wall_s": d["env"][k]["wall_s"] + 0.005, "cpu_s": d["env"][k]["cpu_s"] + 0.005}
    remote = rank(Costs.from_dict(d), Cluster(1, 8))[0]
    assert remote.choice.inference == "remote"
    cheap = rank(Costs.from_dict(costs_dict(env_wall=0.001, env_cpu=0.0001, act_cpu=1e-5)), Cluster(1, 8))[0]
    assert cheap.choice.inference == "inline"
    d.pop("inference")  # remote not measured: never planned
    assert all(s.choice.inference == "inline" for s in rank(Costs.from_dict(d), Cluster(1, 8)))


def test_placement_on_several_nodes_keeps_node_0_for_the_trainer_and_packs_actors():
    costs = Costs.from_dict(costs_dict(env_wall=0.001, env_cpu=0.001))
    cluster = Cluster(nodes=10, cores_per_node=8)
    loads = placement(Choice(actors=20, envs=16), costs, cluster)
    assert loads[0].roles == {"trainer": 1}
    counts = [load.roles.get("actor", 0) for load in loads]
    assert sum(counts) == 20
    assert counts[1:4] == [7, 7, 6] and counts[4:] == [0] * 6  # 8 per node hold them on 3 nodes
    assert "slurm.actor.nodes=3" in overrides(Choice(actors=20, envs=16), costs, cluster)


def test_lag_is_one_period_plus_the_update_capped_at_max_policy_lag():
    costs = Costs.from_dict(costs_dict(env_wall=0.050, env_cpu=0.0001, update_per_sample=1e-3))
    slow_update = predict(costs, Choice(actors=64, envs=64), Cluster(1, 64), max_policy_lag=8)
    assert slow_update.bound == "trainer" and slow_update.lag == pytest.approx(2.0, abs=0.01)  # acted, then waits
    assert predict(costs, Choice(actors=64, envs=64), Cluster(1, 64), max_policy_lag=1).lag == 1.0
    fast_update = predict(costs, Choice(actors=1, envs=4), Cluster(1, 64), max_policy_lag=8)
    assert fast_update.bound == "actors" and 1.0 < fast_update.lag < 1.1


def test_costs_missing_a_unit_name_it_and_the_fix():
    d = costs_dict()
    del d["update"]
    with pytest.raises(ValueError, match=r"lack update: run `python -m launch.plan CFG --measure`"):
        Costs.from_dict(d)


def test_planned_overrides_pass_the_config_checks():
    costs = Costs.from_dict(costs_dict())
    cfg = apply_overrides(load_file("configs/cartpole_ppo.py"), ["algo.num_steps=32"])
    best = rank(costs, Cluster(1, 2))[0]
    planned = apply_overrides(cfg, overrides(best.choice, costs, Cluster(1, 2)))
    assert planned.layout.num_actors == best.choice.actors
    assert planned.batch_envs == best.choice.actors * best.choice.envs
    assert problems(planned, "processes") == []


def test_plan_command_line(tmp_path, capsys):
    missing = tmp_path / "none.json"
    assert plan_main(["configs/cartpole_ppo.py", "--nodes", "1", "--cores-per-node", "2", "--costs", str(missing)]) == 2
    assert "run `python -m launch.plan CFG --measure`" in capsys.readouterr().err
    path = tmp_path / "costs.json"
    path.write_text(json.dumps(costs_dict(env_wall=0.010, env_cpu=0.0001)))
    out_cfg, out_json = tmp_path / "plan.py", tmp_path / "plan.json"
    argv = ["configs/cartpole_ppo.py", "algo.num_steps=32", "--nodes", "1", "--cores-per-node", "2", "--costs",
            str(path), "--write", str(out_cfg), "--json", str(out_json)]
    assert plan_main(argv) == 0
    printed = capsys.readouterr().out
    plan = json.loads(out_json.read_text())
    assert f"predicted: {plan['prediction']['sps']:,.0f} env steps/s" in printed
    assert "other jobs kept" not in printed  # no machine record: no note
    for busy, noted in ((0.3, False), (1.4, True)):
        path.write_text(json.dumps({**costs_dict(env_wall=0.010, env_cpu=0.0001),
                                    "machine": {"cores": 2, "other_cores": 0.1, "other_cores_end": busy}}))
        assert plan_main(argv) == 0
        assert ("other jobs kept 1.40 of the 2 cores busy" in capsys.readouterr().out) == noted
    cfg = load_file(out_cfg)  # the written config is a config the launchers take
    assert cfg.layout.mode == "distributed" and cfg.layout.num_actors == plan["choice"]["actors"]
    assert cfg.algo.num_steps == 32 and cfg.env.num_envs == plan["choice"]["envs"]
    assert problems(cfg, "processes") == []
    assert math.isclose(plan["prediction"]["sps"], min(plan["prediction"]["tiers"].values()) * plan["prediction"]["queueing"])
    assert plan_main(["configs/cartpole_ppo.py", "--nodes", "0", "--cores-per-node", "2", "--costs", str(path)]) == 2
    assert "--nodes 0" in capsys.readouterr().err


def test_status_puts_the_plans_prediction_for_a_running_trial_beside_its_live_rate(tmp_path):
    """A trial run from a written plan finds the unit costs it was planned from (the digest leaves out the settings
    the plan sets) and ``launch.status`` prints the plan's env steps/s and bound beside the trainer's live rate."""
    from launch import status
    from launch.plan import costs_path, predicted_for_run
    from srljax.config import write_json
    from tests.test_status import trial

    given = ["algo.num_steps=32", f"log.run_root={tmp_path}"]
    measured_cfg = apply_overrides(load_file("configs/cartpole_ppo.py"), given)
    path = costs_path(measured_cfg, "configs/cartpole_ppo.py")
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(costs_dict(env_wall=0.010, env_cpu=0.0001)))
    out_cfg, out_json = tmp_path / "plan.py", tmp_path / "plan.json"
    assert plan_main(["configs/cartpole_ppo.py", *given, "--nodes", "1", "--cores-per-node", "2",
                      "--write", str(out_cfg), "--json", str(out_json)]) == 0
    plan = json.loads(out_json.read_text())
    run_dir = tmp_path / "exp" / "t0"  # RUN_ROOT/experiment/trial, as the launchers lay it out
    planned = load_file(out_cfg)
    write_json(planned, run_dir / "config.json")
    pred, found, cluster = predicted_for_run(planned, run_dir, cores=2)
    assert found == path and cluster == Cluster(1, 2)
    assert pred.sps == pytest.approx(plan["prediction"]["sps"]) and pred.bound == plan["prediction"]["bound"]
    roles = trial({"wait/env": 0.8}, trainer_update=0.3)  # the trainer takes 800 env steps/s over the window
    line = " ".join(status.predicted_vs_live(run_dir, roles, cores=2))
    assert f"predicted {plan['prediction']['sps']:,.0f} env steps/s, bound by {plan['prediction']['bound']}" in line
    assert f"live 800 env steps/s at the trainer = {800 / plan['prediction']['sps']:.2f} of predicted" in line
    # another layout of the same settings is predicted for its own counts; other env settings have no costs
    other = apply_overrides(planned, ["layout.num_actors=1", "env.num_envs=16", "trainer.batch_envs=16",
                                      "layout.inference=inline"])
    assert predicted_for_run(other, run_dir, cores=2)[0].sps == pytest.approx(
        predict(Costs.from_dict(costs_dict(env_wall=0.010, env_cpu=0.0001)), Choice(1, 16), Cluster(1, 2),
                other.trainer.max_policy_lag).sps)
    write_json(apply_overrides(planned, ["env.options.max_episode_steps=100"]), run_dir / "config.json")
    line = " ".join(status.predicted_vs_live(run_dir, roles, cores=2))
    assert "live 800 env steps/s" in line and "no unit costs for these settings" in line and "--measure" in line


def test_a_sleeping_unit_is_timed_by_its_sleep_and_its_cpu_apart():
    """``_timed`` (launch/plan_measure.py): a unit that sleeps 5 ms keeps its 5 ms of wall time (less only what its
    thread waited for a CPU, never below the sleep) and almost none of it as CPU; a computing unit's CPU is counted."""
    import time

    from launch.plan_measure import _timed

    slept = _timed(lambda: time.sleep(0.005), 0.1)
    assert 0.005 <= slept["wall_s"] <= slept["wall_raw_s"] + 1e-9
    assert slept["cpu_s"] < 0.2 * slept["wall_s"]
    busy = _timed(lambda: sum(range(200_000)), 0.1)
    assert busy["cpu_s"] > 0.5 * busy["wall_s"] > 0


def test_plan_checks_cpu_window_ends_before_a_worker_exits():
    """``bench/scaling.steady_cpu`` (plan_check's "other jobs' cores"): a worker that exited by the sample that saw
    the last metrics line must not drop out of the run's CPU and be counted as another job's."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from scaling import steady_cpu

    # (time, metrics lines, CPU s by worker, machine busy CPU s): two workers at 0.5 core each, the machine at 1.5
    samples = [(t, 1 + t // 2, {"trainer-0": 0.5 * t, "actor-0": 0.5 * t}, 1.5 * t) for t in range(11)]
    samples.append((11, 7, {"trainer-0": 5.5}, 16.5))  # the last line: actor-0 has exited
    workers, others = steady_cpu(samples, 2, 7)
    assert workers == {"actor-0": 0.5, "trainer-0": 0.5}
    assert abs(others - 0.5) < 1e-9


def test_plan_checks_cpu_count_keeps_an_exited_process():
    """``bench/scaling.tree_cpu_s`` with ``seen``: a process of the run that has exited (a worker the controller
    restarted) still counts with its last reading, so a worker's CPU never goes down."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from scaling import tree_cpu_s

    child = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                              "while time.process_time() - t < 0.3: pass\nprint('done', flush=True)\ninput()"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "done"  # it has burned 0.3 s of CPU and waits
    names, seen = {}, {}
    alive = tree_cpu_s(os.getpid(), names, "", seen)
    forgetful = tree_cpu_s(os.getpid(), {}, "")
    child.communicate("")
    gone = tree_cpu_s(os.getpid(), names, "", seen)
    assert forgetful["launcher"] >= 0.3
    assert gone["launcher"] >= alive["launcher"] >= 0.3  # the exited child's CPU stays counted
    assert tree_cpu_s(os.getpid(), {}, "")["launcher"] < gone["launcher"] - 0.25  # without ``seen`` it is lost


def test_actors_sharing_cores_queue_as_the_finite_source_model_says():
    """``_cycles_per_s``: no more actors than cores never wait (every one cycles in think + demand); actors that never
    wait on anything keep every core busy; and at the knee a hand-solved case: 2 actors on 1 core, think = demand
    = 1 s: states 0, 1, 2 actors at the core weigh 1 : 2 : 2, so 1.2 are there on average and the other 0.8
    cycle per second, where the min() of the two bounds says 1."""
    from srljax.sizing import _cycles_per_s

    assert _cycles_per_s(3, 0.009, 0.001, 64) == pytest.approx(3 / 0.010)
    assert _cycles_per_s(8, 0.0, 0.001, 2) == pytest.approx(2 / 0.001)
    assert _cycles_per_s(2, 1.0, 1.0, 1) == pytest.approx(0.8)
    rates = [_cycles_per_s(n, 0.001, 0.0005, 2) for n in range(1, 40)]
    assert all(b >= a * (1 - 1e-9) for a, b in zip(rates, rates[1:]))  # more actors never slow the node down
    assert rates[-1] == pytest.approx(2 / 0.0005, rel=1e-3) and rates[5] < 0.97 * min(6 / 0.0015, 2 / 0.0005)


def test_a_layout_booked_to_its_cores_is_predicted_below_the_min_of_its_tiers_and_more_actors_pay():
    """Actors of 16 envs that wait 0.5 ms and compute 0.7 ms: on 2 cores the actor and CPU bounds meet near 3
    actors; there a woken actor often finds both cores taken, so the prediction is below both bounds, and 6
    actors, whose bounds' min() is hardly higher, are predicted well above 3."""
    costs = Costs.from_dict({**costs_dict(env_wall=0.001, env_cpu=0.0005), "worker_cores": 0.0})
    knee = predict(costs, Choice(actors=3, envs=16), Cluster(1, 2))
    assert knee.queueing < 0.9 and knee.sps == pytest.approx(min(knee.tiers.values()) * knee.queueing)
    alone = predict(costs, Choice(actors=1, envs=16), Cluster(1, 2))
    assert alone.queueing == pytest.approx(1.0, abs=1e-3)  # one actor on two cores never waits for one
    more = predict(costs, Choice(actors=6, envs=16), Cluster(1, 2))
    assert min(more.tiers.values()) < 1.1 * min(knee.tiers.values()) and more.sps > 1.18 * knee.sps


def test_the_real_actor_process_cpu_beyond_the_loop_is_added_to_every_actor_step():
    from srljax.sizing import actor_costs

    d = costs_dict(env_wall=0.001, env_cpu=0.0005)
    plain = Costs.from_dict(d)
    loop = plain.actor[16]
    real = Costs.from_dict({**d, "actor_process": {"16": {"wall_s": 0.002, "cpu_s": loop.cpu_s + 0.0003}}})
    assert real.actor_overhead_s(16) == pytest.approx(0.0003) and real.actor_overhead_s(64) == 0.0
    (w0, c0), (w1, c1) = actor_costs(plain, Choice(1, 16)), actor_costs(real, Choice(1, 16))
    assert w1 - w0 == pytest.approx(0.0003) and c1 - c0 == pytest.approx(0.0003)
    assert predict(real, Choice(4, 16), Cluster(1, 2)).sps < predict(plain, Choice(4, 16), Cluster(1, 2)).sps


def test_crowded_actors_cost_more_cpu_per_step_from_one_per_core_to_the_measured_crowd():
    """``Costs.crowding``: 1 with a core per actor or nothing measured; linear in actors per core up to the crowded
    run's (4 actors on 2 cores: 1.5x one actor's CPU per step), held beyond; the prediction of a crowded layout
    falls with it, and on several nodes the actors per core count only the actor nodes' cores."""
    from srljax.sizing import actor_costs, actor_density

    d = {**costs_dict(env_wall=0.001, env_cpu=0.0005), "worker_cores": 0.0}
    alone = Costs.from_dict(d).actor[16].cpu_s
    d["actor_process"] = {"16": {"wall_s": 0.002, "cpu_s": alone}}
    plain = Costs.from_dict(d)
    crowded = Costs.from_dict({**d, "actor_crowded": {"envs": 16, "actors": 4, "cores": 2, "cpu_s": 1.5 * alone,
                                                      "wall_s": 0.004, "steps": 1000}})
    assert plain.crowding(3.0) == 1.0 and crowded.crowding(1.0) == 1.0 and crowded.crowding(0.5) == 1.0
    assert crowded.crowding(1.5) == pytest.approx(1.25) and crowded.crowding(2.0) == pytest.approx(1.5)
    assert crowded.crowding(6.0) == pytest.approx(1.5)
    (w0, c0), (w1, c1) = actor_costs(crowded, Choice(4, 16)), actor_costs(crowded, Choice(4, 16), per_core=2.0)
    assert c1 - c0 == pytest.approx(0.5 * c0) and w1 - w0 == pytest.approx(c1 - c0)  # the extra CPU is wall too
    assert predict(crowded, Choice(1, 16), Cluster(1, 2)).sps == predict(plain, Choice(1, 16), Cluster(1, 2)).sps
    assert predict(crowded, Choice(6, 16), Cluster(1, 2)).sps < 0.85 * predict(plain, Choice(6, 16), Cluster(1, 2)).sps
    assert actor_density(Choice(8, 16), crowded, Cluster(1, 2)) == 4.0
    assert actor_density(Choice(8, 16), crowded, Cluster(3, 2)) == 2.0  # two actor nodes of 2 cores


def test_the_crowded_calibration_runs_the_plan_for_this_machine_where_it_puts_more_actors_than_cores():
    from launch.plan_calibrate import crowded_choice

    slow = costs_dict(env_wall=0.010, env_cpu=0.0005)  # actors that mostly wait: several share a core
    got = crowded_choice(slow, max_policy_lag=4, cores=2)
    assert got is not None and got.actors > 2 and got.inference == "inline"
    assert got == next(s.choice for s in rank(Costs.from_dict(slow), Cluster(1, 2), 4) if s.choice.inference == "inline")
    busy = costs_dict(env_wall=0.0001, env_cpu=0.004, counts=(64,))  # each actor keeps a core busy
    assert crowded_choice(busy, max_policy_lag=4, cores=2) is None


def test_measure_counts_the_cores_other_jobs_keep_busy():
    """What ``--measure`` records about its neighbours: a busy loop beside it is most of a core."""
    import subprocess
    import sys

    from launch.plan_measure import other_cores

    loop = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert other_cores(0.5) >= 0.6
    finally:
        loop.kill()
        loop.wait()


def test_calibration_window_starts_after_start_up_and_waits_for_enough_steps():
    from launch.plan_calibrate import window

    line = lambda t, steps, cpu, state="running": {"time": t, "env_steps": steps, "cpu_s": cpu, "state": state}  # noqa: E731
    lines = [line(0, 0, 5.0, "starting"), line(2, 640, 9.0), line(4, 1920, 9.5), line(6, 3200, 10.0), line(8, 4480, 10.5)]
    assert window(lines[:3], 1.0, 100) is None  # the first stepping line holds the compiles: it is not a start
    got = window(lines, 3.0, 1000)
    assert got["cpu_s_per_step"] == pytest.approx(1.0 / 2560) and got["steps"] == 2560
    assert window(lines, 5.0, 1000) is None and window(lines, 3.0, 5000) is None


def test_the_calibration_run_reads_a_real_actor_process_beside_a_trainer(tmp_path):
    """``launch.plan --measure``'s last units, for real: CartPole as two actors of 16 envs and a trainer (the
    crowded calibration's shape; one actor is the same code); every actor's metrics lines carry ``cpu_s`` and
    the unit sums their steps."""
    from launch.plan_calibrate import measure_actor_process
    from srljax.config import write_json

    cfg = apply_overrides(load_file("configs/cartpole_ppo.py"), ["algo.num_steps=32"])
    cfg_json = write_json(cfg, tmp_path / "config.json")
    unit = measure_actor_process(cfg_json, 16, 2.0, tmp_path, log=lambda line: None, actors=2)
    assert unit["steps"] >= 2 * 20 * 16 and unit["cpu_s"] > 0 and unit["wall_s"] >= unit["cpu_s"] * 0.5
    assert (unit["actors"], unit["envs"]) == (2, 16)
    for i in range(2):  # both actors' lines are read
        path = next(tmp_path.glob(f"plan_measure/*/workers/actor-{i}.jsonl"))
        assert all(isinstance(json.loads(x)["cpu_s"], float) for x in path.read_text().splitlines())
