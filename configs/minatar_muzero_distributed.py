"""MinAtar Breakout (gymnax, stepped on the host) by MuZero as a worker graph: 1 actor searching every move of 32 envs,
1 buffer worker keeping the replay and reanalysing half of each batch's windows with the newest params, 1 trainer.

    pip install -e '.[jaxenvs]'
    python -m launch.local configs/minatar_muzero_distributed.py                          # reanalyse half
    python -m launch.local configs/minatar_muzero_distributed.py algo.reanalyse_ratio=0   # no reanalyse
    python -m launch.status runs/minatar_muzero_distributed/<trial>   # the buffer's reanalyse cost and target lag

The MuZero of ``configs/minatar_muzero.py`` (the same networks, search, targets, replay size, and the same update per
env step: 32 minibatches of 128 windows per 512 env steps), with its acting and replay spread over workers
(``srljax/system/staging/search_buffer.py``): the actor searches every move with 8 simulations and pushes segments
of 16 rows with the searches' values and move distributions; the buffer worker keeps the last 100k rows (an env's
segments linked, so windows run on across segment ends as in the single-process ring), and for every 512 env steps
inserted sends the trainer one batch of 4,096 windows (5 moves unrolled, 10-step value targets), of which
``algo.reanalyse_ratio`` were searched again with the newest params it holds.

Sample efficiency at equal env steps (bench/RESULTS.md, "issue 40, session 25"): reanalysing half of each batch made
it *less* sample-efficient here: median 0.95 at ~50k env steps against 2.25 with ``algo.reanalyse_ratio=0`` (seeds
1-3), at 5-7x the wall time (2,048 windows x 16 rows searched per update). With ``algo.rescale_values=false`` the
two were close (seed 1: 2.0 and 1.95).
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
    "return", median=0.9, worst=0.4, wall_s=820, seeds=(1, 2, 3), quick=False,
    source="bench/RESULTS.md (issue 40, session 25, MinAtar Breakout in the graph): last line 0.45 / 1.55 / 0.95 at "
    "~50k env steps, seeds 1-3, 583-817 s at load 11-13; with algo.reanalyse_ratio=0 3.2 / 2.25 / 1.3 (114-138 s)",
)


def experiment() -> Experiment:
    return Experiment(
        name="minatar_muzero_distributed",
        total_env_steps=50_000,
        timeout_seconds=3 * 3600,
        env=EnvConfig(id="gymnax/Breakout-MinAtar", num_envs=32),
        algo=MuZeroConfig(num_steps=16, gamma=0.99, num_simulations=8, unroll_steps=5, td_steps=10, support_size=10,
                          batch_size=128, replay_capacity=100_000, state_size=64, hidden_sizes=(128, 128),
                          reanalyse_ratio=0.5),
        trainer=TrainerConfig(lr=1e-3, anneal_lr=False, num_minibatches=32, update_epochs=1, max_grad_norm=5.0,
                              max_policy_lag=1_000),
        # a batch reanalyses 2,048 windows x 16 rows: 5-8 s at load ~12 here, more beside other work; the default
        # 30 s without a loop turn would read a busy buffer as hung and restart it empty
        layout=LayoutConfig(mode="distributed", num_actors=1, num_buffer_workers=1, inference="inline", hang_seconds=300),
        eval=EvalConfig(every_updates=0, final=False),
        log=LogConfig(log_every=1),
    )
