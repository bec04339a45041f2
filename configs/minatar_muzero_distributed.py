"""MinAtar Breakout (gymnax, stepped on the host) by MuZero as a worker graph: 1 actor searching every move of 32 envs,
1 buffer worker keeping the replay and reanalysing the value targets of half of each batch's windows with the newest
params, 1 trainer.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/minatar_muzero_distributed.py                          # reanalyse half (values)
    python -m launch.local configs/minatar_muzero_distributed.py algo.reanalyse_ratio=0   # no reanalyse
    python -m launch.status runs/minatar_muzero_distributed/<trial>   # the buffer's reanalyse cost and target lag

The MuZero of ``configs/minatar_muzero.py`` (the same networks, search, targets, replay size, and the same update per
env step: 32 minibatches of 128 windows per 512 env steps), with its acting and replay spread over workers
(``srljax/system/staging/search_buffer.py``): the actor searches every move with 8 simulations and pushes segments
of 16 rows with the searches' values and move distributions; the buffer worker keeps the last 100k rows (an env's
segments linked, so windows run on across segment ends as in the single-process ring), and for every 512 env steps
inserted sends the trainer one batch of 4,096 windows (5 moves unrolled, 10-step value targets). Of those,
``algo.reanalyse_ratio`` (0.5) are searched again with the newest params it holds at the rows their value targets
bootstrap from (rows 10..15, ``algo.reanalyse_targets="value"``); their policy targets stay the actor's searches'.

Sample efficiency at equal env steps (bench/RESULTS.md, "issue 40, session 26 (helper 40r)"): reanalysing the
values of half the windows was ahead of no reanalyse at 38.4k and ~50k env steps (seeds 1-9, median of the mean return
over ~5k env steps: 0.33 / 0.94 / 1.79 / 2.74 at 12.8k / 25.6k / 38.4k / ~50k env steps, against 0.32 / 0.73 / 1.33 /
1.47; one-sided Mann-Whitney p = 0.014 at ~50k), at ~2x its wall time. Reanalysing the policy targets too
(``algo.reanalyse_targets=both``, the first version) was behind no reanalyse (median 1.32 at ~50k, seeds 1-3; with
a target network renewed every 8 versions 1.54); the policy targets alone 2.16, within no reanalyse's spread.
"""

from srljax.config import (
    EnvConfig,
    EvalConfig,
    Experiment,
    LayoutConfig,
    LogConfig,
    MuZeroConfig,
    Promise,
    TrainerConfig,
)

PROMISE = Promise(
    "return", median=2.0, worst=1.2, wall_s=370, seeds=(1, 2, 3), quick=False,
    source="bench/RESULTS.md (issue 40, session 26, helper 40r): last line 2.25 / 3.05 / 3.4 at ~51k env steps, "
    "seeds 1-3, 284-310 s beside 5 other runs (load 15-35; 240-370 s for seeds 4-9); with algo.reanalyse_ratio=0 "
    "3.45 / 2.6 / 1.0 (165-174 s)",
)


def experiment() -> Experiment:
    return Experiment(
        name="minatar_muzero_distributed",
        total_env_steps=50_000,
        timeout_seconds=3 * 3600,
        env=EnvConfig(id="gymnax/Breakout-MinAtar", num_envs=32),
        algo=MuZeroConfig(num_steps=16, gamma=0.99, num_simulations=8, unroll_steps=5, td_steps=10, support_size=10,
                          batch_size=128, replay_capacity=100_000, state_size=64, hidden_sizes=(128, 128),
                          reanalyse_ratio=0.5, reanalyse_targets="value"),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=False, num_minibatches=32, update_epochs=1, max_grad_norm=5.0,
                              max_policy_lag=1_000),
        # a batch reanalyses 2,048 windows x 16 rows: 5-8 s at load ~12 here, more beside other work; the default
        # 30 s without a loop turn would read a busy buffer as hung and restart it empty
        layout=LayoutConfig(mode="distributed", num_actors=1, num_buffer_workers=1, inference="inline", hang_seconds=300),
        eval=EvalConfig(every_updates=0, final=False),
        log=LogConfig(log_every=1),
    )
